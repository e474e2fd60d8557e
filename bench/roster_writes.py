"""What one status write costs as the team grows (issue 10, "spec and status apart").

Times `roster.update_status` (a teammate's status or usage write: the hot path),
`roster.update_member` (the supervisor's pid/exit write) and `roster.load` (a reader's whole
merged roster) for one member of a team of 10 and of 300 members, and prints the medians.
Run it against any tree's `teamd` to compare, e.g. before the split:

    git -C /path/to/repo archive OLD teamd | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old python bench/roster_writes.py
    python bench/roster_writes.py           # this tree

No figure is asserted anywhere: this prints what it measured.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from teamd import actions, roster
from teamd.files import Json
from teamd.layout import Workspace

TEAM = "bench"
PROMPT = "Handle the backend tasks of the migration, one at a time. " * 8  # a real-sized spec


def make_team(ws: Workspace, members: int, cwd: str) -> None:
    """A team of `members`, added in one roster update (how they got there is not what
    is measured)."""
    actions.create_team(ws, TEAM)

    def add(config: Json) -> None:
        for i in range(members):
            config["members"].append(roster.new_member(
                config, f"m{i}", kind="teammate", role="engineer", prompt=PROMPT,
                model=None, plan_mode_required=False, cwd=cwd))

    roster.update(ws, TEAM, add)


def timed(step: Callable[[int], object], runs: int) -> list[float]:
    samples = []
    for i in range(runs):
        start = time.perf_counter()
        step(i)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def measure(members: int, runs: int, base: Path) -> dict[str, list[float]]:
    root = Path(tempfile.mkdtemp(prefix=f"roster-{members}-", dir=base))
    ws = Workspace.at(root)
    try:
        make_team(ws, members, str(root))
        name = f"m{members // 2}"

        def status(i: int) -> None:
            def change(m: Json) -> None:
                m["status"] = "active" if i % 2 else "idle"
                usage = m.setdefault("usage", {})
                usage["input_tokens"] = int(usage.get("input_tokens") or 0) + 100
            roster.update_status(ws, TEAM, name, change)

        def member(i: int) -> None:
            roster.update_member(ws, TEAM, name,
                                 lambda m, config: m.update(pid=1000 + i, restart_at=None))

        return {"update_status": timed(status, runs), "update_member": timed(member, runs),
                "load": timed(lambda i: roster.load(ws, TEAM), max(5, runs // 5))}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="writes timed per figure")
    parser.add_argument("--sizes", default="10,300", help="team sizes, comma-separated")
    parser.add_argument("--dir", default=None, help="where the scratch roots go (default "
                        "the system's temp folder)")
    args = parser.parse_args()
    base = Path(args.dir or tempfile.gettempdir())
    split = hasattr(roster, "read_status")
    print(f"teamd from {Path(roster.__file__).parent} (split roster: {split}); "
          f"python {sys.version.split()[0]}; {args.runs} runs; scratch in {base}")
    print(f"{'members':>8} {'what':<14} {'median ms':>10} {'p90 ms':>8} {'min ms':>8}")
    for size in (int(s) for s in args.sizes.split(",")):
        for what, samples in measure(size, args.runs, base).items():
            ordered = sorted(samples)
            p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
            print(f"{size:>8} {what:<14} {statistics.median(samples):>10.3f} "
                  f"{p90:>8.3f} {ordered[0]:>8.3f}")


if __name__ == "__main__":
    main()
