#!/usr/bin/env python3
"""How fast teamctl starts and answers (issue 2's benchmark; target < 0.25 s wall each).

Makes a workspace root on the ordinary disk (a temporary folder under the current
directory, so every fsync the contract asks for is real; /tmp may be a tmpfs), creates a
team with a 100-task board and one member, then times N runs each of

    teamctl --root ROOT task list T
    teamctl --root ROOT send T m "hello"

as real subprocesses of the installed console script (the `teamctl` beside this
interpreter), and prints p50 / p90 / max wall seconds against the target. One untimed run
of each comes first, so the numbers are for a warm page cache, as a user typing sees them.

    python bench/bench_cli.py [--runs 20] [--tasks 100] [--dir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.common import fs_type, percentile  # noqa: E402
from teamd import actions, board  # noqa: E402
from teamd.layout import Workspace  # noqa: E402

TEAM, MEMBER = "bench", "m"
TEAMCTL = Path(sys.executable).parent / "teamctl"
TARGET_S = 0.25


def setup(root: Path, tasks: int) -> None:
    ws = Workspace.at(root)
    actions.create_team(ws, TEAM, "bench_cli")
    actions.spawn(ws, TEAM, MEMBER, "benchmark member")
    for i in range(1, tasks + 1):
        board.create(ws, TEAM, f"task {i}: something to do",
                     blocked_by=[i - 1] if i > 1 and i % 10 else [])


def time_runs(root: Path, args: list[str], runs: int) -> list[float]:
    cmd = [str(TEAMCTL), "--root", str(root), *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEAMD_", "ANTHROPIC_"))}

    def once() -> float:
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, env=env, check=False)
        took = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(args)} failed ({done.returncode}): "
                             f"{done.stderr.decode().strip()}")
        return took

    once()  # warm-up, not counted
    return [once() for _ in range(runs)]


def imports_anthropic() -> bool:
    code = "import sys, teamctl.cli; print('anthropic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return out.stdout.strip() == "True"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="timed runs per command")
    parser.add_argument("--tasks", type=int, default=100, help="tasks on the board")
    parser.add_argument("--dir", type=Path, default=Path.cwd(),
                        help="where to make the temporary root (default: the current "
                        "directory, on the ordinary disk)")
    parser.add_argument("--keep", action="store_true", help="keep the root afterwards")
    opts = parser.parse_args()
    if not TEAMCTL.exists():
        raise SystemExit(f"no console script at {TEAMCTL}: pip install -e . first")

    root = Path(tempfile.mkdtemp(prefix=".bench-cli-", dir=opts.dir))
    try:
        fs = fs_type(root)
        print(f"root     {root} ({fs})")
        if fs in ("tmpfs", "ramfs"):
            print("warning: the root is in memory; fsync costs nothing there. "
                  "Use --dir on a real disk.")
        print(f"teamctl  {TEAMCTL}")
        print(f"python   {sys.version.split()[0]}, {os.cpu_count()} CPUs; "
              f"teamctl imports anthropic: {'YES (slow!)' if imports_anthropic() else 'no'}")
        setup(root, opts.tasks)
        print(f"board    {opts.tasks} tasks in team {TEAM!r}; {opts.runs} timed runs each "
              "after one warm-up\n")
        rows = [
            (f"task list {TEAM}", ["task", "list", TEAM]),
            (f'send {TEAM} {MEMBER} "hello"', ["send", TEAM, MEMBER, "hello"]),
        ]
        header = f"{'command':<24} {'runs':>5} {'p50 s':>8} {'p90 s':>8} {'max s':>8} " \
                 f"{'target s':>9}  verdict"
        print(header)
        print("-" * len(header))
        worst = 0.0
        for label, args in rows:
            times = time_runs(root, args, opts.runs)
            p50, p90, top = percentile(times, 50), percentile(times, 90), max(times)
            worst = max(worst, p50)
            verdict = "ok" if p50 < TARGET_S else "SLOW"
            print(f"{label:<24} {len(times):>5} {p50:>8.3f} {p90:>8.3f} {top:>8.3f} "
                  f"{'< ' + format(TARGET_S, '.2f'):>9}  {verdict}")
        print(f"\nverdict: p50 {'within' if worst < TARGET_S else 'OVER'} the "
              f"{TARGET_S:.2f} s target")
        return 0
    finally:
        if opts.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
