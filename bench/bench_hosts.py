#!/usr/bin/env python3
"""Hosts of a PostgreSQL store (CONTRACT §15): delivery to a member on another host,
failover of a killed host, and `teamctl status` of 3 hosts × 100 members.

A private PostgreSQL cluster (tests/postgres.py), the scripted model server, real
`teamd run --host` processes (each with a local directory of its own) on this machine.

- Delivery: a message written by this process (not the member's host) into the inbox of
  an idle member run by host h1, timed from its commit until the scripted server receives
  the request carrying it: the commit's NOTIFY reaches h1's `teamd`, which pokes the
  member's wake pipe. The next message goes once the member is idle again.
- Failover: host h0 runs the members alone (h1 has room for its one member only); h2
  joins; h0 is killed whole (SIGKILL of its
  `teamd` and members). Each member is sent a message at once; the figure is, per
  member, the time from the kill until the request carrying its message reaches the
  model from h2 (`host_timeout` 5 s, `host_heartbeat` 1 s here).
- Status: 300 members placed on 3 hosts (records only, no processes), `teamctl status
  --json` timed as a person runs it (a new process each time).

    python -m bench.bench_hosts [--quick]
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

import psutil

from bench.common import Context, Row, figure, not_measured, row
from bench.lab import carries
from teamd import actions, roster
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import Teamd, teamd_env, wait_until

NAME = "hosts"
TITLE = "hosts on PostgreSQL: delivery across hosts, failover, status of 3 × 100"
LIMIT = (900.0, 240.0)
TEAM = "bench"
HOSTS = {"host_heartbeat": 1, "host_timeout": 5, "idle_timeout": 3600}


def idle(ws: Workspace, names: list[str]) -> bool:
    members = {m["name"]: m for m in roster.load(ws, TEAM)["members"]}
    return all(members[n]["status"] == "idle" for n in names)


def kill_tree(pid: int) -> None:
    try:
        top = psutil.Process(pid)
        procs = [top, *top.children(recursive=True)]
    except psutil.Error:
        return
    for proc in procs:
        try:
            proc.kill()
        except psutil.Error:
            pass


def delivery(ctx: Context, ws: Workspace, server: ScriptedServer, start: Any) -> list[float]:
    start("h1", max_members=1)  # room for `far` alone: the failover's members go elsewhere
    actions.spawn(ws, TEAM, "far", "Answer messages.", host="h1")
    wait_until(lambda: idle(ws, ["far"]), 60, "far idle")
    out: list[float] = []
    for _ in range(ctx.n(100, 10)):
        if ctx.expired():
            break
        text = f"ping-{uuid.uuid4().hex[:8]}"
        since = len(server.requests)
        landed = time.time()
        actions.send(ws, TEAM, "far", text)
        rec = server.wait_for(partial(carries, text=text), 30, since=since)
        out.append((rec["received_at"] - landed) * 1000)
        wait_until(lambda: idle(ws, ["far"]), 30, "far idle again", interval=0.002)
    return out


def failover(ctx: Context, ws: Workspace, server: ScriptedServer, start: Any
             ) -> list[float]:
    names = [f"f{i:02d}" for i in range(ctx.n(20, 3))]
    h0 = start("h0")
    for name in names:
        actions.spawn(ws, TEAM, name, "Answer messages.", host=None)
    wait_until(lambda: all(m.get("host") for m in roster.load(ws, TEAM)["members"]
                           if m["name"] in names), 60, "placed")
    # every one of them on h0: h1 has no room left
    wait_until(lambda: idle(ws, names), 120, "members idle")
    start("h2")
    kill_tree(h0.pid)
    killed = time.time()
    h0.proc.wait(10)
    texts = {name: f"after-{name}-{uuid.uuid4().hex[:6]}" for name in names}
    for name, text in texts.items():
        actions.send(ws, TEAM, name, text)
    out = []
    for text in texts.values():
        rec = server.wait_for(partial(carries, text=text), 120)
        out.append(rec["received_at"] - killed)
    return out


def status(ctx: Context, url: str, root: Path) -> list[float]:
    root.mkdir()
    ws = Workspace.at(root, store=url)
    claims = [ws.store.join_host(f"s{i}", {"pid": 0}) for i in range(3)]  # records only
    team = "wide"
    actions.create_team(ws, team, "3 hosts × 100 members")
    for i in range(300):
        name, host = f"w{i:03d}", f"s{i % 3}"
        actions.spawn(ws, team, name, "Wait.", host=host)

        def place(member: dict[str, Any], host: str = host) -> None:
            member["host"] = host

        roster.update_status(ws, team, name, place)
    out = []
    for _ in range(ctx.n(10, 2)):
        t0 = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "teamctl.cli", "--root", str(root),
                               "--store", url, "status", team, "--json"],
                              capture_output=True, text=True, timeout=120)
        out.append((time.monotonic() - t0) * 1000)
        assert done.returncode == 0, done.stderr
        assert len(json.loads(done.stdout)["teams"][0]["members"]) == 300
    del claims
    return out


def run(ctx: Context) -> list[Row]:
    title = "hosts on PostgreSQL"
    try:
        from tests.postgres import Cluster
        cluster = Cluster.start()
    except Exception as exc:  # no PostgreSQL here: said in the row
        return [not_measured("hosts_delivery", title, str(exc), note="no PostgreSQL")]
    daemons: list[Teamd] = []
    try:
        from teamd.store.postgres import install_schema
        url = cluster.database()
        install_schema(url)
        ws = Workspace.at(ctx.workdir / "ctl", store=url)
        ws.root.mkdir()
        with ScriptedServer({"rules": [], "default": {"content": "ok"}}) as server:
            def start(name: str, **more: Any) -> Teamd:
                root = ctx.workdir / f"host-{name}"
                root.mkdir(exist_ok=True)
                daemon = Teamd(Workspace.at(root, store=url),
                               teamd_env(server.url, **HOSTS, **more), host=name)
                daemons.append(daemon)
                return daemon

            actions.create_team(ws, TEAM, "bench")
            ctx.progress("delivery to a member on another host")
            lat = delivery(ctx, ws, server, start)
            ctx.progress("failover of a killed host")
            back = failover(ctx, ws, server, start)
        for daemon in daemons:
            daemon.stop()
        daemons.clear()
        ctx.progress("status of 3 hosts × 100 members")
        took = status(ctx, cluster.database(), ctx.workdir / "wide")
    finally:
        for daemon in daemons:
            daemon.stop()
        cluster.stop()
    return [
        row("hosts_delivery", "inbox line → request at the model, member on another host",
            "A message committed by this process to an idle member run by host h1's teamd "
            "(LISTEN/NOTIFY to that teamd, then its wake pipe), timed until the scripted "
            "server receives the request carrying it.",
            figure("PostgreSQL, across hosts", "ms", lat, p99=True), None),
        row("hosts_failover", f"failover: host killed, its {len(back)} members answering "
            "again", "From the SIGKILL of host h0's teamd and members until the request "
            "carrying a message sent to each member at the kill reaches the model from "
            "host h2 (host_timeout 5 s, host_heartbeat 1 s).",
            figure("each member, from the kill", "s", back, p99=True), None),
        row("hosts_status", "`teamctl status --json` of 3 hosts × 100 members",
            "300 members placed on 3 hosts of a PostgreSQL store (records only), the whole "
            "command timed as a person runs it.",
            figure("teamctl status", "ms", took), None),
    ]


if __name__ == "__main__":
    from bench.suite import standalone

    sys.exit(standalone(sys.modules[__name__]))
