#!/usr/bin/env python3
"""Delivery latency: a line in an idle teammate's inbox → its request at the model server.

Ours: one teammate forked by a real `teamd run`, idle (blocked on its wake pipe, which teamd
pokes); each message is
appended to its inbox (locked, fsynced) and timed from the moment it has landed until the
scripted server receives the request carrying it (real `anthropic` SDK, real HTTP). The next
message goes only once the teammate is idle again.

Baseline: seed-design teammates (`bench/baselines/seed_member.py`), each polling its inbox
every second; each message is written at a random moment of the poll cycle by the seeds'
lock-file write, timed the same way.

Also: `teamctl send` → request at the model, the whole command (start of the process to the
request), same idle teammate.

    python -m bench.bench_wake [--quick]
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from functools import partial

from bench.baselines.seed_inbox import write_to_inbox
from bench.common import Context, Row, figure, row
from bench.lab import TEAM, TEAMCTL, Lab, carries, is_from
from teamd.layout import LEAD
from tests.harness import wait_until

NAME = "wake"
TITLE = "delivery latency (wake path vs 1 s polling) and teamctl send"
LIMIT = (240.0, 45.0)
POLL = 1.0  # the seeds' idle loop sleeps a second between looks
MEMBER = "sleeper"


def one_send(lab: Lab, text: str, send: Callable[[str], float]) -> float:
    """Milliseconds from the moment `send(text)` returns (when the message counts from: it
    landed, or the command began) until the member's request carrying it reaches the
    server; back once the member is idle again."""
    since = len(lab.server.requests)
    done = lab.turns_done(MEMBER)
    start = send(text)
    rec = lab.server.wait_for(partial(carries, text=text), 10, since=since)
    # idle again after answering (the roster may still say idle from before while the
    # request is on its way)
    wait_until(partial(lab.idle_after, MEMBER, done), 10, "idle again", interval=0.001)
    return (rec["received_at"] - start) * 1000


def measure_ours(lab: Lab, ctx: Context, sends: int) -> list[float]:
    lat: list[float] = []
    for i in range(sends):
        if ctx.expired():
            break
        lat.append(one_send(lab, f"bench-{i}-{uuid.uuid4().hex}",
                            lambda text: lab.send(MEMBER, text)[1]))
        if (i + 1) % 50 == 0:
            ctx.progress(f"wake path {i + 1}/{sends}")
    return lat


def measure_teamctl(lab: Lab, ctx: Context, sends: int) -> tuple[list[float], list[float]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEAMD_", "ANTHROPIC_"))}
    lat: list[float] = []
    own: list[float] = []

    def send(text: str) -> float:
        start = time.time()
        subprocess.run([str(TEAMCTL), "--root", str(lab.root), "send", TEAM, MEMBER, text],
                       check=True, capture_output=True, env=env)
        own.append((time.time() - start) * 1000)
        return start

    for i in range(sends):
        if ctx.expired():
            break
        lat.append(one_send(lab, f"cli-{i}-{uuid.uuid4().hex}", send))
    return lat, own


def measure_seeds(lab: Lab, ctx: Context, members: int, per_member: int) -> list[float]:
    """Members poll independently, so they are measured side by side: each thread sends to
    its own member at a random moment of its poll cycle and waits for the request."""
    names = [f"seed{i:02d}" for i in range(members)]
    since = len(lab.server.requests)
    for name in names:
        lab.start_seed(name)
    for name in names:
        lab.server.wait_for(partial(is_from, name), max(30.0, ctx.left()), since=since)
    lat: list[float] = []
    lock = threading.Lock()

    def cycle(name: str) -> None:
        rng = random.Random(name)
        for i in range(per_member):
            if ctx.expired():
                return
            time.sleep(rng.uniform(0, POLL))  # land anywhere in the poll cycle
            text = f"seed-{name}-{i}-{uuid.uuid4().hex}"
            since = len(lab.server.requests)
            msg = {"type": "message", "sender": LEAD, "content": text,
                   "timestamp": time.time()}
            write_to_inbox(lab.seed_inbox(name), msg, fsync=True)
            landed = time.time()
            rec = lab.server.wait_for(partial(carries, text=text), 10, since=since)
            with lock:
                lat.append((rec["received_at"] - landed) * 1000)

    threads = [threading.Thread(target=cycle, args=(n,), daemon=True) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lab.stop_seeds()
    return lat


def run(ctx: Context) -> list[Row]:
    sends = ctx.n(200, 4)
    with Lab(ctx) as lab:
        lab.spawn(MEMBER, "Answer messages.")
        lab.wait_idle([MEMBER], 60)
        ctx.progress(f"wake path: {sends} sends to an idle teammate")
        ours = measure_ours(lab, ctx, sends)
        cli_runs = ctx.n(50, 2)
        ctx.progress(f"teamctl send: {cli_runs} runs")
        cli, own = measure_teamctl(lab, ctx, cli_runs)
        members = ctx.n(10, 2)
        per_member = max(1, sends // members // ctx.n(1, 2))
        ctx.progress(f"1 s polling baseline: {members} seed teammates × {per_member}")
        base = measure_seeds(lab, ctx, members, per_member)
    delivery = row(
        "delivery", "delivery latency, inbox line → request at the model server, idle "
        "teammate", "From the moment the line has landed in the inbox (append returned, "
        "fsynced) until the scripted server receives the request carrying it; the next line "
        "goes once the teammate is idle again. Baseline: seed teammates polling every 1 s, "
        "each line written by the seeds' lock-file write at a random moment of the cycle.",
        figure("wake path", "ms", ours, p99=True),
        figure("1 s polling loop", "ms", base, p99=True))
    send = row(
        "send", "`teamctl send` → request at the model", "The whole command: from starting "
        "the `teamctl send` process to the request carrying the message at the server "
        "(idle teammate, same as above). No baseline: the seeds have no CLI.",
        figure("whole command", "ms", cli, p99=True,
               detail=f"the command alone: median {statistics.median(own):.0f} ms"
               if own else ""))
    return [delivery, send]


if __name__ == "__main__":
    from bench.suite import standalone

    sys.exit(standalone(sys.modules[__name__]))
