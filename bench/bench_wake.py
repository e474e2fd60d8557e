#!/usr/bin/env python3
"""Wake latency of an idle teammate (issue 4's benchmark).

From the moment a message line has landed in an idle teammate's inbox (the append
returned, fsynced) until the scripted model server receives the request carrying that
message. One teammate under a real `teamd run`, the real `anthropic` SDK over real HTTP,
on the ordinary disk (a temporary root under the current directory, not tmpfs) with every
fsync the contract asks for. Prints p50/p90/p99/max in milliseconds.

    python bench/bench_wake.py [--sends 200] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.common import fs_type, percentile  # noqa: E402
from teamd import actions, files, roster  # noqa: E402
from teamd.layout import Workspace  # noqa: E402
from teamd.scripted import ScriptedServer  # noqa: E402
from tests.harness import running_teamd, wait_until  # noqa: E402

TEAM, NAME = "bench", "sleeper"
TARGET_P50, TARGET_P99 = 5.0, 50.0


def landed_times() -> dict[str, float]:
    """Wrap the JSONL append so the bench knows when each inbox line has landed."""
    landed: dict[str, float] = {}
    original = files.append_jsonl

    def append(path: Path, records: Any, **kw: Any) -> None:
        records = list(records)
        original(path, records, **kw)
        if path.name.endswith("_inbox.jsonl"):
            now = time.time()
            for r in records:
                landed.setdefault(r["id"], now)

    files.append_jsonl = append
    return landed


def status(ws: Workspace) -> str:
    return str(roster.get(roster.load(ws, TEAM), NAME)["status"])


def turns_done(ws: Workspace) -> int:
    """Output tokens so far: they grow once per finished model call (the teammate adds
    them to the roster after each reply, before it goes idle)."""
    return int(roster.get(roster.load(ws, TEAM), NAME)["usage"]["output_tokens"])


def carries(record: dict[str, Any], text: str) -> bool:
    """Does the request's last user turn (its new input) carry `text`?"""
    return text in json.dumps(record["body"]["messages"][-1]["content"])


def idle_after(ws: Workspace, done_before: int) -> bool:
    m = roster.get(roster.load(ws, TEAM), NAME)
    return m["status"] == "idle" and int(m["usage"]["output_tokens"]) > done_before


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sends", type=int, default=200)
    ap.add_argument("--keep", action="store_true", help="keep the temporary workspace")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix=".bench-wake-", dir=Path.cwd()))
    if fs_type(tmp) in ("tmpfs", "ramfs"):
        print(f"warning: {tmp} is on {fs_type(tmp)}; run from a folder on the ordinary disk",
              file=sys.stderr)
    root = tmp / "ws"
    root.mkdir()
    ws = Workspace.at(root)
    for key in ("ANTHROPIC_API_KEY", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
        os.environ.pop(key, None)
    landed = landed_times()
    try:
        with ScriptedServer({"rules": []}) as server:
            actions.create_team(ws, TEAM)
            actions.spawn(ws, TEAM, NAME, "Answer messages.", cwd=str(tmp))
            with running_teamd(ws, server.url, idle_timeout=3600):
                wait_until(lambda: status(ws) == "idle", 30, "the teammate to go idle")
                lat: list[float] = []
                for i in range(args.sends):
                    text = f"bench-{i}-{uuid.uuid4().hex}"
                    since = len(server.requests)
                    done = turns_done(ws)
                    msg = actions.send(ws, TEAM, NAME, text)
                    rec = server.wait_for(partial(carries, text=text), 10, since=since)
                    lat.append((rec["received_at"] - landed[msg["id"]]) * 1000)
                    # idle again after answering this message (the roster may still say
                    # idle from before while the request is on its way)
                    wait_until(partial(idle_after, ws, done), 10, "idle again",
                               interval=0.001)
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"wake latency, {len(lat)} sends, root {tmp} ({fs_type(tmp)}), "
              f"{os.cpu_count()} CPUs, load average {load}:")
        print(f"  p50 {percentile(lat, 50):.2f} ms  p90 {percentile(lat, 90):.2f} ms  "
              f"p99 {percentile(lat, 99):.2f} ms  max {max(lat):.2f} ms  "
              f"mean {statistics.fmean(lat):.2f} ms")
        ok = percentile(lat, 50) < TARGET_P50 and percentile(lat, 99) < TARGET_P99
        print(f"  targets p50 < {TARGET_P50:g} ms, p99 < {TARGET_P99:g} ms: "
              f"{'met' if ok else 'MISSED'}")
        return 0 if ok else 1
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
