#!/usr/bin/env python3
"""A team tool call on PostgreSQL: its effect, its `tool_call` line and its recorded result
as one step (`Store.together`, CONTRACT §15) against each unit its own transaction.

One member's toolbox runs TaskCreate, TaskUpdate (completed) and SendMessage in turn, each
result recorded in its session through `Toolbox.run`'s `record`, as the built-in loop does.
Ours: the product (one transaction per call). Baseline: the same calls with the step made
nothing (each unit commits on its own, as before issue 24's atomic step). Commits per call
are counted from the crash log (`TEAMD_CRASH_LOG`: one line per durable write); time per
call is the three calls' wall time over three. Rounds interleaved, one private cluster
(tests/postgres.py, every commit fsynced). Where no PostgreSQL is installed the row says so.

    python -m bench.bench_tool_steps [--quick]
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from bench.bench_claims import postgres_cluster
from bench.common import Context, Row, figure, not_measured, row
from teamd import actions, crashpoints
from teamd.agent.session import Session
from teamd.agent.tools import Toolbox, ToolResult
from teamd.layout import Workspace

NAME = "tool_steps"
TITLE = "a team tool call on PostgreSQL: one step vs a transaction per unit"
LIMIT = (120.0, 40.0)
TEAM = "bench"


@contextlib.contextmanager
def apart(ws: Workspace) -> Iterator[None]:
    """The baseline: the store's steps made nothing (each unit commits on its own)."""
    setattr(ws.store, "together", contextlib.nullcontext)  # noqa: B010 (an instance's own)
    try:
        yield
    finally:
        delattr(ws.store, "together")


def calls(ws: Workspace, box: Toolbox, session: Session, log: Path, n: int
          ) -> tuple[list[float], int]:
    """`n` rounds of the three calls: ms per call of each round, and commits made."""
    def record(result: ToolResult) -> None:
        session.append({"type": "tool_result", "block": {
            "type": "tool_result", "tool_use_id": "bench", "content": result.content,
            "is_error": result.is_error}})

    before = _commits(log)
    times = []
    for i in range(n):
        start = time.perf_counter()
        made = box.run("TaskCreate", {"subject": f"task {i}"}, record=record)
        task_id = int(made.content.split("#", 1)[1].split()[0])
        box.run("TaskUpdate", {"task_id": task_id, "status": "completed"}, record=record)
        box.run("SendMessage", {"recipient": "lead", "content": f"done {i}"}, record=record)
        times.append((time.perf_counter() - start) * 1000 / 3)
    return times, _commits(log) - before


def _commits(log: Path) -> int:
    try:
        return sum(1 for line in log.read_text().splitlines() if '"n"' in line)
    except FileNotFoundError:
        return 0


def run(ctx: Context) -> list[Row]:
    title = "a team tool call on PostgreSQL: ms and commits per call"
    cluster, why = postgres_cluster()
    if cluster is None:
        return [not_measured(NAME, title, why, note="no PostgreSQL")]
    log = ctx.workdir / "crash.jsonl"
    os.environ[crashpoints.LOG] = str(log)
    crashpoints._switch.load()  # counts this process's durable writes from here
    try:
        from teamd.store.postgres import install_schema
        url = cluster.database()  # type: ignore[attr-defined]
        install_schema(url)
        ws = Workspace.at(ctx.workdir / "ws", store=url)
        actions.create_team(ws, TEAM)
        actions.spawn(ws, TEAM, "alice", "work", cwd=str(ctx.workdir))
        box = Toolbox(ws, TEAM, "alice", kind="teammate", cwd=ctx.workdir, bash_timeout=10,
                      plan_mode_required=False)
        session = Session.load(ws.store, TEAM, "alice")
        n, rounds = ctx.n(100, 20), ctx.n(3, 1)
        ours: list[float] = []
        base: list[float] = []
        commits = {"ours": 0, "baseline": 0}
        for r in range(rounds):
            times, made = calls(ws, box, session, log, n)
            ours += times
            commits["ours"] += made
            with apart(ws):
                times, made = calls(ws, box, session, log, n)
            base += times
            commits["baseline"] += made
            ctx.progress(f"round {r + 1}: {commits}")
    finally:
        os.environ.pop(crashpoints.LOG, None)
        crashpoints._switch.load()
        cluster.stop()  # type: ignore[attr-defined]
    per = {k: v / (3 * n * rounds) for k, v in commits.items()}
    return [row(
        NAME, title,
        f"TaskCreate, TaskUpdate (completed) and SendMessage by one member's toolbox, each "
        f"result recorded in its session; {rounds} rounds of {n}, interleaved. Commits per "
        f"call: {per['ours']:.2f} as one step, {per['baseline']:.2f} a transaction per unit.",
        figure("one step (together)", "ms/call", ours, p99=True,
               counts={"commits": commits["ours"]}),
        figure("a transaction per unit", "ms/call", base, p99=True,
               counts={"commits": commits["baseline"]}),
        better="lower")]


if __name__ == "__main__":
    from bench.suite import standalone

    sys.exit(standalone(sys.modules[__name__]))
