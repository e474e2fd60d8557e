"""A hostile inbox and a full disk, against a real `teamd run`, real `teamctl` processes and
the scripted model server (CONTRACT.md section 3: "What a reader refuses", "What a writer
leaves"; section 4, "Exits"; issue 7).

The full disk is a small tmpfs each test mounts for itself (root only: skipped otherwise),
or RLIMIT_FSIZE set on one running teammate with prlimit (a full disk for that process
alone, lifted again when the test gives the space back).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil

from teamd import actions, files, inbox
from teamd.layout import Workspace
from teamd.proc import EXIT_NO_SPACE
from teamd.processes import MemberProcess
from teamd.scripted import ScriptedServer
from teamd.supervisor import Supervisor
from tests.harness import (
    TEAM,
    T,
    asked,
    fill,
    journal,
    last_user,
    live_pid,
    make_team,
    member,
    running_teamd,
    turn_text,
    wait_status,
    wait_until,
)
from tests.helpers_proc import snapshot, teamctl


def assert_whole_lines(root: Path) -> int:
    """Every JSONL file under `root` ends with a newline and parses line by line."""
    checked = 0
    for path in root.rglob("*.jsonl"):
        data = path.read_bytes()
        assert data == b"" or data.endswith(b"\n"), f"{path} ends in a torn line"
        for line in data.splitlines():
            assert isinstance(json.loads(line), dict), f"{path}: {line[:80]!r}"
        checked += 1
    return checked


def one_error_line(done: subprocess.CompletedProcess[bytes], *needles: str) -> str:
    err = done.stderr.decode()
    assert done.returncode == 1, (done.returncode, err)
    assert err.count("\n") == 1 and err.startswith("teamctl: error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err
    return err


def request_log(server: ScriptedServer) -> str:
    assert server.log_path is not None
    return Path(server.log_path).read_text(errors="replace")


# -- what a reader refuses ---------------------------------------------------------------
def test_bad_lines_in_a_teammates_inbox_never_reach_the_model(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    make_team(ws, workdir, "alice")
    first = inbox.make("message", "lead", "alice", "GOOD-1 read this")
    last = inbox.make("message", "lead", "alice", "GOOD-2 and this")
    stamp = time.time()

    def line(**fields: Any) -> dict[str, Any]:
        return {"id": fields.pop("id"), "type": "message", "sender": "lead",
                "recipient": "alice", "timestamp": stamp, **fields}

    huge = line(id="huge-1", content="HUGE-LINE " + "h" * (2 << 20))  # a 2 MiB line
    wide = line(id="wide-1", content="WIDE-CONTENT " + "w" * (300 * 1024))  # 300 KiB content
    odd = line(id="odd-1", type="telepathy", content="ODD-TYPE hello")
    copy = {**first, "content": "DUP-COPY of the first"}  # the first's id again
    with running_teamd(ws, server.url):
        wait_status(ws, "alice", "idle")
        # one write, so one drain sees them all: the first of an id is the message
        files.append_jsonl(
            ws.store.paths.inbox(TEAM, "alice"), [first, huge, wide, odd, copy, last], durable=True
        )
        server.wait_for(asked("GOOD-2", "alice"), T)
        wait_status(ws, "alice", "idle")
    seen = [turn_text(m) for r in server.requests if r["agent"] == "alice"
            for m in r["body"]["messages"]]
    assert any("GOOD-1" in t and "GOOD-2" in t for t in seen)
    logged = request_log(server)
    for marker in ("HUGE-LINE", "WIDE-CONTENT", "ODD-TYPE", "DUP-COPY"):
        assert not any(marker in t for t in seen), f"{marker} reached the model"
        assert marker not in logged, f"{marker} is in the scripted server's request log"
    assert "GOOD-1" in logged
    inbox_path = ws.store.paths.inbox(TEAM, "alice")
    assert inbox_path.read_bytes() == b""
    rejected = files.read_jsonl(files.rejected_path(inbox_path)).records
    assert [r["reason"] for r in rejected] == [
        f"line over 1 MiB ({len(files.dumps_line(huge)) - 1} bytes)",
        f"content over 256 KiB ({len(wide['content'])} bytes)",
        "unknown type 'telepathy'",
        "duplicate id"]
    assert rejected[0]["cut"] is True and rejected[0]["line"].startswith('{"id":"huge-1"')
    assert "WIDE-CONTENT" in rejected[1]["line"] and "DUP-COPY" in rejected[3]["line"]
    events = [e for e in journal(ws, TEAM) if e["event"] == "message_rejected"]
    assert [(e["reason"].split(" (")[0], e.get("id")) for e in events] == [
        ("line over 1 MiB", None), ("content over 256 KiB", "wide-1"),
        ("unknown type 'telepathy'", "odd-1"), ("duplicate id", first["id"])]
    assert {(e["member"], e["file"]) for e in events} == {
        ("alice", f".teams/{TEAM}/alice_inbox.jsonl")}
    assert_whole_lines(ws.root)


def test_a_teammate_takes_in_at_most_100_messages_per_model_call(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    make_team(ws, workdir, "alice")
    sent = [inbox.make("message", "lead", "alice", f"BATCH-{i:03d}") for i in range(150)]
    with running_teamd(ws, server.url):
        wait_status(ws, "alice", "idle")
        files.append_jsonl(ws.store.paths.inbox(TEAM, "alice"), sent, durable=True)
        first = server.wait_for(asked("BATCH-000", "alice"), T)
        second = server.wait_for(asked("BATCH-149", "alice"), T)
        wait_status(ws, "alice", "idle")
    now, later = turn_text(last_user(first)), turn_text(last_user(second))
    assert now.count("<teammate-message") == 100 and "BATCH-099" in now
    assert "BATCH-100" not in now  # left in the inbox for the next call, oldest first
    assert later.count("<teammate-message") == 50 and "BATCH-100" in later
    assert ws.store.paths.inbox(TEAM, "alice").read_bytes() == b""


def test_teamctl_inbox_peek_skips_bad_lines_and_drain_moves_them(ws: Workspace) -> None:
    actions.create_team(ws, "t")
    actions.spawn(ws, "t", "alice", "work")
    good = actions.send(ws, "t", "lead", "GOOD from alice", sender="alice")
    path = ws.store.paths.inbox("t", "lead")
    with open(path, "ab") as fh:  # by hand, as a person with an editor might
        fh.write(b'{"oops": \n')
        fh.write(files.dumps_line({**good, "content": "SECOND copy"}))
        fh.write(files.dumps_line({**good, "id": "no-reason", "type": "shutdown_response",
                                   "request_id": "r", "approve": True}))
    before = path.read_bytes()
    peeked = teamctl(ws.root, "inbox", "t", "--peek", "--json")
    assert peeked.returncode == 0, peeked.stderr
    assert [json.loads(x)["id"] for x in peeked.stdout.splitlines()] == [good["id"]]
    assert b"skipping 3 line(s)" in peeked.stderr
    assert path.read_bytes() == before and not files.rejected_path(path).exists()
    drained = teamctl(ws.root, "inbox", "t")
    assert drained.returncode == 0, drained.stderr
    assert b"GOOD from alice" in drained.stdout and b"SECOND" not in drained.stdout
    assert path.read_bytes() == b""
    reasons = [r["reason"] for r in files.read_jsonl(files.rejected_path(path)).records]
    assert reasons == ["not JSON", "duplicate id", "missing field reason"]
    assert [e["reason"] for e in journal(ws, "t") if e["event"] == "message_rejected"] == \
        reasons


# -- what a writer leaves ----------------------------------------------------------------
def test_teamctl_on_a_full_disk_says_one_line_and_leaves_nothing_torn(
        small_disk: Path) -> None:
    root = small_disk / "ws"
    root.mkdir()
    for args in (("create", "t"), ("spawn", "t", "alice", "--prompt", "work"),
                 ("send", "t", "alice", "before the disk filled"), ("task", "add", "t", "one")):
        assert teamctl(root, *args).returncode == 0
    before = snapshot(root)
    filler = fill(small_disk)
    # 20 KB does not fit in the inbox's last page: the kernel takes what fits, then refuses
    sent = teamctl(root, "send", "t", "alice", "-", input=b"x" * 20_000)
    one_error_line(sent, str(root / ".teams/t/alice_inbox.jsonl"), "No space left on device")
    added = teamctl(root, "task", "add", "t", "two")
    one_error_line(added, str(root / ".tasks/t"), "No space left on device")
    broadcast = teamctl(root, "broadcast", "t", "-", input=b"y" * 20_000)
    one_error_line(broadcast, "No space left on device")
    assert snapshot(root) == before  # not a byte changed, no temp file left
    assert assert_whole_lines(root) >= 2
    filler.unlink()  # space comes back: so does work
    assert teamctl(root, "send", "t", "alice", "-", input=b"x" * 20_000).returncode == 0
    assert teamctl(root, "task", "add", "t", "two").returncode == 0
    ws = Workspace.at(root)
    assert [len(m["content"]) for m in inbox.peek(ws, "t", "alice")] == [22, 20_000]
    assert_whole_lines(root)


def test_a_full_disk_neither_fork_loops_the_supervisor_nor_fails_a_member(
        small_disk: Path, server: ScriptedServer, workdir: Path, tmp_path: Path) -> None:
    root = small_disk / "ws"
    root.mkdir()
    ws = Workspace.at(root)
    make_team(ws, workdir, "alice")
    server.add_rule({"agent": "alice", "contains": "AFTER-FULL",
                     "reply": {"content": [{"type": "text", "text": "back"}]}})
    log = tmp_path / "teamd.log"  # off the full disk, so it can tell what happened
    with running_teamd(ws, server.url, log_path=log) as daemon:
        wait_status(ws, "alice", "idle")
        old = live_pid(ws, TEAM, "alice")
        assert old is not None
        filler = fill(small_disk)
        os.kill(old, signal.SIGKILL)  # teamd must start it again, and has no room to
        wait_until(lambda: "cannot record pid" in log.read_text(), T,
                   "teamd to fail to record a fork")
        forks = log.read_text().count("cannot record pid")
        time.sleep(3)  # a window to count forks in (no condition marks "no more forks")
        forks = log.read_text().count("cannot record pid") - forks
        assert forks <= 3, f"{forks} forks in 3 s: a fork loop"
        assert daemon.proc.poll() is None  # the supervisor survives
        filler.unlink()
        new = wait_until(lambda: (pid := live_pid(ws, TEAM, "alice")) != old and pid, 45,
                         "alice to be started again once space is back")
        wait_status(ws, "alice", "idle")
        calls = len([e for e in journal(ws, TEAM) if e["event"] == "model_call"])
        actions.send(ws, TEAM, "alice", "AFTER-FULL are you back?")
        server.wait_for(asked("AFTER-FULL", "alice"), T)
        # its status says `active` only once the request has left: wait for the answer to
        # be recorded before waiting for idle, or the old `idle` would pass for the new one
        wait_until(lambda: len([e for e in journal(ws, TEAM)
                                if e["event"] == "model_call"]) > calls, T, "the answer")
        wait_status(ws, "alice", "idle")
        assert live_pid(ws, TEAM, "alice") == new
        spawned = [e for e in journal(ws, TEAM) if e["event"] == "spawned"]
        assert [e["pid"] for e in spawned] == [old, new]  # no burst of forks once it could
    assert not [e for e in journal(ws, TEAM) if e["event"] == "member_failed"]
    assert_whole_lines(root)


def test_a_teammate_that_cannot_write_its_session_makes_no_call_until_it_can(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    big = "BIG-REPLY " + "r" * (400 * 1024)
    server.add_rule({"agent": "alice", "contains": "BIG-PLEASE",
                     "reply": {"content": [{"type": "text", "text": big}]}})
    make_team(ws, workdir, "alice")
    session = ws.store.paths.session(TEAM, "alice")
    with running_teamd(ws, server.url) as daemon:
        wait_status(ws, "alice", "idle")
        pid = live_pid(ws, TEAM, "alice")
        assert pid is not None
        proc = psutil.Process(pid)
        unlimited = proc.rlimit(psutil.RLIMIT_FSIZE)
        # room for every small file alice writes, not for a 400 KB line in its session
        proc.rlimit(psutil.RLIMIT_FSIZE, (256 * 1024, unlimited[1]))
        actions.send(ws, TEAM, "alice", "BIG-PLEASE answer at length")
        server.wait_for(asked("BIG-PLEASE", "alice"), T)
        calls = len(server.requests)

        def last_error() -> str:
            return str(member(ws, TEAM, "alice")["last_error"] or "")

        wait_until(lambda: "retrying in 2 s" in last_error(), T, "the second try")
        assert str(session) in last_error() and "File too large" in last_error()
        actions.send(ws, TEAM, "alice", "WHILE-STUCK still there?")
        wait_until(lambda: "retrying in 4 s" in last_error(), T, "the third try")
        assert len(server.requests) == calls  # no model call while it cannot record
        assert [m["content"] for m in inbox.peek(ws, TEAM, "alice")] == [
            "WHILE-STUCK still there?"]  # nor anything taken from its inbox
        assert "BIG-REPLY" not in session.read_text()
        assert_whole_lines(ws.root)  # no torn line in the session (or anywhere)
        proc.rlimit(psutil.RLIMIT_FSIZE, unlimited)  # space comes back
        server.wait_for(asked("WHILE-STUCK", "alice"), T, since=calls)
        # the answer recorded (model_call) clears last_error; only then is `idle` new
        wait_until(lambda: member(ws, TEAM, "alice")["last_error"] is None, T,
                   "last_error to clear with the answer")
        wait_status(ws, "alice", "idle")
        assert live_pid(ws, TEAM, "alice") == pid  # it waited; it did not crash
        assert daemon.proc.poll() is None
    assert session.read_text().count("BIG-REPLY") == 1
    assert_whole_lines(ws.root)


def test_an_exit_for_want_of_space_is_retried_and_never_counted(ws: Workspace) -> None:
    """A teammate that died of ENOSPC exits EXIT_NO_SPACE (its process's last resort); the
    supervisor's own bookkeeping of that exit, driven here without forking."""
    actions.create_team(ws, "t")
    actions.spawn(ws, "t", "alice", "work")
    sup = Supervisor(ws)
    delays: list[int] = []
    for n in range(sup.conf.restart_limit + 3):
        process = MemberProcess("t", "alice", pid=4_000_000 + n, create_time=0.0,
                                started_at=time.time())
        sup.on_exit(process, EXIT_NO_SPACE, None)
        m = member(ws, "t", "alice")
        assert (m["status"], m["restarts"]) == ("backoff", 0)
        assert "want of space" in m["last_error"]
        delays.append(round(m["restart_at"] - m["last_exit"]["at"]))
    assert delays == [1, 2, 4, 8, 16, 30, 30, 30]
    assert not [e for e in journal(ws, "t") if e["event"] == "member_failed"]
    # the same exits as crashes count, and end in `failed`
    for n in range(sup.conf.restart_limit + 1):
        sup.on_exit(MemberProcess("t", "alice", pid=4_100_000 + n, create_time=0.0,
                                  started_at=time.time()), 1, None)
    assert member(ws, "t", "alice")["status"] == "failed"
