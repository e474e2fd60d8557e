"""Resources run out (CONTRACT §3 "What a writer leaves", §4 "Exits"): teamd forks no more
than it can serve, says why in `last_error` and its log, never crashes, never fork-loops;
a fork it has no room to record (a file-size limit, a full disk) is stopped and the member
held back, never `failed` for want of space (issue 26).

A full filesystem during sends, session appends, task writes and forks:
tests/e2e/test_hostile_disk.py (test_teamctl_on_a_full_disk_says_one_line_and_leaves_nothing_torn,
test_a_full_disk_neither_fork_loops_the_supervisor_nor_fails_a_member,
test_a_teammate_that_cannot_write_its_session_makes_no_call_until_it_can). 200 members in
one team: tests/faults/test_fault_soak.py (`-m soak`: it takes minutes on 2 cores)."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import psutil

from teamd import actions, inbox
from teamd.layout import Workspace
from teamd.proc import EXIT_NO_SPACE
from teamd.scripted import ScriptedServer
from tests import harness
from tests.faults.faultkit import (
    TEAM,
    Mail,
    T,
    assert_no_strays,
    assert_shown_once,
    assert_statuses_true,
    figure,
    statuses_seen,
    wait_status,
)
from tests.harness import Teamd, fill, journal, member, running_teamd, send_to_lead, wait_until

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


# -- no room to record a fork (issue 26) -----------------------------------------------------
HELD = "held back for want of space"
REFUSED = re.compile(r"cannot record pid (\d+): .*; trying again in (\d+) s")


def back_after_the_fault(ws: Workspace, server: ScriptedServer, daemon: Teamd, old: int,
                         seen: list[str], lifted: float) -> int:
    """After a fault that kept teamd from recording alice's fork: alice is live again (a new
    pid that answers), was never `failed`, counted no refused fork as a crash (with
    `restart_limit` 1, one more crash than the kill would have failed it), and the lead was
    told nothing. Returns the new pid."""
    def back() -> int | None:  # on a full disk her file may still say `idle` from before
        m = member(ws, TEAM, "alice")
        pid = harness.live_pid(ws, TEAM, "alice")
        return pid if m["status"] == "idle" and pid not in (None, old) else None

    new = wait_until(back, T, "alice live and idle again")
    figure("live again after the room came back", f"{time.monotonic() - lifted:.1f} s")
    assert "failed" not in seen, seen
    m = member(ws, TEAM, "alice")
    assert m["restarts"] <= 1 and m["last_error"] is None, m
    # the refused forks were never let run: only the first start and the one that took
    assert [e["pid"] for e in journal(ws, TEAM) if e["event"] == "spawned"] == [old, new]
    server.add_rule({"agent": "alice", "contains": "BACK?", "reply": send_to_lead("BACK-OK")})
    actions.send(ws, TEAM, "alice", "BACK?")
    harness.lead_got(ws, lambda msg: msg["content"] == "BACK-OK", "alice's answer", T)
    assert not [msg for msg in harness.lead_inbox(ws) if msg["type"] == "member_failed"]
    assert not [e for e in journal(ws, TEAM) if e["event"] == "member_failed"]
    assert daemon.proc.poll() is None
    assert_statuses_true(ws, daemon)
    return new


def test_a_fork_teamd_cannot_record_under_a_file_size_limit_is_held_back_not_failed(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    """RLIMIT_FSIZE lowered to 1 KiB on the running teamd (what `prlimit --fsize=1024` does):
    its writes past 1 KiB fail with EFBIG. alice is killed meanwhile; teamd forks her again,
    cannot journal the start, stops the fork and holds her back, then starts her once the
    limit is lifted."""
    harness.make_team(ws, workdir, "alice")
    with running_teamd(ws, server.url, restart_limit=1) as daemon:
        wait_status(ws, "alice", "idle")
        old = harness.live_pid(ws, TEAM, "alice")
        assert old is not None
        teamd = psutil.Process(daemon.pid)
        room = teamd.rlimit(psutil.RLIMIT_FSIZE)
        with statuses_seen(ws, "alice") as seen:
            teamd.rlimit(psutil.RLIMIT_FSIZE, (1024, room[1]))
            try:
                os.kill(old, signal.SIGKILL)

                def held(after: str) -> dict[str, Any] | None:
                    m = member(ws, TEAM, "alice")
                    why = str(m["last_error"])
                    return m if HELD in why and "File too large" in why and after in why \
                        else None

                first = wait_until(lambda: held("again in 1 s"), T, "a refused fork")
                assert first["status"] == "backoff" and first["pid"] != old
                wait_until(lambda: harness.gone(first["pid"]), T, "the refused fork to end")
                # tried again after its hold, refused again, held back twice as long
                second = wait_until(lambda: held("again in 2 s"), T, "a second refused fork")
                assert second["pid"] not in (old, first["pid"])
                assert second["restarts"] == 1  # the kill; no refused fork counts
            finally:
                teamd.rlimit(psutil.RLIMIT_FSIZE, room)
            lifted = time.monotonic()
            new = back_after_the_fault(ws, server, daemon, old, seen, lifted)
        assert "backoff" in seen
        # forked once the limit was lifted: the child runs with teamd's limit as it is now
        assert psutil.Process(new).rlimit(psutil.RLIMIT_FSIZE) == room


def test_a_fork_teamd_cannot_record_on_a_full_disk_is_held_back_not_failed(
        small_disk: Path, server: ScriptedServer, workdir: Path, tmp_path: Path) -> None:
    """The workspace on a small tmpfs, filled up (ENOSPC) while alice is killed: teamd
    can write nothing, so its log (off that disk) says what it refused; it holds alice back,
    longer each time, and starts her once the space is back."""
    root = small_disk / "ws"
    root.mkdir()
    ws = Workspace.at(root)
    harness.make_team(ws, workdir, "alice")
    log = tmp_path / "teamd.log"

    def refusals() -> list[tuple[int, int]]:
        return [(int(pid), int(delay)) for pid, delay in REFUSED.findall(log.read_text())]

    with running_teamd(ws, server.url, log_path=log, restart_limit=1) as daemon:
        wait_status(ws, "alice", "idle")
        old = harness.live_pid(ws, TEAM, "alice")
        assert old is not None
        with statuses_seen(ws, "alice") as seen:
            filler = fill(small_disk)
            try:
                os.kill(old, signal.SIGKILL)
                refused = wait_until(lambda: (r := refusals())[1:] and r, T, "two refused forks")
                wait_until(lambda: all(harness.gone(pid) for pid, _ in refused), T,
                           "each refused fork to end")
                delays = [delay for _, delay in refused]
                assert delays == sorted(delays) and delays[-1] > delays[0], delays
            finally:
                filler.unlink()
            lifted = time.monotonic()
            back_after_the_fault(ws, server, daemon, old, seen, lifted)


def test_a_teammate_stopped_by_a_file_size_limit_is_held_back_not_failed(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    """EFBIG met by the teammate itself (its own RLIMIT_FSIZE lowered to 1 KiB, too little
    for the journal it must append to when mail comes): it exits for want of space
    (EXIT_NO_SPACE, even with no room left in its log for the traceback), and teamd holds
    it back and starts it again — not a crash, even with `restart_limit` 0."""
    server.add_rule({"agent": "alice", "contains": "PING", "reply": send_to_lead("PONG")})
    harness.make_team(ws, workdir, "alice")
    with running_teamd(ws, server.url, restart_limit=0) as daemon:
        wait_status(ws, "alice", "idle")
        old = harness.live_pid(ws, TEAM, "alice")
        assert old is not None
        with statuses_seen(ws, "alice") as seen:
            proc = psutil.Process(old)
            proc.rlimit(psutil.RLIMIT_FSIZE, (1024, proc.rlimit(psutil.RLIMIT_FSIZE)[1]))
            actions.send(ws, TEAM, "alice", "PING")
            harness.lead_got(ws, lambda msg: msg["content"] == "PONG", "alice's answer", T)
        m = member(ws, TEAM, "alice")
        assert m["last_exit"]["code"] == EXIT_NO_SPACE and m["restarts"] == 0, m
        assert harness.gone(old) and harness.live_pid(ws, TEAM, "alice") not in (None, old)
        assert "backoff" in seen and "failed" not in seen, seen
        assert [e["code"] for e in journal(ws, TEAM) if e["event"] == "exited"] == [
            EXIT_NO_SPACE]
        assert not [msg for msg in harness.lead_inbox(ws) if msg["type"] == "member_failed"]
        assert_statuses_true(ws, daemon)
