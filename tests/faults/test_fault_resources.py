"""Resources run out (CONTRACT §3 "What a writer leaves", §4 "Exits"): teamd forks no more
than it can serve, says why in `last_error` and its log, never crashes, never fork-loops.

A full filesystem during sends, session appends, task writes and forks:
tests/test_hostile_disk.py (test_teamctl_on_a_full_disk_says_one_line_and_leaves_nothing_torn,
test_a_full_disk_neither_fork_loops_the_supervisor_nor_fails_a_member,
test_a_teammate_that_cannot_write_its_session_makes_no_call_until_it_can). 200 members in
one team: tests/faults/test_fault_soak.py (`-m soak`: it takes minutes on 2 cores)."""

from __future__ import annotations

import time
from pathlib import Path

import psutil

from teamd import actions, inbox
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.faults.faultkit import (
    TEAM,
    Mail,
    T,
    assert_no_strays,
    assert_shown_once,
    assert_statuses_true,
    figure,
)
from tests.harness import journal, member, running_teamd, send_to_lead, wait_until

NAMES = ("alice", "bob", "carol")


def test_teamd_short_of_descriptors_forks_nothing_it_cannot_serve(
        ws: Workspace, server: ScriptedServer, workdir: Path, tmp_path: Path) -> None:
    server.add_rule({"regex": r"HELLO-(?P<k>\w+)", "reply": send_to_lead("ACK-{k}")})
    actions.create_team(ws, TEAM)
    with running_teamd(ws, server.url) as daemon:
        proc = psutil.Process(daemon.pid)
        limit = proc.rlimit(psutil.RLIMIT_NOFILE)
        proc.rlimit(psutil.RLIMIT_NOFILE, (12, limit[1]))  # enough to run, not to fork
        low_since = time.time()
        for name in NAMES:
            actions.spawn(ws, TEAM, name, "Wait for work from the lead.", cwd=str(workdir))
        for name in NAMES:
            wait_until(lambda n=name: "short of file descriptors" in str(
                member(ws, TEAM, n)["last_error"]), T, f"{name}'s last_error to say why")
        wait_until(lambda: time.time() > low_since + 5, T, "a window to count forks in",
                   interval=0.1)
        said = daemon.output().count("short of file descriptors")
        spawned = [e for e in journal(ws, TEAM) if e["event"] == "spawned"]
        assert spawned == [] and "cannot record pid" not in daemon.output()
        assert daemon.proc.poll() is None
        assert all(member(ws, TEAM, n)["status"] == "pending" for n in NAMES)
        assert_statuses_true(ws, daemon)
        proc.rlimit(psutil.RLIMIT_NOFILE, limit)  # descriptors come back: so does work
        mail = Mail(ws)
        for name in NAMES:
            wait_until(lambda n=name: member(ws, TEAM, n)["status"] == "idle", T, f"{name} idle")
            mail.send(name, f"HELLO-{name}")
        wait_until(lambda: {m["content"] for m in inbox.peek(ws, TEAM, "lead")} >=
                   {f"ACK-{n}" for n in NAMES}, T, "every answer")
        spawned = [e for e in journal(ws, TEAM) if e["event"] == "spawned"]
        assert sorted(e["member"] for e in spawned) == sorted(NAMES)  # one fork each
        assert all(member(ws, TEAM, n)["last_error"] is None for n in NAMES)
        assert_shown_once(ws, server, mail.sent)
        assert_statuses_true(ws, daemon)
        assert_no_strays(tmp_path, daemon)
    figure("forks while short of descriptors", f"0 ({said} refusals logged in 5 s for "
           f"{len(NAMES)} members; {len(spawned)} forks once the limit was raised)")
