"""One way to wake that scales (CONTRACT §3 "Delivery", issue 10): teamd is the only inotify
watcher and wakes each member through a pipe it inherited at fork, so nothing per member runs
out with the size of the team (the kernel's default is 128 inotify instances per user).

Many awake members each wake for their message, through the pipe: none holds an inotify
instance, none fell back (no `wake_fallback` in the journal, no "polling" in a member's log).
A member started without a pipe says so, loudly, and still wakes by its own means.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from teamd import actions, inbox, roster
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import journal, member, running_teamd, teamd_env, wait_until

TEAM = "crew"
T = 60.0  # starting many members on a shared 2-core machine


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer({"rules": [], "default": {"content": [
            {"type": "text", "text": "Noted."}]}}) as srv:
        yield srv


def inotify_instances(pid: int) -> int:
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:inotify":
                count += 1
        except FileNotFoundError:
            continue
    return count


def wake_each(ws: Workspace, server: ScriptedServer, tmp_path: Path, count: int) -> None:
    names = [f"m{i:03d}" for i in range(count)]
    actions.create_team(ws, TEAM)
    for name in names:
        actions.spawn(ws, TEAM, name, "Answer messages.", cwd=str(tmp_path))
    with running_teamd(ws, server.url, idle_timeout=600):
        wait_until(lambda: all(m["status"] == "idle" and roster.is_live(m)
                               for m in roster.load(ws, TEAM)["members"]),
                   T + count, f"{count} members idle")
        pids = {name: int(member(ws, TEAM, name)["pid"]) for name in names}
        assert all(inotify_instances(pid) == 0 for pid in pids.values()), \
            {n: inotify_instances(p) for n, p in pids.items() if inotify_instances(p)}
        late = {}
        for name in names:  # one at a time: each wake is its own, not a crowd's
            text = f"wake up {name}"
            since = len(server.requests)
            sent = actions.send(ws, TEAM, name, text)
            landed = sent["timestamp"]
            got = server.wait_for(lambda r, t=text: t in r["last_user_text"], T, since=since)
            if got["received_at"] - landed >= 1.0:
                late[name] = round(got["received_at"] - landed, 3)
        assert not late, f"woken later than a second after their message: {late}"
        assert all(inotify_instances(pid) == 0 for pid in pids.values())
    assert not [r for r in journal(ws, TEAM) if r["event"] == "wake_fallback"]
    for name in names:
        text = ws.member_log(TEAM, name).read_text(errors="replace")
        assert "polling" not in text and "wake fallback" not in text, name


def test_two_hundred_awake_members_each_wake_within_a_second(
        ws: Workspace, server: ScriptedServer, tmp_path: Path) -> None:
    """More awake members than the kernel's 128 inotify instances per user would serve,
    each woken through the pipe teamd gave it, none falling back (about 16 s here)."""
    wake_each(ws, server, tmp_path, 200)


# -- without a pipe: loud, and still awake -------------------------------------------------
BY_HAND = textwrap.dedent("""
    import os, sys, psutil
    from teamd import roster
    from teamd.agent.loop import run_member
    from teamd.layout import Workspace

    ws = Workspace.at(sys.argv[1])
    me = psutil.Process()
    def mine(m, config):  # what teamd records at a fork, done by hand
        m.update(pid=me.pid, pid_create_time=me.create_time(), status="starting")
    roster.update_member(ws, "crew", "alice", mine)
    sys.exit(run_member(ws, "crew", "alice"))
""")


def test_a_member_started_without_a_wake_pipe_says_so_and_still_wakes(
        ws: Workspace, server: ScriptedServer, tmp_path: Path) -> None:
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "alice", "Answer messages.", cwd=str(tmp_path))
    log = tmp_path / "alice.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", BY_HAND, str(ws.root)],
                                env=teamd_env(server.url), stdout=out, stderr=subprocess.STDOUT)
    try:
        fallback = wait_until(lambda: [r for r in journal(ws, TEAM)
                                       if r["event"] == "wake_fallback"], T, "wake_fallback")
        assert len(fallback) == 1
        assert fallback[0]["member"] == "alice"
        assert "without a wake pipe" in fallback[0]["reason"]
        error = wait_until(lambda: member(ws, TEAM, "alice")["last_error"], T, "last_error")
        assert error.startswith("wake fallback: started without a wake pipe")
        assert "wake fallback" in log.read_text()
        wait_until(lambda: member(ws, TEAM, "alice")["status"] == "idle", T, "alice idle")
        since = len(server.requests)
        inbox.deliver(ws, TEAM, [inbox.make("message", "lead", "alice", "still there?")])
        server.wait_for(lambda r: "still there?" in r["last_user_text"], T, since=since)
        # woken by its own watcher; said once, not at every wait
        assert len([r for r in journal(ws, TEAM) if r["event"] == "wake_fallback"]) == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
