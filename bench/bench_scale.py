#!/usr/bin/env python3
"""The scale curves of `bench/scale.py`, once that file exists (it comes with the scale
issue); until then the row says so explicitly.

Protocol for bench/scale.py: if it defines `run(ctx) -> list[Row]` (like every bench_*.py),
its rows join the table; otherwise it is run as `python -m bench.scale` (with `--quick` in
smoke mode) within this benchmark's time limit and its output is quoted in the row.

    python -m bench.bench_scale [--quick]
"""

from __future__ import annotations

import importlib
import subprocess
import sys

from bench.common import REPO, Context, Row, not_measured

NAME = "scale"
TITLE = "scale curves (bench/scale.py)"
LIMIT = (3000.0, 60.0)  # full: 300 members start slowly on this code
SCRIPT = REPO / "bench" / "scale.py"


def run(ctx: Context) -> list[Row]:
    if not SCRIPT.exists():
        return [not_measured("scale", "scale curves", "bench/scale.py arrives with the scale "
                             "issue; nothing measured in this run")]
    module = importlib.import_module("bench.scale")
    if hasattr(module, "run"):
        rows: list[Row] = module.run(ctx)
        return rows
    cmd = [sys.executable, "-m", "bench.scale", *(["--quick"] if ctx.quick else [])]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True,
                          timeout=max(5.0, ctx.left()), check=False)
    out = " ".join(done.stdout.split())[-2000:] or "(no output)"
    return [not_measured("scale", "scale curves", f"`{' '.join(cmd[1:])}` exited "
                         f"{done.returncode}: {out}", note="bench/scale.py printed")]


if __name__ == "__main__":
    from bench.suite import standalone

    sys.exit(standalone(sys.modules[__name__]))
