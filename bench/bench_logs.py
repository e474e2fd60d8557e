#!/usr/bin/env python3
"""How `teamctl logs` copes with a big journal (issue 8: 60 MB took 5 s and 680 MB).

Writes a journal of `--mb` megabytes of small events into a fresh workspace, then runs the
installed console script as real subprocesses and prints, for each, wall seconds and peak
memory (the child's own ru_maxrss, from wait4):

    teamctl logs T -n 100        reads only the tail, backwards
    teamctl logs T -n 100 alice  the same, counting only alice's events (one in three)
    teamctl logs T > /dev/null   the whole journal, streamed
    teamctl logs -n 100          every team (this one and a small one), interleaved by time
    teamctl logs > /dev/null     every team's whole journal, interleaved

    python -m bench.bench_logs [--mb 60] [--dir DIR]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from teamd import actions, events
from teamd.layout import Workspace

TEAM = "bench"
TEAMCTL = Path(sys.executable).parent / "teamctl"


def fill(ws: Workspace, megabytes: int) -> int:
    line = (b'{"ts":%d.5,"event":"tool_call","member":"%s","tool":"bash","input":'
            b'{"command":"ls -la src/"},"ok":true,"ms":12}\n')
    names = [b"alice", b"bob", b"carol"]
    journal = Path(ws.store.describe_journal(TEAM))  # the files store's: a bench of files
    with open(journal, "ab") as f:
        i = 0
        while f.tell() < megabytes * 1_000_000:
            f.write(b"".join(line % (1_700_000_000 + j, names[j % 3])
                             for j in range(i, i + 10_000)))
            i += 10_000
    return journal.stat().st_size


#: runs a command and prints its wall time and peak RSS (KiB). A small parent of its own,
#: because a process forked from a big one (this bench, after `fill`; pytest) starts with
#: that parent's peak as its `ru_maxrss`
_RUSAGE = """
import os, subprocess, sys, time
started = time.monotonic()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(proc.pid, 0)
print(time.monotonic() - started, usage.ru_maxrss, os.waitstatus_to_exitcode(status))
"""


def measure(ws: Workspace, *args: str, every_team: bool = False) -> tuple[float, float]:
    """`teamctl logs TEAM *args` (`teamctl logs *args` for `every_team`): (wall seconds,
    peak RSS in MB) of the command alone."""
    which = [] if every_team else [TEAM]
    out = subprocess.run([sys.executable, "-c", _RUSAGE, str(TEAMCTL), "--root", str(ws.root),
                          "logs", *which, *args], capture_output=True, text=True, check=True)
    wall, peak_kib, code = out.stdout.split()
    if int(code) != 0:
        raise SystemExit(f"teamctl logs {' '.join(args)} failed")
    return float(wall), int(peak_kib) / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=60)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-logs-", dir=args.dir))
    try:
        ws = Workspace.at(folder)
        actions.create_team(ws, TEAM)
        for name in ("alice", "bob", "carol"):
            actions.spawn(ws, TEAM, name, "work")
        size = fill(ws, args.mb)
        actions.create_team(ws, "small")  # a second team, for the interleaved reads
        for i in range(1000):
            events.emit(ws, "small", "tick", member="dave", n=i)
        print(f"journal: {size / 1e6:.0f} MB (and a second team's of 1,000 events)")
        for label, extra, every in (("T -n 100", ["-n", "100"], False),
                                    ("T -n 100 alice", ["-n", "100", "alice"], False),
                                    ("T (whole)", [], False),
                                    ("-n 100", ["-n", "100"], True),
                                    ("(every team)", [], True)):
            wall, peak = measure(ws, *extra, every_team=every)
            print(f"teamctl logs {label:16} {wall:6.2f} s   peak {peak:6.1f} MB", flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
