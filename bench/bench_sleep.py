#!/usr/bin/env python3
"""Sleeping teammates: what 100 of them cost, and how fast a message wakes one.

A real `teamd run` with `idle_timeout` set low, so every teammate goes idle and then sleeps
(exits 75; teamd keeps it `sleeping` and forks it again when work arrives). With all 100
asleep: how many teammate processes exist (none should) and teamd's own memory, which is
all 100 sleepers cost. Then, one sleeper at a time: a message lands in its inbox and is
timed until the request carrying it reaches the scripted server (teamd notices the line,
re-forks the member, which reloads its session and asks the model). The `spawned` journal
line splits that into teamd's part (notice, decide, fork) and the child's.

    python -m bench.bench_sleep [--quick]
"""

from __future__ import annotations

import statistics
import sys
import uuid
from functools import partial

import psutil

from bench.common import MB, Context, Row, figure, row
from bench.lab import TEAM, Lab, carries
from teamd import roster
from tests.harness import wait_until

NAME = "sleep"
TITLE = "sleeping teammates: memory of 100, wake latency (exit 75 + re-fork)"
LIMIT = (240.0, 45.0)
IDLE_TIMEOUT = 1.0


def asleep(lab: Lab, names: list[str]) -> bool:
    members = {m["name"]: m for m in roster.load(lab.ws, TEAM)["members"]}
    return all(members[n]["status"] == "sleeping" and not roster.is_live(members[n])
               for n in names)


def forked_after(lab: Lab, name: str, since: float) -> float | None:
    for rec in reversed(lab.ws.store.read_journal(TEAM)):
        if rec.get("event") == "spawned" and rec.get("member") == name and rec["ts"] >= since:
            return float(rec["ts"])
    return None


def run(ctx: Context) -> list[Row]:
    count = ctx.n(100, 2)
    wakes = ctx.n(20, 1)
    names = [f"s{i:03d}" for i in range(count)]
    lat: list[float] = []
    teamd_part: list[float] = []
    child_part: list[float] = []
    with Lab(ctx, idle_timeout=IDLE_TIMEOUT) as lab:
        ctx.progress(f"spawning {count} teammates (idle_timeout {IDLE_TIMEOUT:g} s)")
        for name in names:
            lab.spawn(name)
        wait_until(partial(asleep, lab, names), max(60.0, ctx.left()),
                   f"{count} teammates asleep", interval=0.1)
        assert lab.daemon is not None
        teamd = psutil.Process(lab.daemon.pid)
        procs = [p for p in teamd.children(recursive=True)]
        info = teamd.memory_full_info()
        ctx.progress(f"all asleep; {len(procs)} teammate processes; waking {wakes}")
        for i, name in enumerate(names[:wakes]):
            if ctx.expired():
                break
            text = f"wake-{i}-{uuid.uuid4().hex}"
            since = len(lab.server.requests)
            _, landed = lab.send(name, text)
            rec = lab.server.wait_for(partial(carries, text=text), 30, since=since)
            lat.append((rec["received_at"] - landed) * 1000)
            forked = forked_after(lab, name, landed)
            if forked is not None:
                teamd_part.append((forked - landed) * 1000)
                child_part.append((rec["received_at"] - forked) * 1000)
            lab.wait_idle([name], 30)  # its start-up is over before the next one
    split = (f"median split (ms): teamd notices and forks {statistics.median(teamd_part):.1f}, "
             f"child to request {statistics.median(child_part):.1f}") if teamd_part else ""
    return [
        row("sleep_memory", f"memory of {count} sleeping teammates",
            f"All {count} asleep (exit 75 after idle_timeout {IDLE_TIMEOUT:g} s): teammate "
            f"processes left: {len(procs)}; what they cost is teamd's own memory (PSS; its "
            f"USS {info.uss / MB:.1f} MB, RSS {info.rss / MB:.1f} MB).",
            figure("exit 75, teamd only", "MB", [info.pss / MB])),
        row("sleep_wake", "wake latency of a sleeping teammate on a new message",
            "From the line landing in a sleeper's inbox (fsynced) to the request carrying "
            "it at the scripted server: teamd sees the line, re-forks the member, which "
            "reloads its session and asks. One sleeper at a time, the next once it is idle.",
            figure("re-fork", "ms", lat, p99=True, detail=split)),
    ]


if __name__ == "__main__":
    from bench.suite import standalone

    sys.exit(standalone(sys.modules[__name__]))
