#!/usr/bin/env python3
"""What the forwarder of a Claude Code member adds to a model call: latency to the first
streamed byte, and how long it keeps its process's other threads waiting (the GIL).

A client with a kept-alive connection, as Claude Code has, sends a streaming
`POST /v1/messages?beta=true` of ~48 KB (the size of Claude Code's first request; one call
in three ~1 MB, a long session's) and times the wait for the first byte of the answer's
body. Ours: through the forwarder
(`teamd.agent.forwarder`: the stand-in key checked, the budget gate read, the key swapped
in, the answer relayed as it comes and its usage read and counted) to the scripted server.
Baseline: the same request straight to the scripted server. The two alternate, call by
call, in one run.

The forwarder runs in a process of its own, as in a member; beside it a ticker thread
(standing in for the member's own loop) asks to wake every 1 ms: how late it wakes while
calls are forwarded is the time the forwarder held the GIL (plus the scheduler's share on
a loaded machine). The client and the scripted server run in the benchmark's process.

    python -m bench.bench_forwarder [--quick]
"""

from __future__ import annotations

import http.client
import json
import multiprocessing
import sys
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path

from bench.common import Context, Row, figure, row
from teamd import apikey
from teamd.agent.forwarder import Forwarder
from teamd.agent.loop import Member
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import make_live, make_team

NAME = "forwarder"
TITLE = "forwarder: added latency to the first streamed byte, and GIL hold (via vs direct)"
LIMIT = (120.0, 30.0)
TEAM, MEMBER = "bench", "coder"
IDENTITY = f"You are teammate '{MEMBER}' in team '{TEAM}'."
TICK = 0.001
MP = multiprocessing.get_context("fork")


def request_body(turns: int = 1) -> bytes:
    """A Claude Code request: ~48 KB for its first (one turn), ~1 MB late in a long
    session (`turns=20`: the conversation it sends again with every call)."""
    filler = "Context the CLI sends with every call. " * 1200  # ~48 KB, as Claude Code's
    return json.dumps({
        "model": "claude-opus-5-5", "max_tokens": 32000, "stream": True,
        "thinking": {"type": "adaptive"}, "output_config": {"effort": "medium"},
        "system": [{"type": "text", "text": IDENTITY}],
        "messages": [{"role": "user" if i % 2 == 0 else "assistant", "content": [
            {"type": "text", "text": filler}]} for i in range(turns * 2 - 1)],
    }).encode()


def first_byte(conn: http.client.HTTPConnection, body: bytes, key: str) -> float:
    """Seconds from sending the request to the first byte of the answer's body; the rest
    is read so the connection is reused."""
    started = time.perf_counter()
    conn.request("POST", "/v1/messages?beta=true", body=body, headers={
        "content-type": "application/json", "x-api-key": key,
        "anthropic-beta": "claude-code-20250219"})
    response = conn.getresponse()
    if response.status != 200:
        raise RuntimeError(f"{response.status}: {response.read()[:300]!r}")
    response.read(1)
    took = time.perf_counter() - started
    response.read()
    return took


class Ticker:
    """A thread that asks to wake every TICK s and keeps how late each wake was."""

    def __init__(self) -> None:
        self.late: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.is_set():
            due = time.perf_counter() + TICK
            time.sleep(TICK)
            self.late.append(max(0.0, time.perf_counter() - due))


def member_process(root: Path, upstream: str, pipe: Connection) -> None:
    """The member's side, in a process of its own (as in teamd): its forwarder, and the
    ticker standing in for the member's own loop. Says where it listens, ticks until told
    to stop, then sends how late each tick was."""
    ws = Workspace.at(root)
    make_live(ws, TEAM, MEMBER, status="active")
    apikey.hold("sk-bench-key")
    fwd = Forwarder(Member(ws, TEAM, MEMBER), upstream=upstream).start()
    ticker = Ticker()
    pipe.send((fwd.port, fwd.stand_in))
    pipe.recv()  # warmed up: tick from now on
    ticker.thread.start()
    pipe.recv()
    ticker.stop.set()
    ticker.thread.join()
    fwd.stop()
    pipe.send(ticker.late)


def run(ctx: Context) -> list[Row]:
    root = ctx.workdir / "ws"
    root.mkdir()
    (root / "work").mkdir()
    make_team(Workspace.at(root), root / "work", MEMBER, team=TEAM)
    bodies = {"first": request_body(), "long": request_body(turns=11)}
    via: dict[str, list[float]] = {"first": [], "long": []}
    direct: dict[str, list[float]] = {"first": [], "long": []}
    with ScriptedServer({"rules": [], "default": {"content": "ok", "thinking": False}}
                        ) as server:
        ours, theirs = MP.Pipe()
        child = MP.Process(target=member_process, args=(root, server.url, theirs))
        child.start()
        try:
            port, stand_in = ours.recv()
            to_fwd = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            to_api = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            for _ in range(3):  # warm both paths: connections, the first-call imports
                first_byte(to_fwd, bodies["first"], stand_in)
                first_byte(to_api, bodies["first"], "sk-bench-key")
            ours.send("tick")
            n = ctx.n(300, 20)
            for i in range(n):
                if ctx.expired():
                    break
                kind = "long" if i % 3 == 2 else "first"  # one call in three a long one
                via[kind].append(first_byte(to_fwd, bodies[kind], stand_in) * 1000)
                direct[kind].append(first_byte(to_api, bodies[kind], "sk-bench-key") * 1000)
                if i % 50 == 0:
                    ctx.progress(f"{i}/{n} calls")
            ours.send("stop")
            late = [x * 1000 for x in ours.recv()]
        finally:
            child.join(10)
            if child.is_alive():
                child.kill()
    added = {kind: [a - b for a, b in zip(via[kind], direct[kind], strict=True)]
             for kind in via}
    return [
        row("forwarder_first_byte", "first streamed byte, through the forwarder vs straight",
            "a ~48 KB streaming call on a kept-alive connection, to the scripted server",
            figure("via forwarder", "ms", via["first"], p99=True),
            figure("direct", "ms", direct["first"], p99=True)),
        row("forwarder_added", "latency the forwarder adds to the first byte (target < 2 ms)",
            "per call: via minus the direct call next to it (~48 KB)",
            figure("added", "ms", added["first"], p99=True), None),
        row("forwarder_added_long", "the same, late in a long session (~1 MB calls)",
            "one call in three: via minus the direct call next to it",
            figure("added", "ms", added["long"], p99=True), None),
        row("forwarder_gil", "how late a 1 ms ticker beside the forwarder wakes",
            "in the member's process, while calls are forwarded: the GIL the forwarder "
            "holds, and the scheduler's share on a loaded machine",
            figure("late", "ms", late, p99=True), None),
    ]


if __name__ == "__main__":
    from bench.suite import standalone

    sys.exit(standalone(sys.modules[__name__]))
