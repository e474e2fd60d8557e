"""`teamd run` end to end: a real supervisor subprocess, real forked teammates talking real
HTTP to a scripted model server in this process (CONTRACT §4 and §9, issue 3).

The scripted server's default reply is a text block, so a teammate makes one call and goes
idle. Every wait is on a condition with a deadline; the deadlines are generous (they only
cost time when something is wrong) and the settings small, to keep the file fast.
"""

from __future__ import annotations

import datetime
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import psutil
import pytest

from teamd import actions, board, files, pidfile, roster
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests import harness
from tests.harness import (
    gone,
    journal,
    live_pid,
    member,
    read_log,
    running_teamd,
    teamd_env,
    wait_until,
)
from tests.helpers_proc import ctl

TEAM = "t"
# Whole seconds: fractions of a second were refused for settings whose default is an int.
SETTINGS: dict[str, Any] = dict(backoff_initial=1, backoff_max=1, backoff_reset=60,
                                stop_timeout=3, restart_limit=3, restart_window=30,
                                idle_timeout=60)
UP = 30  # seconds a teammate may take to come up on a loaded 2-core machine


# -- fixtures and helpers ----------------------------------------------------------------
@pytest.fixture
def strays() -> Iterator[list[psutil.Process]]:
    """Processes a test saw (a teammate's tools); killed afterwards if a test failed half-way
    and left them (psutil checks the start time, so a reused pid is never hit)."""
    procs: list[psutil.Process] = []
    yield procs
    for proc in procs:
        try:
            if proc.is_running():
                proc.kill()
        except psutil.Error:
            pass


def make_team(ws: Workspace, *names: str, team: str = TEAM, cwd: str | None = None,
              **spawn: Any) -> None:
    harness.make_team(ws, cwd, *names, team=team,
                      prompt="You are {name}. Wait for instructions.", **spawn)


def up(ws: Workspace, name: str, team: str = TEAM, status: str = "idle",
       not_pid: int | None = None, timeout: float = UP) -> int:
    """Wait until `name` has a live process (other than `not_pid`) in `status`; its pid."""
    def check() -> int | None:
        m = member(ws, team, name)
        if m["status"] != status or not roster.is_live(m) or m["pid"] == not_pid:
            return None
        return int(m["pid"])

    pid = wait_until(check, timeout, f"{team}/{name} {status} with a live process")
    assert pid is not None
    return pid


def status_is(ws: Workspace, name: str, status: str, team: str = TEAM,
              timeout: float = UP) -> dict[str, Any]:
    return wait_until(lambda: (m := member(ws, team, name))["status"] == status and m,
                      timeout, f"{team}/{name} to be {status}")


def proc_of(pid: int) -> psutil.Process:
    return psutil.Process(pid)  # remembers the start time: is_running() is pid-reuse safe


def all_gone(procs: list[psutil.Process]) -> bool:
    return all(gone(p) for p in procs)


events_of = partial(harness.events_of, team=TEAM)


def transitions(ws: Workspace, name: str, team: str = TEAM) -> list[tuple[str, str]]:
    return [(e["from"], e["to"]) for e in events_of(ws, name, "status", team=team)]


def long_bash(agent: str) -> dict[str, Any]:
    """A scenario rule: `agent`'s first call runs a command that outlives any test."""
    return {"agent": agent, "nth": 1, "reply": {"content": [
        {"type": "tool_use", "name": "bash",
         "input": {"command": "sleep 300 & sleep 301; echo never"}}]}}


def tool_processes(pid: int) -> list[psutil.Process]:
    """The `bash` of a long_bash call and both of its sleeps, once they are all there."""
    def check() -> list[psutil.Process]:
        try:
            kids = psutil.Process(pid).children(recursive=True)
            names = [k.name() for k in kids]
        except psutil.Error:
            return []
        return kids if names.count("sleep") == 2 else []

    return wait_until(check, UP, f"the long bash call of pid {pid}")


# -- 1. a crashed teammate comes back ----------------------------------------------------
def test_kill_9_teammate_restarts_within_the_backoff(ws: Workspace,
                                                     server: ScriptedServer) -> None:
    make_team(ws, "alice")
    with running_teamd(ws, server.url, **SETTINGS):
        old = up(ws, "alice")
        os.kill(old, signal.SIGKILL)
        killed_at = time.monotonic()
        new = wait_until(lambda: (p := live_pid(ws, TEAM, "alice")) != old and p,
                         SETTINGS["backoff_max"] + 5, "a new alice process")
        # not before its delay: the restart waited for the backoff
        assert time.monotonic() - killed_at >= SETTINGS["backoff_initial"] * 0.9
        up(ws, "alice", not_pid=old)
        m = member(ws, TEAM, "alice")
        assert m["restarts"] == 1
        assert m["last_exit"]["signal"] == signal.SIGKILL and m["last_exit"]["code"] is None
        [exited] = events_of(ws, "alice", "exited")
        assert exited["signal"] == signal.SIGKILL
        [scheduled] = events_of(ws, "alice", "restart_scheduled")
        assert scheduled["restarts"] == 1
        assert scheduled["delay"] == SETTINGS["backoff_initial"]
        moves = transitions(ws, "alice")
        at = moves.index(("idle", "backoff"))
        assert moves[at + 1] == ("backoff", "starting")
        assert [e["pid"] for e in events_of(ws, "alice", "spawned")] == [old, new]


# -- 2. a crash loop ends in `failed` ------------------------------------------------------
def test_crash_loop_fails_then_restart_clears_it(ws: Workspace, server: ScriptedServer,
                                                 tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    make_team(ws, "crashy", cwd=str(workdir))
    workdir.rmdir()  # the teammate raises at boot: exit 1, every time
    limit = SETTINGS["restart_limit"]
    with running_teamd(ws, server.url, **SETTINGS) as daemon:
        m = status_is(ws, "crashy", "failed",
                      timeout=(limit + 1) * (SETTINGS["backoff_max"] + 5))
        assert m["restarts"] == limit + 1
        assert m["last_exit"]["code"] == 1
        assert not roster.is_live(m)
        assert psutil.Process(daemon.pid).children() == []  # no process left
        assert "does not exist" in read_log(ws, TEAM, "crashy")
        # the journal follows the roster's `failed` by a moment: the last exit's line too
        wait_until(lambda: len(events_of(ws, "crashy", "exited")) == limit + 1, 5,
                   "the last exit journaled")
        assert len(events_of(ws, "crashy", "restart_scheduled")) == limit
        [failed_event] = wait_until(lambda: events_of(ws, "crashy", "member_failed"), 5,
                                    "the member_failed event")
        assert "exit code 1" in failed_event["reason"]
        [msg] = wait_until(
            lambda: [
                r
                for r in files.read_jsonl(ws.store.paths.inbox(TEAM, "lead")).records
                if r["type"] == "member_failed"
            ],
            5,
            "the member_failed message in the lead's inbox",
        )
        assert msg["sender"] == "teamd" and msg["recipient"] == "lead"
        assert msg["member"] == "crashy" and "crashy" in msg["content"]
        assert msg["reason"] == failed_event["reason"]
        assert not server.requests  # it never got as far as the model

        workdir.mkdir()
        ctl(ws, "restart", TEAM, "crashy")
        up(ws, "crashy")
        m = member(ws, TEAM, "crashy")
        assert m["restarts"] == 0 and m["desired"] == "running"
        # teamctl wrote only desired and restart_requested_at; teamd cleared failed
        assert ("failed", "starting") in transitions(ws, "crashy")


# -- 3. stopping the supervisor is not shutting the team down ------------------------------
def test_sigterm_teamd_leaves_members_pending_and_a_new_teamd_resumes_them(
        ws: Workspace, server: ScriptedServer) -> None:
    make_team(ws, "alice", "bob")
    with running_teamd(ws, server.url, **SETTINGS) as daemon:
        pids = {n: up(ws, n) for n in ("alice", "bob")}
        procs = [proc_of(p) for p in pids.values()]
        session = ws.store.paths.session(TEAM, "alice").read_bytes()
        assert session.count(b"\n") >= 2  # the prompt and the first reply
        daemon.proc.send_signal(signal.SIGTERM)
        wait_until(lambda: all_gone(procs), SETTINGS["stop_timeout"] + 5,
                   "every teammate to be gone")
        assert daemon.proc.wait(SETTINGS["stop_timeout"] + 5) == 0
        assert "stopped" in daemon.output()
    for name in ("alice", "bob"):
        m = member(ws, TEAM, name)
        assert (m["status"], m["desired"]) == ("pending", "running")
        assert m["restarts"] == 0 and m["last_exit"]["signal"] == signal.SIGTERM
        assert not roster.is_live(m)
    assert pidfile.running(ws) is None
    assert not ws.store.paths.supervisor_info.exists()
    assert not [e for e in journal(ws, TEAM) if e["event"] == "message"
                and e["message"]["type"] in ("shutdown_request", "shutdown_response")]

    with running_teamd(ws, server.url, **SETTINGS):
        for name in ("alice", "bob"):
            assert up(ws, name) != pids[name]
        ctl(ws, "send", TEAM, "alice", "after the restart: carry on")
        record = server.wait_for(lambda r: r["agent"] == "alice"
                                 and "after the restart: carry on" in r["last_user_text"],
                                 UP)
        assert record["n_messages"] >= 3  # the conversation went on, not from scratch
        grown = ws.store.paths.session(TEAM, "alice").read_bytes()
        assert grown.startswith(session) and len(grown) > len(session)


# -- 4. no orphans, even after kill -9 of the supervisor ------------------------------------
def test_kill_9_teamd_takes_every_teammate_and_tool_down(
        ws: Workspace, server: ScriptedServer, strays: list[psutil.Process]) -> None:
    server.add_rule(long_bash("worker"))
    make_team(ws, "worker", "idler")
    with running_teamd(ws, server.url, **SETTINGS) as daemon:
        worker = up(ws, "worker", status="active")
        tools = tool_processes(worker)
        strays.extend(tools)
        idler = up(ws, "idler")
        procs = [proc_of(worker), proc_of(idler), *tools]
        daemon.kill()  # SIGKILL: no chance to clean up
        wait_until(lambda: all_gone(procs), 2, "the teammates and their tools to be gone")
    with running_teamd(ws, server.url, **SETTINGS):
        assert up(ws, "idler") != idler
        assert up(ws, "worker") != worker  # the interrupted call answered, then idle
        record = server.wait_for(lambda r: r["agent"] == "worker" and r["n"] == 2, UP)
        assert "interrupted by a restart" in record["last_user_text"]


# -- 5. one supervisor per root -------------------------------------------------------------
def test_a_second_teamd_on_the_same_root_is_refused(ws: Workspace,
                                                    server: ScriptedServer) -> None:
    with running_teamd(ws, server.url, **SETTINGS) as daemon:
        second = subprocess.run(
            [sys.executable, "-m", "teamd", "run", "--root", str(ws.root)],
            env=teamd_env(server.url, **SETTINGS), capture_output=True, timeout=60,
            check=False)
        assert second.returncode == 2
        err = second.stderr.decode().strip()
        assert len(err.splitlines()) == 1, err
        assert "another teamd" in err and f"pid {daemon.pid}" in err
        assert daemon.proc.poll() is None
        assert pidfile.running(ws)["pid"] == daemon.pid  # type: ignore[index]


# -- 6. delete -------------------------------------------------------------------------------
def test_delete_shuts_everyone_down_and_removes_the_team(
        ws: Workspace, server: ScriptedServer, strays: list[psutil.Process]) -> None:
    server.add_rule(long_bash("busy"))
    make_team(ws, "alice", "bob")
    make_team(ws, "carol", "busy", team="t2")
    with running_teamd(ws, server.url, **SETTINGS) as daemon:
        procs = [proc_of(up(ws, n)) for n in ("alice", "bob")]
        ctl(ws, "delete", TEAM, "--timeout", "30")  # idle teammates approve at once
        assert all_gone(procs)
        assert (
            not ws.store.paths.team_dir(TEAM).exists()
            and not ws.store.paths.tasks_dir(TEAM).exists()
        )
        # the other team is untouched
        assert roster.load(ws, "t2")["state"] == "active"
        assert not [e for e in journal(ws, "t2") if e["event"] == "message"
                    and e["message"]["type"] == "shutdown_request"]

        # --force: no handshake, not even for a member busy in a tool call
        carol = proc_of(up(ws, "carol", team="t2"))
        busy = up(ws, "busy", team="t2", status="active")
        tools = tool_processes(busy)
        strays.extend(tools)
        busy_proc = proc_of(busy)
        ctl(ws, "delete", "t2", "--force", "--timeout", "30")
        assert all_gone([carol, busy_proc])
        wait_until(lambda: all_gone(tools), 5, "the busy member's tools to be gone")
        assert (
            not ws.store.paths.team_dir("t2").exists()
            and not ws.store.paths.tasks_dir("t2").exists()
        )
        wait_until(lambda: psutil.Process(daemon.pid).children() == [], 5,
                   "teamd to have no child left")
        # nothing left of either team but its archive, not even a renamed folder on its
        # way out (teamctl returns once the team's folders are renamed away)
        wait_until(
            lambda: (
                sorted(os.listdir(ws.store.paths.teams_dir))
                == [".archive", "teamd.json", "teamd.lock"]
                and os.listdir(ws.store.paths.tasks_root) == []
            ),
            10,
            "the deleted folders to go",
        )
        assert [len(ws.store.paths.archives(t)) for t in (TEAM, "t2")] == [1, 1]
        wait_until(lambda: daemon.output().count("team_deleted") == 2, 10,
                   "teamd to log both deletions")


# -- 7. stop --force and restart --------------------------------------------------------------
def test_stop_force_stops_for_good_until_restart(ws: Workspace,
                                                 server: ScriptedServer) -> None:
    make_team(ws, "alice")
    with running_teamd(ws, server.url, **SETTINGS):
        old = proc_of(up(ws, "alice"))
        ctl(ws, "stop", TEAM, "alice", "--force")
        assert gone(old)
        m = status_is(ws, "alice", "shutdown")  # written once the supervisor has reaped it
        assert m["desired"] == "stopped" and not roster.is_live(m)
        assert m["restarts"] == 0
        # a line in its inbox and another member's spawn make the supervisor reconcile;
        # once bob is up, that pass has seen alice too and left her alone
        ctl(ws, "send", TEAM, "alice", "are you there?")
        actions.spawn(ws, TEAM, "bob", "You are bob.")
        up(ws, "bob")
        assert len(events_of(ws, "alice", "spawned")) == 1
        assert member(ws, TEAM, "alice")["status"] == "shutdown"

        ctl(ws, "restart", TEAM, "alice")
        assert up(ws, "alice") != old.pid
        m = member(ws, TEAM, "alice")
        assert (m["desired"], m["restarts"]) == ("running", 0)
        server.wait_for(lambda r: r["agent"] == "alice" and "are you there?"
                        in r["last_user_text"], UP)


# -- 8. sleeping teammates -----------------------------------------------------------------------
def test_a_sleeping_teammate_wakes_on_mail(ws: Workspace, server: ScriptedServer) -> None:
    make_team(ws, "alice")
    with running_teamd(ws, server.url, **{**SETTINGS, "idle_timeout": 1}):
        m = status_is(ws, "alice", "sleeping")
        [first] = [e["pid"] for e in events_of(ws, "alice", "spawned")]
        assert m["last_exit"]["code"] == 75 and m["restarts"] == 0
        assert not roster.is_live(m) and int(m["pid"]) == first
        assert events_of(ws, "alice", "restart_scheduled") == []
        ctl(ws, "send", TEAM, "alice", "wake up, there is news")
        server.wait_for(lambda r: r["agent"] == "alice"
                        and "wake up, there is news" in r["last_user_text"], UP)
        spawned = [e["pid"] for e in events_of(ws, "alice", "spawned")]
        assert len(spawned) == 2 and spawned[0] == first
        status_is(ws, "alice", "sleeping")  # and back to sleep
        assert member(ws, TEAM, "alice")["restarts"] == 0


def test_a_claimable_task_wakes_exactly_one_sleeper(ws: Workspace,
                                                    server: ScriptedServer) -> None:
    make_team(ws, "bob", "carol")
    with running_teamd(ws, server.url, **{**SETTINGS, "idle_timeout": 1}):
        before = {n: status_is(ws, n, "sleeping")["pid"] for n in ("bob", "carol")}
        ctl(ws, "task", "add", TEAM, "Write the release notes")
        task = wait_until(lambda: (tk := board.get(ws, TEAM, 1))["owner"] and tk, UP,
                          "the task to be claimed")
        owner = task["owner"]
        other = ({"bob", "carol"} - {owner}).pop()
        server.wait_for(lambda r: r["agent"] == owner
                        and "<auto-claimed>Task #1" in r["last_user_text"], UP)
        # the owner worked and went back to sleep; every pass since has left the other be
        status_is(ws, owner, "sleeping")
        assert len(events_of(ws, owner, "spawned")) == 2
        assert len(events_of(ws, other, "spawned")) == 1
        assert member(ws, TEAM, other)["pid"] == before[other]
        assert member(ws, TEAM, other)["status"] == "sleeping"


# -- 9. what a forked teammate inherits, and the notify protocol --------------------------------
def _fds(pid: int) -> dict[int, str]:
    out = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            continue
    return out


def _access(pid: int, fd: int) -> int:
    """How `fd` of `pid` is open (os.O_RDONLY, O_WRONLY or O_RDWR), from /proc/PID/fdinfo."""
    for line in Path(f"/proc/{pid}/fdinfo/{fd}").read_text().splitlines():
        if line.startswith("flags:"):
            return int(line.split()[1], 8) & os.O_ACCMODE
    raise AssertionError(f"no flags for fd {fd} of {pid}")


def _inotify_watched_inodes(pid: int) -> set[int]:
    """The inodes every inotify instance of `pid` watches (from /proc/PID/fdinfo)."""
    inodes = set()
    for fd, target in _fds(pid).items():
        if target != "anon_inode:inotify":
            continue
        for line in Path(f"/proc/{pid}/fdinfo/{fd}").read_text().splitlines():
            if line.startswith("inotify wd:"):
                fields = dict(f.split(":", 1) for f in line.split()[1:] if ":" in f)
                inodes.add(int(fields["ino"], 16))
    return inodes


def _caught_signals(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return int(line.split()[1], 16)
    raise AssertionError("no SigCgt line")


def _datagrams_until(sock: socket.socket, want: str, seen: list[str]) -> list[str]:
    deadline = time.monotonic() + UP
    while not any(want in d for d in seen):
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            seen.append(sock.recv(65536).decode())
        except TimeoutError:
            raise AssertionError(f"no {want!r} on the notify socket; got {seen}") from None
    return seen


def test_child_hygiene_and_the_notify_protocol(ws: Workspace, server: ScriptedServer,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    make_team(ws, "alice")
    with tempfile.TemporaryDirectory(prefix="tdsup-", dir="/tmp") as short:
        path = os.path.join(short, "notify.sock")  # AF_UNIX paths are short
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        listener.bind(path)
        monkeypatch.setenv("NOTIFY_SOCKET", path)
        try:
            with running_teamd(ws, server.url, **SETTINGS) as daemon:
                seen = _datagrams_until(listener, "READY=1", [])
                assert any(d.startswith("STATUS=") or "\nSTATUS=" in d for d in seen)
                pid = up(ws, "alice")
                child = psutil.Process(pid)
                assert child.ppid() == daemon.pid
                # teamd forks from its only thread (the SDK warm-up started none either)
                assert os.listdir(f"/proc/{daemon.pid}/task") == [str(daemon.pid)]
                assert os.getpgid(pid) == pid

                environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                assert not [e for e in environ if e.startswith(
                    (b"NOTIFY_SOCKET=", b"WATCHDOG_USEC=", b"WATCHDOG_PID="))]
                assert f"NOTIFY_SOCKET={path}".encode() in \
                    Path(f"/proc/{daemon.pid}/environ").read_bytes().split(b"\0")

                mine, theirs = _fds(pid), _fds(daemon.pid)
                lock = str(ws.store.paths.supervisor_lock)
                assert lock in theirs.values()
                assert lock not in mine.values()
                shared = {t for t in mine.values() if t.startswith(("socket:", "pipe:"))} \
                    & {t for t in theirs.values() if t.startswith(("socket:", "pipe:"))}
                # nothing but its wake pipe: the child reads it, teamd only writes it
                assert len(shared) <= 1, shared
                for pipe in shared:
                    assert [_access(pid, fd) for fd, t in mine.items() if t == pipe] == [
                        os.O_RDONLY], pipe
                    assert {_access(daemon.pid, fd) for fd, t in theirs.items()
                            if t == pipe} == {os.O_WRONLY}, pipe
                teams_inode = os.stat(ws.store.paths.teams_dir).st_ino
                assert teams_inode in _inotify_watched_inodes(daemon.pid)
                assert teams_inode not in _inotify_watched_inodes(pid)
                assert mine[0] == os.devnull
                assert mine[1] == mine[2] == str(ws.member_log(TEAM, "alice"))

                caught = _caught_signals(pid)
                for sig in (signal.SIGCHLD, signal.SIGHUP, signal.SIGINT):
                    assert not caught & (1 << (sig - 1)), signal.Signals(sig).name
                assert _caught_signals(daemon.pid) & (1 << (signal.SIGCHLD - 1))

                # SIGHUP re-reads teamd.toml; a broken one is reported, not fatal
                for text in ("stop_timeout = 4\n", "stop_timeout = \"soon\"\n"):
                    ws.settings_file.write_text(text)
                    seen.clear()
                    daemon.proc.send_signal(signal.SIGHUP)
                    _datagrams_until(listener, "RELOADING=1", seen)
                    _datagrams_until(listener, "READY=1", seen)
                    assert daemon.proc.poll() is None
                wait_until(lambda: "keeping the settings in force" in daemon.output(), UP,
                           "teamd to report the broken teamd.toml")
                assert psutil.Process(pid).is_running()

                seen.clear()
                assert daemon.terminate() == 0
                _datagrams_until(listener, "STOPPING=1", seen)
        finally:
            listener.close()


def logged_at(log: str, text: str) -> float:
    """When teamd logged the line holding `text` (its lines start with asctime)."""
    [line] = [ln for ln in log.splitlines() if text in ln]
    stamp = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
    return stamp.timestamp()


# -- 10. processes the roster names that are not teamd's children ---------------------------
def test_leftover_processes_are_ended_and_reused_pids_never_signalled(
        ws: Workspace, server: ScriptedServer) -> None:
    make_team(ws, "alice", "bob")
    code = ("import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(300)")
    stubborn = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    bystander = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        for p in (stubborn, bystander):
            assert p.stdout is not None and p.stdout.readline() == b"ready\n"

        def pretend(config: dict[str, Any]) -> None:
            # alice: a process of an earlier supervisor that survived it and ignores
            # SIGTERM; bob: a pid since reused by an unrelated process (other start time)
            for name, proc, skew in (("alice", stubborn, 0.0), ("bob", bystander, -100.0)):
                m = roster.get(config, name)
                m.update(pid=proc.pid, status="idle",
                         pid_create_time=psutil.Process(proc.pid).create_time() + skew)

        roster.update(ws, TEAM, pretend)
        assert roster.is_live(member(ws, TEAM, "alice"))
        assert not roster.is_live(member(ws, TEAM, "bob"))
        with running_teamd(ws, server.url, **SETTINGS) as daemon:
            assert up(ws, "bob") != bystander.pid
            assert stubborn.wait(SETTINGS["stop_timeout"] + 10) == -signal.SIGKILL
            assert up(ws, "alice") != stubborn.pid
            assert bystander.poll() is None  # never signalled
            # SIGTERM first; SIGKILL only after stop_timeout (teamd's log lines say when)
            termed = logged_at(daemon.output(), f"pid {stubborn.pid} of an earlier")
            killed = logged_at(daemon.output(), f"pid {stubborn.pid} ignored SIGTERM")
            assert killed - termed >= SETTINGS["stop_timeout"] - 0.01
    finally:
        for p in (stubborn, bystander):
            if p.poll() is None:
                p.kill()
            p.wait(10)
            if p.stdout is not None:
                p.stdout.close()


# -- the kernel kills a teammate before the supervisor (CONTRACT.md section 9) -----------
def oom_score_adj(pid: int) -> int:
    return int(Path(f"/proc/{pid}/oom_score_adj").read_text())


def test_a_teammate_raises_its_oom_score_adj_by_500(ws: Workspace,
                                                    server: ScriptedServer) -> None:
    make_team(ws, "alice")
    with running_teamd(ws, server.url, **SETTINGS) as daemon:
        pid = up(ws, "alice")
        assert oom_score_adj(pid) == min(1000, oom_score_adj(daemon.pid) + 500)
        assert oom_score_adj(daemon.pid) < oom_score_adj(pid)


def test_oom_score_adj_is_capped_at_1000() -> None:
    code = ("from pathlib import Path; from teamd.proc import raise_oom_score_adj\n"
            "p = Path('/proc/self/oom_score_adj'); p.write_text('700')\n"
            "raise_oom_score_adj(); print(p.read_text().strip())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.split() == ["1000"]
