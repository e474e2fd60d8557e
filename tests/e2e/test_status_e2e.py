"""The truth behind `teamctl status`, end to end (issue 8): a real `teamd run`, teammates on
the real `anthropic` SDK against the scripted server, and `teamctl` as a real process.

After a claim, a release, a failure, a backoff and a plan submission, `status --json` and
the table show the right task, last error and plan marker; a member with a plan pending
claims nothing and submits no second plan; the lead hears "idle" only when the member has
nothing to claim; a message to a shut-down member waits with a note, and after `restart`
the member is not shown its old, answered shutdown request again.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

from teamd import actions, board, inbox, requests, roster
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import (
    TEAM,
    cells,
    journal,
    live_pid,
    member,
    running_teamd,
    tool_use,
    wait_status,
    wait_until,
)
from tests.helpers_proc import ctl, teamctl

T = 20.0


def status_of(ws: Workspace, name: str) -> dict[str, Any]:
    doc = json.loads(ctl(ws, "status", TEAM, "--json"))
    return next(m for m in doc["teams"][0]["members"] if m["name"] == name)


def row_of(ws: Workspace, name: str) -> dict[str, str]:
    return cells(ctl(ws, "status", TEAM), name)


def user_text(record: dict[str, Any]) -> str:
    return json.dumps(record["body"]["messages"][-1])


def idle_notices(ws: Workspace, name: str) -> list[dict[str, Any]]:
    return [e for e in journal(ws, TEAM) if e["event"] == "message"
            and e["message"]["type"] == "idle_notification" and e["member"] == name]


# -- a claim, then a release -------------------------------------------------------------
def test_status_after_a_claim_and_a_release(ws: Workspace, server: ScriptedServer,
                                            workdir: Path) -> None:
    # the model holds its answer: alice is at work on task 1 while we look
    server.add_rule({"agent": "alice", "contains": "<auto-claimed>Task #1", "delay": 60,
                     "reply": {"content": "never delivered"}})
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "alice", "Wait for work.", cwd=str(workdir))
    with running_teamd(ws, server.url):
        wait_status(ws, "alice", "idle")
        board.create(ws, TEAM, "design the schema")
        server.wait_for(lambda r: "<auto-claimed>Task #1" in user_text(r), T)
        wait_until(lambda: member(ws, TEAM, "alice")["current_task"] == 1, T,
                   "alice's roster entry to name task 1")
        seen = status_of(ws, "alice")
        assert (seen["current_task"], seen["status"], seen["live"]) == (1, "active", True)
        assert seen["uptime"] is not None and seen["pss"] and seen["pss"] < seen["rss"]
        row = row_of(ws, "alice")
        assert (row["TASK"], row["STATUS"]) == ("#1", "active")
        ctl(ws, "stop", TEAM, "alice", "--force")  # leaves for good: task 1 is released
        wait_status(ws, "alice", "shutdown")
        wait_until(lambda: board.get(ws, TEAM, 1)["owner"] is None, T, "task 1 released")
        wait_until(lambda: member(ws, TEAM, "alice")["current_task"] is None, T,
                   "the roster to drop task 1")
        seen = status_of(ws, "alice")
        assert (seen["current_task"], seen["status"], seen["live"]) == (None, "shutdown", False)
        assert row_of(ws, "alice")["TASK"] == "-"


# -- a failure, a backoff ----------------------------------------------------------------
def test_status_shows_why_a_member_failed(ws: Workspace, server: ScriptedServer,
                                          workdir: Path) -> None:
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "bob", "Wait for work.", cwd=str(workdir))
    with running_teamd(ws, server.url, restart_limit=0):  # the first crash is one too many
        wait_status(ws, "bob", "idle")
        pid = live_pid(ws, TEAM, "bob")
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        wait_status(ws, "bob", "failed")
        seen = status_of(ws, "bob")
        assert seen["last_error"] == "killed by SIGKILL; 1 restarts within 60s"
        assert row_of(ws, "bob")["LAST ERROR"] == seen["last_error"]
        assert row_of(ws, "bob")["STATUS"] == "failed"
        told = [m for m in inbox.peek(ws, TEAM, "lead") if m["type"] == "member_failed"]
        assert told and told[0]["reason"] == seen["last_error"]  # the same words
        ctl(ws, "inbox", TEAM)  # the lead reads (and so empties) its inbox …
        assert status_of(ws, "bob")["last_error"] == seen["last_error"]  # … status still says


def test_status_shows_why_a_member_is_in_backoff_until_it_runs_again(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "bob", "Wait for work.", cwd=str(workdir))
    with running_teamd(ws, server.url, backoff_initial=60):
        wait_status(ws, "bob", "idle")
        pid = live_pid(ws, TEAM, "bob")
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        wait_status(ws, "bob", "backoff")
        seen = status_of(ws, "bob")
        assert seen["last_error"] == "killed by SIGKILL; restart 1 in 60 s"
        assert row_of(ws, "bob")["LAST ERROR"] == seen["last_error"]
        ctl(ws, "restart", TEAM, "bob")
        wait_until(lambda: live_pid(ws, TEAM, "bob") not in (None, pid), T, "bob to run")
        wait_until(lambda: member(ws, TEAM, "bob")["last_error"] is None, T,
                   "bob's old trouble to clear once it runs")
        assert status_of(ws, "bob")["status"] == "idle"


# -- plan mode: a pending plan blocks claims and second plans ----------------------------
def test_plan_pending_member_claims_nothing_and_submits_once(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    server.add_rule({"agent": "carol", "contains": "PLAN-PROMPT", "times": 1,
                     "reply": {"content": [tool_use("SubmitPlan", plan="PLAN-A")]}})
    server.add_rule({"agent": "carol", "tool_result": "SubmitPlan", "contains": "submitted",
                     "reply": {"content": [tool_use("SubmitPlan", plan="PLAN-B")]}})
    server.add_rule({"agent": "carol", "tool_result": "SubmitPlan",
                     "reply": {"content": "WAITING-FOR-LEAD"}})
    server.add_rule({"agent": "carol", "contains": "PING-c4",
                     "reply": {"content": "PONG-c4 still waiting"}})
    server.add_rule({"agent": "carol", "contains": "<auto-claimed>Task #1",
                     "reply": {"content": "CLAIMED-c4"}})
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "carol", "PLAN-PROMPT build it", cwd=str(workdir), plan_mode=True)
    with running_teamd(ws, server.url):
        refused = server.wait_for(lambda r: r["agent"] == "carol" and any(
            b.get("type") == "tool_result" and b.get("is_error")
            for b in r["body"]["messages"][-1]["content"]), T)
        assert f"your plan {requests.list_requests(ws, TEAM)[0]['request_id']} is still " \
            "waiting for the lead" in user_text(refused)
        wait_until(lambda: idle_notices(ws, "carol"), T, "carol to go idle")
        plans = requests.list_requests(ws, TEAM)
        assert [(r["kind"], r["plan"], r["status"]) for r in plans] == [
            ("plan_approval", "PLAN-A", "pending")]
        rid = plans[0]["request_id"]
        seen = status_of(ws, "carol")
        assert seen["plan_gate"] == "closed"
        assert [r["request_id"] for r in seen["pending_requests"]] == [rid]
        assert row_of(ws, "carol")["NOTES"] == f"plan gate closed, plan pending {rid}"
        # a claimable task, then a message: by the time carol is idle again after answering
        # it, she has looked at the board with the task on it, and left it alone
        board.create(ws, TEAM, "design the schema")
        actions.send(ws, TEAM, "carol", "PING-c4 anything?")
        wait_until(lambda: len(idle_notices(ws, "carol")) >= 2, T, "carol idle after PING")
        one = board.get(ws, TEAM, 1)
        assert (one["status"], one["owner"]) == ("pending", None)
        assert not [e for e in journal(ws, TEAM) if e["event"] == "task_claimed"]
        ctl(ws, "approve", TEAM, rid)
        server.wait_for(lambda r: "<auto-claimed>Task #1" in user_text(r), T)
        assert board.get(ws, TEAM, 1)["owner"] == "carol"
        seen = status_of(ws, "carol")
        assert (seen["plan_gate"], seen["pending_requests"], seen["current_task"]) == (
            "open", [], 1)
        assert row_of(ws, "carol")["NOTES"] == ""
    plans = [m for m in inbox.peek(ws, TEAM, "lead") if m["type"] == "plan_approval_request"]
    assert [m["plan"] for m in plans] == ["PLAN-A"]


# -- idle is said when there is nothing to claim -----------------------------------------
def test_lead_hears_idle_only_when_nothing_is_claimable(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    for n in (1, 2):
        server.add_rule({"agent": "alice", "contains": f"<auto-claimed>Task #{n}",
                         "reply": {"content": [tool_use("TaskUpdate", task_id=n,
                                                        status="completed")]}})
    server.add_rule({"agent": "alice", "tool_result": "TaskUpdate",
                     "reply": {"content": "DONE-a1"}})
    actions.create_team(ws, TEAM)
    board.create(ws, TEAM, "lay the foundation")
    board.create(ws, TEAM, "build the walls", blocked_by=[1])
    actions.spawn(ws, TEAM, "alice", "Work the board.", cwd=str(workdir))
    with running_teamd(ws, server.url):
        wait_until(lambda: board.get(ws, TEAM, 2)["status"] == "completed", T, "task 2 done")
        wait_until(lambda: idle_notices(ws, "alice"), T, "alice's idle notice")
        wait_status(ws, "alice", "idle")
    events = journal(ws, TEAM)
    notices = idle_notices(ws, "alice")
    # one notice, after her last task: none as she went from one task to the next
    assert len(notices) == 1
    last_done = max(i for i, e in enumerate(events) if e["event"] == "task_completed")
    assert events.index(notices[0]) > last_done
    assert notices[0]["message"]["summary"] == "DONE-a1"


# -- a message to a stopped member; its old shutdown request after a restart -------------
def test_send_to_shutdown_member_warns_and_restart_does_not_reshow_the_request(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    server.add_rule({"agent": "alice", "contains": "AFTER-RESTART-e5",
                     "reply": {"content": "GOT-IT-e5"}})
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "alice", "Wait for work.", cwd=str(workdir))
    with running_teamd(ws, server.url):
        wait_status(ws, "alice", "idle")
        ctl(ws, "shutdown", TEAM, "alice", "--wait", "--timeout", str(T))
        [ask] = [r for r in requests.list_requests(ws, TEAM) if r["kind"] == "shutdown"]
        assert ask["status"] == "approved" and member(ws, TEAM, "alice")["status"] == "shutdown"
        done = teamctl(ws.root, "send", TEAM, "alice", "AFTER-RESTART-e5 hello again")
        assert done.returncode == 0
        assert done.stderr.decode().splitlines() == [
            f"note: alice is shutdown: the message waits in its inbox until it is started "
            f"again (`teamctl restart {TEAM} alice`)"]
        calls = len(server.requests)
        ctl(ws, "restart", TEAM, "alice")
        seen = server.wait_for(lambda r: "AFTER-RESTART-e5" in user_text(r), T)
        wait_status(ws, "alice", "idle")
        assert ask["request_id"] not in user_text(seen)
        after = [r for r in server.requests[calls:] if r["agent"] == "alice"]
        assert after and not any("shutdown_request" in json.dumps(r["body"]["messages"])
                                 for r in after)
        assert roster.get(roster.load(ws, TEAM), "alice")["desired"] == "running"
