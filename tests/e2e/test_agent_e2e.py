"""The teammate end to end: a real `teamd run`, the real `anthropic` SDK over real HTTP,
and the scripted model server (CONTRACT.md sections 3, 4, 6 and 8; issue 4)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

from teamd import actions, board, files, inbox, requests
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import (
    TEAM,
    T,
    asked,
    assert_shut_down,
    events_of,
    gone,
    journal,
    last_user,
    lead_got,
    lead_inbox,
    live_pid,
    make_team,
    member,
    procs_with,
    running_teamd,
    send_to_lead,
    tool_use,
    turn_text,
    wait_status,
    wait_until,
)
from tests.helpers_proc import ctl


# -- helpers -----------------------------------------------------------------------------
def shown_at(server: ScriptedServer, agent: str, text: str) -> set[int]:
    """The conversation positions of the user turns carrying `text`, over every request
    of `agent`. A message shown exactly once sits in one user turn, at one position, in
    every request that carries it (a request re-sent after a restart repeats that same
    turn; a message shown twice would occupy a second turn)."""
    positions: set[int] = set()
    for r in server.requests:
        if r["agent"] != agent:
            continue
        here = [i for i, m in enumerate(r["body"]["messages"])
                if m["role"] == "user" and text in turn_text(m)]
        assert len(here) <= 1, f"{text!r} in {len(here)} user turns of one request"
        positions.update(here)
    return positions


# -- 1. a message in, the model sees it once, the reply lands in the lead's inbox ---------
def test_message_seen_once_and_reply_reaches_lead(ws: Workspace, server: ScriptedServer,
                                                  workdir: Path) -> None:
    server.add_rule({"agent": "alice", "contains": "PING-7f3a",
                     "reply": send_to_lead("PONG-7f3a")})
    make_team(ws, workdir, "alice")
    with running_teamd(ws, server.url):
        wait_status(ws, "alice", "idle")
        msg = actions.send(ws, TEAM, "alice", "PING-7f3a please answer")
        server.wait_for(asked("PING-7f3a", "alice"), T)
        reply = lead_got(ws, lambda m: m["sender"] == "alice" and m["type"] == "message"
                         and m["content"] == "PONG-7f3a", "alice's reply in lead_inbox.jsonl")
        assert reply["recipient"] == "lead"
        wait_status(ws, "alice", "idle")
        rendered = server.wait_for(asked("PING-7f3a"), 1)
        assert ('<teammate-message sender="lead" type="message">PING-7f3a please answer'
                "</teammate-message>") in turn_text(last_user(rendered))
        assert shown_at(server, "alice", "PING-7f3a") == {2}
        assert msg["id"] in json.dumps(
            files.read_jsonl(ws.store.paths.session(TEAM, "alice")).records
        )
        assert inbox.peek(ws, TEAM, "alice") == []  # taken in: the inbox is cut
        # consumers de-duplicate on the id: the same line twice (in one write) and again
        dup = inbox.make("message", "lead", "alice", "DUP-7f3a once only")
        files.append_jsonl(ws.store.paths.inbox(TEAM, "alice"), [dup, dup], durable=True)
        server.wait_for(asked("DUP-7f3a", "alice"), T)
        wait_status(ws, "alice", "idle")
        files.append_jsonl(ws.store.paths.inbox(TEAM, "alice"), [dup], durable=True)
        wait_until(lambda: not inbox.peek(ws, TEAM, "alice"), T, "the copy to be taken in")
        wait_status(ws, "alice", "idle")
    dups = [r for r in server.requests if "DUP-7f3a" in turn_text(last_user(r))]
    assert len(dups) == 1 and turn_text(last_user(dups[0])).count("DUP-7f3a") == 1
    assert inbox_ids_in_session(ws, "alice").count(dup["id"]) == 1


# -- 2. a broadcast from the lead reaches every teammate ---------------------------------
def test_broadcast_reaches_both_teammates(ws: Workspace, server: ScriptedServer,
                                          workdir: Path) -> None:
    make_team(ws, workdir, "alice", "bob")
    with running_teamd(ws, server.url):
        wait_status(ws, "alice", "idle")
        wait_status(ws, "bob", "idle")
        copies = actions.broadcast(ws, TEAM, "BCAST-91c2 all hands")
        assert sorted(c["recipient"] for c in copies) == ["alice", "bob"]
        for name in ("alice", "bob"):
            seen = server.wait_for(asked("BCAST-91c2", name), T)
            assert 'type="broadcast"' in turn_text(last_user(seen))
        for name in ("alice", "bob"):
            wait_status(ws, name, "idle")
            assert len(shown_at(server, name, "BCAST-91c2")) == 1
        assert not any(m["type"] == "broadcast" for m in lead_inbox(ws))  # not to its sender


# -- 3. auto-claim in dependency order ---------------------------------------------------
def test_auto_claim_follows_dependencies(ws: Workspace, server: ScriptedServer,
                                         workdir: Path) -> None:
    server.add_rule({"agent": "alice", "contains": "<auto-claimed>Task #1", "delay": 0.5,
                     "reply": {"content": [tool_use("TaskUpdate", task_id=1,
                                                    status="completed")]}})
    server.add_rule({"agent": "alice", "contains": "<auto-claimed>Task #2",
                     "reply": {"content": [tool_use("TaskUpdate", task_id=2,
                                                    status="completed")]}})
    server.add_rule({"agent": "alice", "tool_result": "TaskUpdate",
                     "reply": {"content": "Done with it."}})
    make_team(ws, workdir, "alice")
    board.create(ws, TEAM, "lay the foundation")
    board.create(ws, TEAM, "build the walls", blocked_by=[1])
    with running_teamd(ws, server.url):
        server.wait_for(asked("<auto-claimed>Task #1: lay the foundation", "alice"), T)
        # the model is still thinking about task 1 (the server holds its answer)
        one, two = board.get(ws, TEAM, 1), board.get(ws, TEAM, 2)
        assert (one["status"], one["owner"]) == ("in_progress", "alice")
        assert (two["status"], two["owner"]) == ("pending", None)
        server.wait_for(asked("<auto-claimed>Task #2: build the walls", "alice"), T)

        def board_events() -> list[tuple[str, int]]:
            return [(e["event"], e["task_id"]) for e in journal(ws, TEAM)
                    if e["event"].startswith("task_") and e["event"] != "task_created"]

        # the journal line follows the task file: wait for the line itself
        wait_until(lambda: ("task_completed", 2) in board_events(), T, "task 2 completed")
        assert board_events() == [("task_claimed", 1), ("task_completed", 1),
                                  ("task_claimed", 2), ("task_completed", 2)]
        assert board.get(ws, TEAM, 2)["owner"] == "alice"


# -- 4. the shutdown handshake -----------------------------------------------------------
def test_shutdown_while_idle_is_answered_at_once(ws: Workspace, server: ScriptedServer,
                                                 workdir: Path) -> None:
    make_team(ws, workdir, "alice")
    with running_teamd(ws, server.url):
        wait_status(ws, "alice", "idle")
        pid = live_pid(ws, TEAM, "alice")
        assert pid is not None
        calls = len(server.requests)
        rid = actions.shutdown(ws, TEAM, "alice", reason="wrap up")["request"]["request_id"]
        answer = lead_got(ws, lambda m: m["type"] == "shutdown_response", "the answer")
        assert (answer["sender"], answer["request_id"], answer["approve"]) == \
            ("alice", rid, True)
        assert requests.get(ws, TEAM, rid)["status"] == "approved"
        assert_shut_down(ws, "alice", pid)
        assert len(server.requests) == calls  # answered by the harness, no model call


BUSY_RULE = {"agent": "alice", "contains": "BUSY-5d1e", "delay": 1.5,
             "reply": {"content": [tool_use("TaskList")]}}
ASK_RE = r'type="shutdown_request" request_id="(?P<rid>shutdown-[0-9a-f]+)"'


def busy_then_shutdown(ws: Workspace, server: ScriptedServer) -> tuple[int, str]:
    """Start a model call the server holds for a second, and ask for a shutdown meanwhile."""
    wait_status(ws, "alice", "idle")
    pid = live_pid(ws, TEAM, "alice")
    assert pid is not None
    actions.send(ws, TEAM, "alice", "BUSY-5d1e list the tasks")
    server.wait_for(asked("BUSY-5d1e", "alice"), T)
    rid = actions.shutdown(ws, TEAM, "alice", reason="wrap up")["request"]["request_id"]
    return pid, rid


def test_shutdown_while_busy_is_answered_by_the_model(ws: Workspace, server: ScriptedServer,
                                                      workdir: Path) -> None:
    server.add_rule(BUSY_RULE)
    server.add_rule({"agent": "alice", "regex": ASK_RE, "reply": {"content": [tool_use(
        "SendMessage", recipient="lead", content="BYE-FROM-MODEL", type="shutdown_response",
        request_id="{rid}", approve=True)]}})
    make_team(ws, workdir, "alice")
    with running_teamd(ws, server.url):
        pid, rid = busy_then_shutdown(ws, server)
        # the model sees the request at its next call, beside the TaskList result
        seen = server.wait_for(asked(f'request_id="{rid}"', "alice"), T)
        assert "TaskList" in json.dumps(seen["body"]["messages"][-2])
        answer = lead_got(ws, lambda m: m["type"] == "shutdown_response", "the answer")
        assert (answer["content"], answer["request_id"], answer["approve"]) == \
            ("BYE-FROM-MODEL", rid, True)
        assert requests.get(ws, TEAM, rid)["status"] == "approved"
        assert_shut_down(ws, "alice", pid)
    assert [m["type"] for m in lead_inbox(ws)].count("shutdown_response") == 1


def test_shutdown_while_busy_unanswered_is_approved_by_the_harness(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    server.add_rule(BUSY_RULE)
    server.add_rule({"agent": "alice", "regex": ASK_RE,
                     "reply": {"content": "Carrying on with my work."}})
    make_team(ws, workdir, "alice")
    with running_teamd(ws, server.url):
        pid, rid = busy_then_shutdown(ws, server)
        server.wait_for(asked(f'request_id="{rid}"', "alice"), T)
        answer = lead_got(ws, lambda m: m["type"] == "shutdown_response", "the answer")
        assert (answer["request_id"], answer["approve"]) == (rid, True)
        assert answer["reason"] == "ended its turn without answering"
        assert requests.get(ws, TEAM, rid)["status"] == "approved"
        assert_shut_down(ws, "alice", pid)


# -- 5. plan mode: refused, rejected, revised, approved ----------------------------------
def plan_requests(ws: Workspace) -> list[dict[str, Any]]:
    return [m for m in lead_inbox(ws) if m["type"] == "plan_approval_request"]


def test_plan_mode_gate(ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    write = tool_use("write_file", path="out/result.txt", content="built")
    server.add_rule({"agent": "alice", "contains": "PLAN-PROMPT", "reply": {"content": [write]}})
    server.add_rule({"agent": "alice", "tool_result": "write_file", "contains": "plan mode",
                     "reply": {"content": [tool_use("SubmitPlan", plan="PLAN-V1: write it")]}})
    server.add_rule({"agent": "alice", "contains": "FEEDBACK-6b0f",
                     "reply": {"content": [tool_use("SubmitPlan", plan="PLAN-V2: with tests")]}})
    server.add_rule({"agent": "alice", "tool_result": "SubmitPlan",
                     "reply": {"content": "Waiting for the lead."}})
    server.add_rule({"agent": "alice", "regex": 'type="plan_approval_response" '
                     'request_id="[^"]+" approve="true"', "reply": {"content": [write]}})
    server.add_rule({"agent": "alice", "tool_result": "write_file",
                     "reply": {"content": "Written."}})
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "alice", "PLAN-PROMPT build it", cwd=str(workdir), plan_mode=True)
    target = workdir / "out" / "result.txt"
    with running_teamd(ws, server.url):
        refused = server.wait_for(lambda r: r["agent"] == "alice" and any(
            b.get("type") == "tool_result" and b.get("is_error") and "plan mode" in
            str(b.get("content")) for b in last_user(r)["content"]), T)
        assert "write_file" in json.dumps(refused["body"]["messages"][-2])
        first = wait_until(lambda: plan_requests(ws), T, "the first plan request")[0]
        assert first["plan"] == "PLAN-V1: write it"
        assert not target.exists()
        ctl(ws, "reject", TEAM, first["request_id"], "--feedback", "FEEDBACK-6b0f add tests")
        server.wait_for(asked("FEEDBACK-6b0f", "alice"), T)
        second = wait_until(lambda: plan_requests(ws)[1:], T, "the revised plan")[0]
        assert second["plan"] == "PLAN-V2: with tests"
        assert requests.get(ws, TEAM, first["request_id"])["status"] == "rejected"
        assert not target.exists()
        ctl(ws, "approve", TEAM, second["request_id"])
        wait_until(target.exists, T, "write_file to succeed after the approval")
        assert target.read_text() == "built"
        done = server.wait_for(lambda r: r["agent"] == "alice" and "wrote" in
                               turn_text(last_user(r)), T)
        assert not any(b.get("is_error") for b in last_user(done)["content"])


def test_a_member_with_a_plan_pending_claims_nothing(ws: Workspace, server: ScriptedServer,
                                                    workdir: Path) -> None:
    """CONTRACT §6: while a plan of its is pending a member claims nothing; the claimable
    task waits for the approval."""
    server.add_rule({"agent": "alice", "contains": "PLAN-PROMPT",
                     "reply": {"content": [tool_use("SubmitPlan", plan="PLAN: do it")]}})
    server.add_rule({"agent": "alice", "regex": r"<auto-claimed>Task #(?P<tid>\d+)",
                     "reply": {"content": [tool_use("TaskUpdate", task_id="{int:tid}",
                                                    status="completed")]}})
    server.add_rule({"agent": "alice", "reply": {"content": "Waiting."}})
    actions.create_team(ws, TEAM)
    task = board.create(ws, TEAM, "Port the login page")  # claimable all along
    actions.spawn(ws, TEAM, "alice", "PLAN-PROMPT build it", cwd=str(workdir), plan_mode=True)
    with running_teamd(ws, server.url):
        plan = wait_until(lambda: plan_requests(ws), T, "the plan request")[0]
        lead_got(ws, lambda m: m["type"] == "idle_notification", "alice idle with the plan")
        wait_status(ws, "alice", "idle")
        ctl(ws, "approve", TEAM, plan["request_id"])
        wait_until(lambda: board.get(ws, TEAM, task["id"])["status"] == "completed", T,
                   "the task to be done after the approval")
    answered = requests.get(ws, TEAM, plan["request_id"])["resolved_at"]
    assert board.get(ws, TEAM, task["id"])["claimed_at"] > answered


# -- 6. kill -9 during a model call ------------------------------------------------------
def inbox_ids_in_session(ws: Workspace, name: str) -> list[str]:
    return [m["id"] for r in files.read_jsonl(ws.store.paths.session(TEAM, name)).records
            if r["type"] == "inbox" for m in r["messages"]]


def kill_and_wait_restart(ws: Workspace, name: str, pid: int) -> int:
    os.kill(pid, signal.SIGKILL)

    def restarted() -> int:
        new = live_pid(ws, TEAM, name)
        return new if new is not None and new != pid else 0

    return wait_until(restarted, T, f"{name} to be restarted")


def test_kill_during_model_call_resumes_without_repeats(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    server.add_rule({"agent": "alice", "contains": "SLOW-A-41d7", "times": 1, "delay": 3.0,
                     "reply": {"content": "never delivered"}})
    server.add_rule({"agent": "alice", "contains": "DURING-B-41d7",
                     "reply": send_to_lead("RESUMED-41d7")})
    make_team(ws, workdir, "alice")
    with running_teamd(ws, server.url, backoff_initial=0.1):
        wait_status(ws, "alice", "idle")
        pid = live_pid(ws, TEAM, "alice")
        assert pid is not None
        a = actions.send(ws, TEAM, "alice", "SLOW-A-41d7 think hard")
        server.wait_for(asked("SLOW-A-41d7", "alice"), T)  # the call is in flight
        b = actions.send(ws, TEAM, "alice", "DURING-B-41d7 and this too")
        kill_and_wait_restart(ws, "alice", pid)
        lead_got(ws, lambda m: m["content"] == "RESUMED-41d7", "the reply after the restart")
        wait_status(ws, "alice", "idle")
        resumed = server.wait_for(asked("DURING-B-41d7", "alice"), 1)
        assert "SLOW-A-41d7" in turn_text(last_user(resumed))  # the same turn, re-sent
        m = member(ws, TEAM, "alice")
        assert m["restarts"] == 1 and m["last_exit"]["signal"] == signal.SIGKILL
    assert len(shown_at(server, "alice", "SLOW-A-41d7")) == 1
    assert len(shown_at(server, "alice", "DURING-B-41d7")) == 1
    ids = inbox_ids_in_session(ws, "alice")
    assert ids.count(a["id"]) == 1 and ids.count(b["id"]) == 1


# -- 7. kill -9 during a bash call -------------------------------------------------------
def test_kill_during_bash_does_not_rerun_it(ws: Workspace, server: ScriptedServer,
                                            workdir: Path) -> None:
    marker = "marker-3e9b.txt"
    server.add_rule({"agent": "alice", "contains": "RUN-C-3e9b", "times": 1, "reply": {
        "content": [tool_use("bash", command=f"sleep 30; echo done > {marker}")]}})
    server.add_rule({"agent": "alice", "contains": "interrupted by a restart; not re-run",
                     "reply": send_to_lead("AFTER-RESTART-3e9b")})
    make_team(ws, workdir, "alice")
    with running_teamd(ws, server.url, backoff_initial=0.1):
        wait_status(ws, "alice", "idle")
        pid = live_pid(ws, TEAM, "alice")
        assert pid is not None
        c = actions.send(ws, TEAM, "alice", "RUN-C-3e9b run the job")
        shells = wait_until(lambda: procs_with(marker), T, "the bash command to run")
        sleeper = wait_until(lambda: [k for s in shells for k in s.children()], T, "sleep")
        d = actions.send(ws, TEAM, "alice", "DURING-D-3e9b news while you work")
        kill_and_wait_restart(ws, "alice", pid)
        seen = server.wait_for(asked("interrupted by a restart; not re-run", "alice"), T)
        results = [b for b in last_user(seen)["content"] if b.get("type") == "tool_result"]
        assert len(results) == 1 and results[0]["is_error"] is True
        assert "DURING-D-3e9b" in turn_text(last_user(seen))
        lead_got(ws, lambda m: m["content"] == "AFTER-RESTART-3e9b", "the reply")
        wait_until(lambda: all(gone(p) for p in [*shells, *sleeper]), T,
                   "the interrupted command and its sleep to be gone")
        wait_status(ws, "alice", "idle")
        assert not procs_with(marker)  # not started again
        assert not (workdir / marker).exists()
    bash_calls = [r for r in server.requests if r["reply"] and any(
        b.get("name") == "bash" for b in r["reply"])]
    assert len(bash_calls) == 1
    for text in ("RUN-C-3e9b", "DURING-D-3e9b"):
        assert len(shown_at(server, "alice", text)) == 1
    ids = inbox_ids_in_session(ws, "alice")
    assert ids.count(c["id"]) == 1 and ids.count(d["id"]) == 1


# -- 8. compaction keeps identity --------------------------------------------------------
def test_compaction_keeps_identity(ws: Workspace, server: ScriptedServer,
                                   workdir: Path) -> None:
    # 100 uncached + 30000 read + 30000 written: over the threshold only when all three
    # count (CONTRACT §6), though input_tokens alone is far below it
    big = {"input_tokens": 100, "cache_read_input_tokens": 30000,
           "cache_creation_input_tokens": 30000}
    server.add_rule({"agent": "alice", "contains": "BIG-CTX-aa01",
                     "reply": {"content": "Noted.", "usage": big}})
    server.add_rule({"agent": "alice", "contains": "Your context is nearly full",
                     "reply": {"content": "SUMMARY-aa01: the lead asked for big things."}})
    server.add_rule({"agent": "alice", "contains": "AFTER-aa01",
                     "reply": send_to_lead("POST-COMPACT-aa01")})
    make_team(ws, workdir, "alice")
    with running_teamd(ws, server.url, compact_threshold=50000):
        wait_status(ws, "alice", "idle")
        actions.send(ws, TEAM, "alice", "BIG-CTX-aa01 remember this")
        server.wait_for(asked("BIG-CTX-aa01", "alice"), T)
        wait_status(ws, "alice", "idle")
        start = len(server.requests)
        actions.send(ws, TEAM, "alice", "AFTER-aa01 what next?")
        lead_got(ws, lambda m: m["content"] == "POST-COMPACT-aa01", "the post-compaction reply")
    calls = [r for r in server.requests[start:] if r["agent"] == "alice"]
    summary_ask, after = calls[0], calls[1]
    assert "Your context is nearly full" in turn_text(last_user(summary_ask))
    assert "AFTER-aa01" not in json.dumps(summary_ask["body"]["messages"])  # carried over
    assert summary_ask["body"].get("tool_choice") == {"type": "none"}
    head = turn_text(after["body"]["messages"][0])
    assert after["body"]["messages"][0]["role"] == "user"
    assert head.startswith(f"You are teammate 'alice' in team '{TEAM}'.")
    assert "SUMMARY-aa01: the lead asked for big things." in head
    assert "AFTER-aa01 what next?" in head  # the message that woke it, verbatim
    assert "BIG-CTX-aa01" not in json.dumps(after["body"]["messages"])
    assert len(shown_at(server, "alice", "AFTER-aa01")) == 1
    compacted = events_of(ws, "alice", "compacted")
    assert len(compacted) == 1 and compacted[0]["before_tokens"] == 60100
    transcript = ws.root / compacted[0]["transcript"]
    assert transcript.parent == ws.store.paths.transcripts_dir(TEAM) and transcript.is_file()
    assert "BIG-CTX-aa01" in transcript.read_text()


# -- 9. API faults: tests/e2e/test_api_retries.py -----------------------------------------


# -- 10. file tools stay inside the working directory ------------------------------------
def test_file_tools_refuse_escapes(ws: Workspace, server: ScriptedServer, workdir: Path,
                                   tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOPSECRET-77")
    (workdir / "link").symlink_to(outside)
    server.add_rule({"agent": "alice", "contains": "ESCAPE-77", "reply": {"content": [
        tool_use("write_file", path="../outside/evil.txt", content="x"),
        tool_use("write_file", path="link/evil2.txt", content="x"),
        tool_use("edit_file", path="link/secret.txt", old_text="TOPSECRET-77", new_text="y"),
        tool_use("read_file", path="link/secret.txt")]}})
    server.add_rule({"agent": "alice", "tool_result": "read_file",
                     "reply": {"content": "Refused, as expected."}})
    make_team(ws, workdir, "alice")
    with running_teamd(ws, server.url):
        wait_status(ws, "alice", "idle")
        actions.send(ws, TEAM, "alice", "ESCAPE-77 try to get out")
        seen = server.wait_for(lambda r: r["agent"] == "alice" and any(
            b.get("type") == "tool_result" for b in last_user(r)["content"]), T)
        wait_status(ws, "alice", "idle")
        assert live_pid(ws, TEAM, "alice") is not None  # a refusal never ends the process
    results = [b for b in last_user(seen)["content"] if b.get("type") == "tool_result"]
    assert len(results) == 4
    for result in results:
        assert result["is_error"] is True
        assert "outside the working directory" in result["content"]
    assert "TOPSECRET-77" not in json.dumps(last_user(seen))
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "TOPSECRET-77"
