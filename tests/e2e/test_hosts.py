"""Hosts of a PostgreSQL store (CONTRACT §15), end to end: several `teamd run --host`
processes, each with its own local directory, on one database of the private cluster
(tests/postgres.py). Members are placed by the leader on the host with most room, a pin
holds, a second teamd with a host's name exits 2, and a host killed whole has its members
resumed on another within `host_timeout` + 10 s, their sessions and tasks kept."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import Teamd, cli, member, send_to_lead, teamd_env, wait_until

TEAM = "farm"
T = 40.0
#: fast hosts: a heartbeat every 0.3 s, dead after 2 s of silence
FAST = {"host_heartbeat": 0.3, "host_timeout": 2}


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    rules = [{"name": "answer", "regex": r"ping (?P<n>\d+)",
              "reply": send_to_lead("pong {n}")}]
    with ScriptedServer({"rules": rules,
                         "default": {"content": [{"type": "text", "text": "Done."}]}}) as srv:
        yield srv


@pytest.fixture
def hosts_of(tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch,
             server: ScriptedServer) -> Iterator[Any]:
    """start(name) → a `teamd run --host name` with a local directory of its own."""
    monkeypatch.setenv("TEAMD_STORE", pg_url)
    started: list[Teamd] = []

    def start(name: str, **settings: Any) -> Teamd:
        root = tmp_path / f"host-{name}"
        root.mkdir(exist_ok=True)
        ws = Workspace.at(root, store=pg_url)
        env = teamd_env(server.url, **{**FAST, **settings})
        daemon = Teamd(ws, env, host=name)
        started.append(daemon)
        return daemon

    try:
        yield start
    finally:
        for daemon in started:
            daemon.stop()  # its members die with it (parent-death signal)


def placed(ws: Workspace) -> dict[str, str | None]:
    return {m["name"]: m.get("host") for m in
            json.loads(cli(ws, "status", TEAM, "--json").stdout)["teams"][0]["members"]}


def test_members_are_placed_across_hosts_and_a_pin_holds(hosts_of: Any, ws: Workspace,
                                                         workdir: Path) -> None:
    h1, h2 = hosts_of("h1"), hosts_of("h2", max_members=2)
    cli(ws, "create", TEAM)
    for name in ("a", "b", "c"):
        cli(ws, "spawn", TEAM, name, "--prompt", "Wait.", "--cwd", str(workdir))
    cli(ws, "spawn", TEAM, "p", "--prompt", "Wait.", "--cwd", str(workdir), "--host", "h2")
    wait_until(lambda: all(placed(ws).values()), T, "every member placed")
    where = placed(ws)
    assert where["p"] == "h2"
    assert sorted(where.values()).count("h2") <= 2  # its max_members holds
    for name in where:
        wait_until(lambda n=name: member(ws, TEAM, n)["status"] == "idle", T, f"{name} idle")
    # each member's process is its host's teamd's child
    for name, host in where.items():
        pid = member(ws, TEAM, name)["pid"]
        parent = psutil.Process(pid).ppid()
        assert parent == {"h1": h1.pid, "h2": h2.pid}[host]
    listed = json.loads(cli(ws, "hosts", "--json").stdout)
    assert [(h["name"], h["alive"], h["placed"]) for h in listed] == [
        ("h1", True, list(where.values()).count("h1")),
        ("h2", True, list(where.values()).count("h2"))]
    text = cli(ws, "status", TEAM).stdout
    assert "HOST" in text and "h2" in text

    # one teamd per host name
    dup = subprocess.run([sys.executable, "-m", "teamd", "run", "--root", str(h1.ws.root),
                          "--host", "h1"], env=teamd_env("http://127.0.0.1:9"),
                         capture_output=True, text=True, timeout=60)
    assert dup.returncode == 2 and "another teamd already runs as host 'h1'" in dup.stderr


def test_a_killed_host_s_members_resume_elsewhere(hosts_of: Any, ws: Workspace,
                                                  workdir: Path, server: ScriptedServer) -> None:
    h1 = hosts_of("h1")
    cli(ws, "create", TEAM)
    for name in ("a", "b"):
        cli(ws, "spawn", TEAM, name, "--prompt", "Wait.", "--cwd", str(workdir))
    wait_until(lambda: all(h == "h1" for h in placed(ws).values()), T, "both on h1")
    for name in ("a", "b"):
        wait_until(lambda n=name: member(ws, TEAM, n)["status"] == "idle", T, f"{name} idle")
    h2 = hosts_of("h2")
    pids = [member(ws, TEAM, n)["pid"] for n in ("a", "b")]
    # the whole host dies: its teamd and its members, at once
    os.kill(h1.pid, signal.SIGKILL)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    h1.proc.wait(10)
    killed = time.monotonic()
    wait_until(lambda: all(h == "h2" for h in placed(ws).values()), 2 + 10, "moved to h2")
    for name in ("a", "b"):
        wait_until(lambda n=name: member(ws, TEAM, n)["status"] == "idle", T, f"{name} idle")
    took = time.monotonic() - killed
    assert took < 2 + 10
    for i, name in enumerate(("a", "b")):
        cli(ws, "send", TEAM, name, f"ping {i}")
    wait_until(lambda: sorted(m["content"] for m in map(json.loads, cli(
        ws, "inbox", TEAM, "--json", "--peek").stdout.splitlines()) if m["type"] == "message")
        == ["pong 0", "pong 1"], T, "both answer from h2")
    listed = {h["name"]: h for h in json.loads(cli(ws, "hosts", "--json").stdout)}
    assert not listed["h1"]["alive"] and listed["h2"]["alive"]
    assert h2.proc.poll() is None


def test_a_pinned_member_waits_for_its_host_and_runs_there_again(
        hosts_of: Any, ws: Workspace, workdir: Path) -> None:
    h1, h2 = hosts_of("h1"), hosts_of("h2")
    cli(ws, "create", TEAM)
    cli(ws, "spawn", TEAM, "p", "--prompt", "Wait.", "--cwd", str(workdir), "--host", "h2")
    wait_until(lambda: member(ws, TEAM, "p")["status"] == "idle", T, "p idle on h2")
    pid = member(ws, TEAM, "p")["pid"]
    os.kill(h2.pid, signal.SIGKILL)
    os.kill(pid, signal.SIGKILL)
    h2.proc.wait(10)
    wait_until(lambda: (member(ws, TEAM, "p")["status"], member(ws, TEAM, "p")["last_error"])
               == ("pending", "waiting for host h2"), 2 + 10, "p told to wait for h2")
    assert placed(ws) == {"p": "h2"}  # not moved: pinned
    assert h1.proc.poll() is None
    again = hosts_of("h2")
    wait_until(lambda: member(ws, TEAM, "p")["status"] == "idle", T, "p idle on h2 again")
    assert psutil.Process(member(ws, TEAM, "p")["pid"]).ppid() == again.pid
