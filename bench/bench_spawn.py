#!/usr/bin/env python3
"""Spawn → first model request: a fork of the preloaded supervisor vs a fresh interpreter.

Ours: `actions.spawn` (what `teamctl spawn` and the lead's Task tool do: the roster line,
locked and fsynced) under a real `teamd run`, timed from the call until the teammate's first
request reaches the scripted server. One spawn at a time, each once the previous one is
idle. The `spawned` journal line (written by teamd once it has forked and recorded the pid)
splits the time into: the roster write, teamd noticing and forking, the child's way to its
first request.

Baseline, interleaved with ours so both see the same machine: a fresh
`python -m bench.baselines.seed_member` process per teammate (imports anthropic, builds a
client, asks), timed from `Popen` to its first request, then ended.

    python -m bench.bench_spawn [--quick]
"""

from __future__ import annotations

import statistics
import sys
import time
from functools import partial

from bench.common import Context, Row, figure, row
from bench.lab import TEAM, Lab, is_from

NAME = "spawn"
TITLE = "spawn → first model request (fork vs fresh interpreter)"
LIMIT = (180.0, 40.0)


def spawned_at(lab: Lab, name: str) -> float | None:
    for rec in reversed(lab.ws.store.read_journal(TEAM)):
        if rec.get("event") == "spawned" and rec.get("member") == name:
            return float(rec["ts"])
    return None


def run(ctx: Context) -> list[Row]:
    spawns = ctx.n(20, 1)
    ours: list[float] = []
    base: list[float] = []
    parts: dict[str, list[float]] = {"roster": [], "teamd": [], "child": []}
    with Lab(ctx) as lab:
        for i in range(spawns):
            if ctx.expired():
                break
            name = f"m{i:02d}"
            since = len(lab.server.requests)
            start = time.time()
            lab.spawn(name)
            returned = time.time()
            rec = lab.server.wait_for(partial(is_from, name), 30, since=since)
            ours.append((rec["received_at"] - start) * 1000)
            forked = spawned_at(lab, name)
            if forked is not None:
                parts["roster"].append((returned - start) * 1000)
                parts["teamd"].append((forked - returned) * 1000)
                parts["child"].append((rec["received_at"] - forked) * 1000)
            lab.wait_idle([name], 30)

            seed = f"seed{i:02d}"
            since = len(lab.server.requests)
            start = time.time()
            lab.start_seed(seed)
            rec = lab.server.wait_for(partial(is_from, seed), 60, since=since)
            base.append((rec["received_at"] - start) * 1000)
            lab.stop_seed(seed)
            ctx.progress(f"{i + 1}/{spawns}: fork {ours[-1]:.0f} ms, fresh {base[-1]:.0f} ms")
    split = ", ".join(f"{k} {statistics.median(v):.1f}" for k, v in parts.items() if v)
    return [row(
        "spawn", "spawn → first model request", "From the spawn call (the roster line written, "
        "as `teamctl spawn` or the Task tool does) until the teammate's first request reaches "
        "the scripted server; one at a time, each on a quiet system. Baseline, interleaved: "
        "a fresh `python -m bench.baselines.seed_member` per teammate, from Popen to its "
        "first request.",
        figure("fork of the preloaded teamd", "ms", ours,
               detail=f"median split (ms): {split}" if split else ""),
        figure("fresh `python -m` process", "ms", base))]


if __name__ == "__main__":
    from bench.suite import standalone

    sys.exit(standalone(sys.modules[__name__]))
