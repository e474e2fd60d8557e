"""Hosts of a PostgreSQL store (CONTRACT §15), end to end: several `teamd run --host`
processes, each with its own local directory, on one database of the private cluster
(tests/postgres.py). Members are placed by the leader on the host with most room, a pin
holds, a second teamd with a host's name exits 2, a host killed whole has its members
resumed on another within `host_timeout` + 10 s, their sessions and tasks kept, and a
member goes only to a host where its `cwd` exists (a host without it in a mount namespace
of its own, where a tmpfs hides it)."""

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
from tests.harness import (
    Teamd,
    cli,
    events_of,
    member,
    send_to_lead,
    teamd_env,
    wait_until,
)

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

    def start(name: str, prefix: tuple[str, ...] = (), **settings: Any) -> Teamd:
        root = tmp_path / f"host-{name}"
        root.mkdir(exist_ok=True)
        ws = Workspace.at(root, store=pg_url)
        env = teamd_env(server.url, **{**FAST, **settings})
        daemon = Teamd(ws, env, host=name, prefix=prefix)
        started.append(daemon)
        return daemon

    try:
        yield start
    finally:
        for daemon in started:
            daemon.stop()  # its members die with it (parent-death signal)


def hiding(folder: Path) -> tuple[str, ...]:
    """The prefix that runs a command in a mount namespace of its own where `folder` is an
    empty tmpfs: what a machine without that mount sees. Skips where that cannot be made."""
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"no mount namespace here (unshare -m: {probe.stderr.strip()})")
    return ("unshare", "-m", "sh", "-c", 'mount -t tmpfs -o mode=0700 tmpfs "$0" && exec "$@"',
            str(folder))


def host_record(ws: Workspace, name: str) -> dict[str, Any]:
    return {h["name"]: h for h in json.loads(cli(ws, "hosts", "--json").stdout)}[name]


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


def test_a_member_runs_only_where_its_cwd_exists(hosts_of: Any, ws: Workspace,
                                                 tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    only_h1 = shared / "only-h1"
    only_h1.mkdir(parents=True)
    # h0 has the most room (no limit) but not the directory: its mount namespace hides it
    h0 = hosts_of("h0", prefix=hiding(shared))
    h1 = hosts_of("h1", max_members=3)
    cli(ws, "create", TEAM)
    cli(ws, "spawn", TEAM, "a", "--prompt", "Wait.", "--cwd", str(only_h1))
    cli(ws, "spawn", TEAM, "p", "--prompt", "Wait.", "--cwd", str(only_h1), "--host", "h0")
    wait_until(lambda: member(ws, TEAM, "a")["status"] == "idle", T, "a idle")
    assert placed(ws)["a"] == "h1"
    assert psutil.Process(member(ws, TEAM, "a")["pid"]).ppid() == h1.pid
    # h0 was asked first and refused: said in its log and its record, never forked there
    wait_until(lambda: f"farm/a: cwd {only_h1} missing on host h0; handed back to the "
               "leader" in h0.output(), T, "h0 to say it handed a back")
    assert "spawned farm/a" not in h0.output()
    assert len(events_of(ws, "a", "spawned", team=TEAM)) == 1  # started once: on h1
    assert host_record(ws, "h0")["cwd_missing"] == [str(only_h1)]
    assert host_record(ws, "h1")["cwd_missing"] == []
    assert f"h0 has no {only_h1} (a member working there" in cli(ws, "hosts").stdout
    # pinned to h0: it waits there, never moved to h1, which has its directory
    told = ("pending", "h0", f"cwd {only_h1} missing on host h0")
    wait_until(lambda: (member(ws, TEAM, "p")["status"], member(ws, TEAM, "p")["host"],
                        member(ws, TEAM, "p")["last_error"]) == told, T, "p told why it waits")
    assert not events_of(ws, "p", "spawned", team=TEAM)
    # the directory appears on h0 (a mount came up): p starts there, and h0 says so
    subprocess.run(["nsenter", "-t", str(h0.pid), "-m", "mkdir", str(only_h1)], check=True)
    wait_until(lambda: member(ws, TEAM, "p")["status"] == "idle", T, "p idle on h0")
    assert psutil.Process(member(ws, TEAM, "p")["pid"]).ppid() == h0.pid
    assert member(ws, TEAM, "p")["last_error"] is None
    wait_until(lambda: host_record(ws, "h0")["cwd_missing"] == [], T, "h0's record to clear")


def test_a_member_whose_cwd_no_host_has_waits_until_one_has_it(
        hosts_of: Any, ws: Workspace, tmp_path: Path) -> None:
    later = tmp_path / "later"  # on no host yet; nor on the machine running teamctl
    h0 = hosts_of("h0")
    cli(ws, "create", TEAM)
    cli(ws, "spawn", TEAM, "a", "--prompt", "Wait.", "--cwd", str(later))
    told = ("pending", None, f"no alive host has its cwd {later}")
    wait_until(lambda: (member(ws, TEAM, "a")["status"], member(ws, TEAM, "a").get("host"),
                        member(ws, TEAM, "a")["last_error"]) == told, T, "a told why it waits")
    assert host_record(ws, "h0")["cwd_missing"] == [str(later)]
    assert "spawned farm/a" not in h0.output() and not events_of(ws, "a", "spawned", team=TEAM)
    later.mkdir()
    wait_until(lambda: member(ws, TEAM, "a")["status"] == "idle", T, "a idle once it exists")
    assert placed(ws)["a"] == "h0" and member(ws, TEAM, "a")["last_error"] is None
    assert psutil.Process(member(ws, TEAM, "a")["pid"]).ppid() == h0.pid
    wait_until(lambda: host_record(ws, "h0")["cwd_missing"] == [], T, "h0's record to clear")
