#!/usr/bin/env python3
"""How fast `teamctl` answers, next to what merely importing the SDK costs.

A team with a 100-task board and one member on a workspace on disk (every fsync real);
the installed `teamctl` console script run as a real subprocess:

    teamctl --root ROOT task list T
    teamctl --root ROOT send T m "hello"

timed from start to exit, next to `python -c "import anthropic"` (what any command that
imported the SDK would pay before doing anything), all three interleaved run by run, after
one untimed warm-up each (a warm page cache, as a user typing sees it). Also checks that
`teamctl` does not import anthropic at all. Then `task list`, `send` and `status` against a
PostgreSQL store holding the same team (a private cluster, tests/postgres.py), beside the
files store's times; where no PostgreSQL is installed that row says so.

    python -m bench.bench_cli [--quick]
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from bench.common import Context, Row, figure, not_measured, row
from bench.lab import TEAMCTL
from teamd import actions, board
from teamd.layout import Workspace

NAME = "cli"
TITLE = "teamctl command latency vs python -c 'import anthropic'"
LIMIT = (120.0, 30.0)
TEAM, MEMBER = "bench", "m"


def setup(root: Path, tasks: int, store: str | None = None) -> None:
    root.mkdir(exist_ok=True)  # the member's cwd (a database store makes no folder there)
    ws = Workspace.at(root, store=store)
    actions.create_team(ws, TEAM, "bench_cli")
    actions.spawn(ws, TEAM, MEMBER, "benchmark member")
    for i in range(1, tasks + 1):
        board.create(ws, TEAM, f"task {i}: something to do",
                     blocked_by=[i - 1] if i > 1 and i % 10 else [])


def timed(cmd: list[str], store: str | None = None) -> float:
    """Milliseconds `cmd` took, start to exit (`store`: the `TEAMD_STORE` it runs with)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEAMD_", "ANTHROPIC_"))}
    if store is not None:
        env["TEAMD_STORE"] = store
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, env=env, check=False)
    took = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): "
                           f"{done.stderr.decode().strip()}")
    return took


def imports_anthropic() -> bool:
    code = "import sys, teamctl.cli; print('anthropic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return out.stdout.strip() == "True"


def run(ctx: Context) -> list[Row]:
    if not TEAMCTL.exists():
        raise RuntimeError(f"no console script at {TEAMCTL}: pip install -e . first")
    runs, tasks = ctx.n(20, 1), ctx.n(100, 10)
    root = ctx.workdir / "ws"
    setup(root, tasks)
    commands = {
        "list": [str(TEAMCTL), "--root", str(root), "task", "list", TEAM],
        "send": [str(TEAMCTL), "--root", str(root), "send", TEAM, MEMBER, "hello"],
        "sdk": [sys.executable, "-c", "import anthropic"],
    }
    times: dict[str, list[float]] = {k: [] for k in commands}
    if not ctx.quick:  # one untimed run each: a warm page cache, as a user typing sees it
        for cmd in commands.values():
            timed(cmd)
    for i in range(runs):
        if ctx.expired():
            break
        for key, cmd in commands.items():
            times[key].append(timed(cmd))
        if (i + 1) % 5 == 0:
            ctx.progress(f"{i + 1}/{runs}")
    rows = postgres_rows(ctx, runs, tasks, {k: c for k, c in commands.items() if k != "sdk"},
                         times)
    heavy = imports_anthropic()
    what = (f"Wall time of the installed console script as a subprocess, start to exit, "
            f"workspace on disk with a {tasks}-task board; interleaved run by run with "
            "`python -c \"import anthropic\"` (the same samples in both rows). teamctl "
            f"imports anthropic: {'YES (a bug)' if heavy else 'no'}.")
    sdk = figure('python -c "import anthropic"', "ms", times["sdk"])
    return [
        row("cli_list", f"`teamctl task list` ({tasks} tasks) latency", what,
            figure("teamctl task list", "ms", times["list"]), sdk),
        row("cli_send", "`teamctl send` latency", what,
            figure("teamctl send", "ms", times["send"]), sdk),
        *rows,
    ]


def postgres_rows(ctx: Context, runs: int, tasks: int, commands: dict[str, list[str]],
                  files_times: dict[str, list[float]]) -> list[Row]:
    """The same commands (and `status`) against a PostgreSQL store of the same team (a
    private cluster, every commit fsynced), beside the files store's times of this run."""
    from bench.bench_claims import postgres_cluster

    title = "`teamctl` latency on PostgreSQL"
    cluster, why = postgres_cluster()
    if cluster is None:
        return [not_measured("cli_postgres", title, why, note="no PostgreSQL")]
    root = ctx.workdir / "ws"
    try:
        from teamd.store.postgres import install_schema
        url = cluster.database()  # type: ignore[attr-defined]
        install_schema(url)
        setup(ctx.workdir / "pg", tasks, store=url)
        commands = {**commands, "status": [str(TEAMCTL), "--root", str(root), "status", TEAM]}
        pg_root = str(ctx.workdir / "pg")
        on_pg = {k: [pg_root if a == str(root) else a for a in c] for k, c in commands.items()}
        files_times = {**files_times, "status": []}
        pg_times: dict[str, list[float]] = {k: [] for k in commands}
        timed(commands["status"])  # warm-up, untimed
        for key in commands:
            timed(on_pg[key], url)
        for _ in range(runs):
            if ctx.expired():
                break
            files_times["status"].append(timed(commands["status"]))
            for key in commands:
                pg_times[key].append(timed(on_pg[key], url))
    finally:
        cluster.stop()  # type: ignore[attr-defined]
    what = ("Wall time of the installed console script, start to exit, with TEAMD_STORE a "
            "PostgreSQL database on a Unix socket (a private cluster, commits fsynced) "
            f"holding the same team and {tasks}-task board, beside the files store's times "
            "of this run.")
    return [row(f"cli_postgres_{key.replace(' ', '_')}", f"`teamctl {name}` on PostgreSQL",
                what, figure(f"teamctl {name}, PostgreSQL", "ms", pg_times[key]),
                figure(f"teamctl {name}, files", "ms", files_times[key]))
            for key, name in (("list", "task list"), ("send", "send"), ("status", "status"))]


if __name__ == "__main__":
    from bench.suite import standalone

    sys.exit(standalone(sys.modules[__name__]))
