#!/usr/bin/env python3
"""Task claims per second with 32 racing processes, and how many tasks got two owners.

A board of pending, unblocked tasks; 32 processes race to claim until nothing is left,
each noting the ids it was told it got. Claims per second = tasks claimed / time until the
last racer is done; a double claim is a task that more than one racer was told is theirs.

Ours: `teamd.board.claim` of each task in turn, lowest id first (the board lock, the re-check
under it, an atomic fsynced write).
Baseline: the seeds' scan-then-write (bench/baselines/seed_board.py): scan the board, take
the first unclaimed task, update it under a lock without looking again. Same board files,
reset between rounds; rounds interleaved so both see the same machine.

("500 tasks to 10 idle members", teamd's own assignment, is bench/bench_assign.py.)

    python -m bench.bench_claims [--quick]
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.synchronize
import sys
import time
from collections import Counter
from multiprocessing.connection import Connection
from pathlib import Path

from bench.baselines import seed_board
from bench.common import Context, Row, figure, row
from teamd import actions, board
from teamd.layout import Workspace

NAME = "claims"
TITLE = "task claims/s, 32 racers; double claims (board.claim vs scan-then-write)"
LIMIT = (150.0, 30.0)
RACERS = 32
TEAM = "bench"
MP = multiprocessing.get_context("fork")


def racer(kind: str, ws: Workspace, name: str, go: multiprocessing.synchronize.Event,
          out: Connection) -> None:
    go.wait()
    got: list[int] = []
    if kind == "ours":  # each task in turn, lowest id first: claimed, or someone's already
        for task_id in sorted(int(t["id"]) for t in board.list_tasks(ws, TEAM)):
            if board.claim(ws, TEAM, name, task_id) is not None:
                got.append(task_id)
    while kind != "ours":
        found = seed_board.claim(ws.store.paths.tasks_dir(TEAM), name)
        if found is None:
            break
        got.append(found)
    out.send(got)
    out.close()


def one_round(kind: str, ws: Workspace, fresh: dict[Path, bytes],
              racers: int = RACERS) -> tuple[float, int, int]:
    """(claims per second, tasks claimed, double claims) of one race on a fresh board."""
    for path, data in fresh.items():
        path.write_bytes(data)
    go = MP.Event()
    pipes = [MP.Pipe(duplex=False) for _ in range(racers)]
    procs = [MP.Process(target=racer, args=(kind, ws, f"r{i:02d}", go, pipes[i][1]))
             for i in range(racers)]
    for p in procs:
        p.start()
    time.sleep(0.3)  # all started and waiting
    start = time.monotonic()
    go.set()
    claims = [pipes[i][0].recv() for i in range(racers)]
    elapsed = time.monotonic() - start
    for p in procs:
        p.join(30)
    owners = Counter(t for got in claims for t in set(got))
    return len(owners) / elapsed, len(owners), sum(1 for n in owners.values() if n > 1)


def run(ctx: Context) -> list[Row]:
    tasks = ctx.n(200, 20)
    rounds = ctx.n(3, 1)
    ws = Workspace.at(ctx.workdir / "ws")
    actions.create_team(ws, TEAM)
    for i in range(tasks):
        board.create(ws, TEAM, f"task {i}")
    fresh = {p: p.read_bytes() for p in ws.store.paths.tasks_dir(TEAM).glob("*.json")}
    rates: dict[str, list[float]] = {"ours": [], "seed": []}
    counts: dict[str, Counter[str]] = {"ours": Counter(), "seed": Counter()}
    for r in range(rounds):
        for kind in ("ours", "seed"):
            rate, claimed, doubles = one_round(kind, ws, fresh)
            rates[kind].append(rate)
            counts[kind].update(claimed=claimed, double_claims=doubles)
            ctx.progress(f"round {r + 1}: {kind} {rate:.0f} claims/s, {claimed} tasks, "
                         f"{doubles} double claims")
    return [row(
        "claims", f"task claims/s, {RACERS} racing processes, {tasks} tasks",
        f"{RACERS} processes claim until the board is empty; {rounds} rounds each, "
        "interleaved, on a reset board; claimed = distinct tasks over all rounds, "
        "double claims = tasks more than one racer was told it owns.",
        figure("board.claim", "claims/s", rates["ours"], counts=dict(counts["ours"])),
        figure("scan-then-write", "claims/s", rates["seed"], counts=dict(counts["seed"])),
        better="higher")]


if __name__ == "__main__":
    from bench.suite import standalone

    sys.exit(standalone(sys.modules[__name__]))
