"""Corrupt state under a running `teamd` (CONTRACT §2 "Files", §3 "What a reader refuses"):
whatever a person, an editor or a broken disk leaves in a file, it is moved aside or
skipped, reported, nothing crashes, and `teamctl` names the file.

Also proven elsewhere: bad inbox lines (not JSON, over 1 MiB, content over 256 KiB, unknown
type, duplicate id) never reach the model (tests/e2e/test_hostile_disk.py:
test_bad_lines_in_a_teammates_inbox_never_reach_the_model); a hand-broken task file does not
stop the supervisor nor the other teams (tests/e2e/test_supervisor_robust.py)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from teamd import board, files, inbox, roster
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.faults.faultkit import (
    TEAM,
    Mail,
    T,
    assert_no_strays,
    assert_shown_once,
    assert_statuses_true,
    assert_tasks_once,
    figure,
    idle,
    restarted,
    showings,
)
from tests.harness import (
    journal,
    lead_says,
    live_pid,
    make_team,
    member,
    read_log,
    running_teamd,
    send_to_lead,
    tool_use,
    wait_until,
)
from tests.helpers_proc import teamctl


def test_a_truncated_config_json_is_named_kept_in_memory_and_never_overwritten(
        ws: Workspace, server: ScriptedServer, workdir: Path, tmp_path: Path) -> None:
    server.add_rule({"agent": "alice", "contains": "AFTER-REPAIR",
                     "reply": send_to_lead("REPAIRED")})
    make_team(ws, workdir, "alice")
    config = ws.store.paths.config(TEAM)
    with running_teamd(ws, server.url) as daemon:
        idle(ws, "alice")
        pid = live_pid(ws, TEAM, "alice")
        good = config.read_bytes()
        broken = good[: len(good) // 2]
        config.write_bytes(broken)  # a truncated copy, as a half-done edit leaves it
        done = teamctl(ws.root, "status", TEAM)
        assert done.returncode == 1 and str(config) in done.stderr.decode(), done.stderr
        wait_until(lambda: f"{config}: not valid JSON" in daemon.output()
                   and "keeping its last good copy (1 members)" in daemon.output(), T,
                   "teamd to name the file and keep its last good copy")
        # the teammate goes on working, and records its status and usage all the same: they
        # are its own file's (members/alice.json), which never needs config.json
        tokens = (roster.read_status(ws, TEAM, "alice") or {})["usage"]["input_tokens"]
        stray = inbox.make("message", "lead", "alice", "WHILE-BROKEN hello")
        files.append_jsonl(ws.store.paths.inbox(TEAM, "alice"), [stray], durable=True)
        server.wait_for(lambda r: "WHILE-BROKEN" in r["last_user_text"], T)
        wait_until(lambda: (roster.read_status(ws, TEAM, "alice") or {})["usage"][
            "input_tokens"] > tokens, T, "alice to record the call's usage")
        wait_until(lambda: "the budgets last read stand" in read_log(ws, TEAM, "alice"), T,
                   "alice to say she keeps the budgets she last read")
        assert config.read_bytes() == broken  # never overwritten by anyone
        assert daemon.proc.poll() is None and live_pid_raw(pid)
        files.atomic_write_bytes(config, good)  # a person restores it
        wait_until(lambda: "reads again" in daemon.output(), T, "teamd to read it again")
        mail = Mail(ws)
        mail.send("alice", "AFTER-REPAIR all well?")
        wait_until(lambda: lead_says(ws, "REPAIRED"), T, "the answer after the repair")
        idle(ws, "alice")
        assert live_pid(ws, TEAM, "alice") == pid and member(ws, TEAM, "alice")["restarts"] == 0
        assert len(showings(server.requests, "alice", "WHILE-BROKEN")) == 1
        assert_shown_once(ws, server, mail.sent)
        assert_statuses_true(ws, daemon)
        assert_no_strays(tmp_path, daemon)
        figure("broken config.json", f"{len(broken)} of {len(good)} bytes; teammate pid "
               "unchanged, file untouched until repaired")


def live_pid_raw(pid: int | None) -> bool:
    try:
        os.kill(pid or 0, 0)
        return bool(pid)
    except ProcessLookupError:
        return False


def test_hand_broken_task_request_and_journal_are_skipped_and_named(
        ws: Workspace, server: ScriptedServer, workdir: Path, tmp_path: Path) -> None:
    server.add_rule({"name": "finish", "agent": "alice",
                     "regex": r"<auto-claimed>Task #(?P<tid>\d+)",
                     "reply": {"content": [tool_use("TaskUpdate", task_id="{int:tid}",
                                                    status="completed")]}})
    server.add_rule({"agent": "alice", "contains": "PING", "reply": send_to_lead("PONG")})
    make_team(ws, workdir, "alice")
    task_file = ws.store.paths.tasks_dir(TEAM) / "7.json"
    request_file = ws.store.paths.requests_dir(TEAM) / "shutdown-0badc0ffee.json"
    with running_teamd(ws, server.url, backoff_initial=0.1) as daemon:
        idle(ws, "alice")
        pid = live_pid(ws, TEAM, "alice")
        task_file.write_text("{oops")
        files.ensure_dir(request_file.parent)
        request_file.write_text('{"schema": 1, "req')
        with open(ws.store.paths.events(TEAM), "ab") as fh:  # garbage, then more events after it
            fh.write(b"\x00\xffGARBAGE not json\n")
        # a member that starts while the bad files are there reads them all afresh
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        pid = restarted(ws, "alice", pid)
        mail = Mail(ws)
        mail.send("alice", "PING still fine?")
        wait_until(lambda: lead_says(ws, "PONG"), T, "alice's answer")
        for i in range(3):
            board.create(ws, TEAM, f"chore {i}")
        wait_until(lambda: all(t["status"] == "completed" for t in board.list_tasks(ws, TEAM)),
                   T, "the chores done")
        idle(ws, "alice")
        assert live_pid(ws, TEAM, "alice") == pid and member(ws, TEAM, "alice")["restarts"] == 1
        assert daemon.proc.poll() is None
        named = {}
        for args, path in ((("task", "list", TEAM), task_file),
                           (("board", TEAM), task_file),
                           (("requests", TEAM), request_file),
                           (("status", TEAM), request_file),
                           (("logs", TEAM), ws.store.paths.events(TEAM))):
            done = teamctl(ws.root, *args)
            err = done.stderr.decode()
            assert done.returncode == 0, (args, err)
            assert str(path) in err and "Traceback" not in err, (args, err)
            named[" ".join(args[:2])] = path.name
        assert "skipped 1 unreadable line(s)" in teamctl(ws.root, "logs", TEAM).stderr.decode()
        assert task_file.read_text() == "{oops" and request_file.read_text().endswith('"req')
        assert_tasks_once(ws)
        assert_shown_once(ws, server, mail.sent)
        assert_statuses_true(ws, daemon)
        assert_no_strays(tmp_path, daemon)
    figure("hand-broken files named by teamctl", named)


def test_bad_inbox_lines_binary_10_mib_and_a_torn_tail(
        ws: Workspace, server: ScriptedServer, workdir: Path, tmp_path: Path) -> None:
    make_team(ws, workdir, "alice")
    path = ws.store.paths.inbox(TEAM, "alice")
    first = inbox.make("message", "lead", "alice", "GOOD-ONE read this")
    last = inbox.make("message", "lead", "alice", "GOOD-TWO and this")
    huge = {**inbox.make("message", "lead", "alice", "x"), "content": "HUGE " + "h" * (10 << 20)}
    with running_teamd(ws, server.url) as daemon:
        idle(ws, "alice")
        pid = live_pid(ws, TEAM, "alice")
        # a writer that dies mid-line leaves a torn tail; the next append must not glue on
        data = (files.dumps_line(first) + b"\xff\xfe\x00 BINARY-LINE \x80\n"
                + files.dumps_line(huge) + files.dumps_line(last) + b'{"id": "torn-1", "ty')
        with files.lock(path), open(path, "ab") as fh:
            fh.write(data)
        server.wait_for(lambda r: "GOOD-TWO" in r["last_user_text"], T)
        idle(ws, "alice")
        assert live_pid(ws, TEAM, "alice") == pid
        assert path.read_bytes() == b""
        rejected = files.read_jsonl(files.rejected_path(path)).records
        reasons = [r["reason"].split(" (")[0] for r in rejected]
        assert reasons == ["not UTF-8", "line over 1 MiB", "torn"], reasons
        events = [e for e in journal(ws, TEAM) if e["event"] == "message_rejected"]
        assert {e["file"] for e in events} == {f".teams/{TEAM}/alice_inbox.jsonl"}
        assert len(events) == 3
        shown = json.dumps([r["body"] for r in server.requests])
        assert "BINARY-LINE" not in shown and "HUGE " not in shown and "torn-1" not in shown
        for token in ("GOOD-ONE", "GOOD-TWO"):
            assert len(showings(server.requests, "alice", token)) == 1
        assert_statuses_true(ws, daemon)
        assert_no_strays(tmp_path, daemon)
    figure("bad inbox lines moved aside", reasons)


def test_a_session_with_a_torn_tail_is_resumed(ws: Workspace, server: ScriptedServer,
                                               workdir: Path, tmp_path: Path) -> None:
    server.add_rule({"agent": "alice", "contains": "FIRST", "reply": send_to_lead("ONE")})
    server.add_rule({"agent": "alice", "contains": "SECOND", "reply": send_to_lead("TWO")})
    make_team(ws, workdir, "alice")
    session = ws.store.paths.session(TEAM, "alice")
    mail = Mail(ws)
    with running_teamd(ws, server.url, backoff_initial=3) as daemon:
        idle(ws, "alice")
        mail.send("alice", "FIRST hello")
        wait_until(lambda: lead_says(ws, "ONE"), T, "the first answer")
        idle(ws, "alice")
        pid = live_pid(ws, TEAM, "alice")
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        with open(session, "ab") as fh:  # what a crash mid-write would leave
            fh.write(b'{"type": "assistant", "content": [{"type": "te')
        new = restarted(ws, "alice", pid)
        idle(ws, "alice")
        mail.send("alice", "SECOND again")
        wait_until(lambda: lead_says(ws, "TWO"), T, "the answer after the restart")
        idle(ws, "alice")
        assert live_pid(ws, TEAM, "alice") == new
        rejected = files.read_jsonl(files.rejected_path(session)).records
        assert [r["reason"] for r in rejected] == ["torn"]
        assert "moved 1 line(s)" in read_log(ws, TEAM, "alice")
        assert session.read_bytes().endswith(b"\n")
        assert len(lead_says(ws, "ONE")) == 1 and len(lead_says(ws, "TWO")) == 1
        assert_shown_once(ws, server, mail.sent)
        assert_statuses_true(ws, daemon)
        assert_no_strays(tmp_path, daemon)
    figure("torn session tail", "moved to sessions/alice.rejected.jsonl; resumed")
