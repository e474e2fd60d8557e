"""The two races the last review left open (CONTRACT.md §4, "Who writes what").

#5: a member approving its shutdown writes `desired=stopped` and `status=stopping`, answers
the record and appends the answer in one roster-locked step, the roster first: no crash
leaves the asker told "approved" while the roster still wants the member running.
#10: the supervisor's `mark()` re-checks `desired` under the roster lock, so a reconcile
working from a snapshot taken before a `restart` cannot mark the member `shutdown`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from teamd import actions, assign, board, events, inbox, requests, roster
from teamd.errors import BadInput
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from teamd.supervisor import Supervisor
from tests.harness import live_pid, make_team, member, read_log, running_teamd, wait_until

TEAM = "crew"
T = 20.0


@pytest.fixture
def script() -> dict[str, Any]:
    return {"rules": [], "default": {"content": [{"type": "text", "text": "Waiting."}]}}


@pytest.fixture
def team(ws: Workspace) -> Workspace:
    make_team(ws, None, "alice", team=TEAM, prompt="work")
    return ws


# -- shutdown approval: one roster-locked step ---------------------------------------------
def test_approving_a_shutdown_writes_roster_record_and_answer_together(team: Workspace) -> None:
    actions.spawn(team, TEAM, "lead", "lead the team", lead=True)

    def as_if_running(config: dict[str, Any]) -> None:
        # alice's process is this one, as far as the roster knows (no fork needed)
        roster.get(config, "alice").update(pid=os.getpid(), status="idle")

    roster.update(team, TEAM, as_if_running)
    record = requests.open_request(team, TEAM, "shutdown", "user", "alice", reason="done")
    rid = record["request_id"]
    msg = actions.approve_shutdown(team, TEAM, "alice", rid, reason="idle", pid=os.getpid())
    alice = member(team, TEAM, "alice")
    assert (alice["desired"], alice["status"]) == ("stopped", "stopping")
    assert requests.get(team, TEAM, rid)["status"] == "approved"
    # the answer went back to whoever asked: the person, not the lead
    assert inbox.peek(team, TEAM, "user") == [msg]
    assert (msg["type"], msg["sender"], msg["approve"], msg["request_id"]) == \
        ("shutdown_response", "alice", True, rid)
    assert inbox.peek(team, TEAM, "lead") == []

    # a second approval is refused and changes nothing
    roster.update(team, TEAM, lambda c: roster.get(c, "alice").update(desired="running",
                                                                       status="idle"))
    before = team.store.paths.config(TEAM).read_bytes()
    with pytest.raises(BadInput, match="already approved"):
        actions.approve_shutdown(team, TEAM, "alice", rid, reason="again", pid=os.getpid())
    assert team.store.paths.config(TEAM).read_bytes() == before
    assert len(inbox.peek(team, TEAM, "user")) == 1


def test_an_approval_that_cannot_be_delivered_still_stops_the_member(
        ws: Workspace, tmp_path: Path, server: ScriptedServer) -> None:
    """Review #5: desired=stopped lands before the answer is appended. The append to the
    asker's inbox fails here (the inbox is a folder), the process dies of it, and teamd,
    finding desired=stopped, marks it shut down instead of restarting it."""
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "worker", "Work.", cwd=str(tmp_path))
    with running_teamd(ws, server.url, idle_timeout=60, backoff_initial=0.1):
        wait_until(lambda: member(ws, TEAM, "worker")["status"] == "idle", T, "worker idle")
        wait_until(lambda: inbox.peek(ws, TEAM, "lead"), T, "its idle notification")
        pid = live_pid(ws, TEAM, "worker")
        lead_inbox = ws.store.paths.inbox(TEAM, "lead")
        lead_inbox.unlink()
        lead_inbox.mkdir()  # any append to it now fails
        rid = actions.shutdown(ws, TEAM, "worker")["request"]["request_id"]
        wait_until(lambda: member(ws, TEAM, "worker")["status"] == "shutdown", T,
                   "the worker to be shut down")
        worker = member(ws, TEAM, "worker")
        assert worker["desired"] == "stopped" and worker["restarts"] == 0
        assert worker["last_exit"] is not None and worker["pid"] == pid
        assert requests.get(ws, TEAM, rid)["status"] == "approved"
        # the fault did happen: the answer never reached any inbox
        assert lead_inbox.is_dir()
        assert "lead_inbox.jsonl" in read_log(ws, TEAM, "worker")
    assert live_pid(ws, TEAM, "worker") is None


def test_mark_leaves_a_restarted_member_alone(team: Workspace) -> None:
    """A reconcile read alice and bob as stopped with no process; `restart` then wanted
    alice running again before the reconcile got to mark them. The stale `shutdown` must
    not land on alice (nor release her task); on bob, still stopped, it does."""
    actions.spawn(team, TEAM, "bob", "work")
    for name in ("alice", "bob"):
        board.claim(team, TEAM, name, board.create(team, TEAM, f"{name}'s task")["id"])

    def stopped(config: dict[str, Any]) -> None:  # e.g. approved a shutdown, then exited
        for m in config["members"]:
            m.update(desired="stopped", status="stopping")

    roster.update(team, TEAM, stopped)
    snapshot = roster.load(team, TEAM)  # what the reconcile saw …
    actions.restart(team, TEAM, "alice")  # … before this restart landed
    assert [m["desired"] for m in snapshot["members"]] == ["stopped", "stopped"]
    assert member(team, TEAM, "alice")["desired"] == "running"

    supervisor = Supervisor(team)
    for m in snapshot["members"]:  # what reconcile_team does with its snapshot
        if m["desired"] != "running" and m["status"] != "shutdown":
            supervisor.mark(TEAM, m["name"], "shutdown")
    alice, bob = member(team, TEAM, "alice"), member(team, TEAM, "bob")
    assert (alice["desired"], alice["status"]) == ("running", "stopping")
    assert board.get(team, TEAM, 1)["owner"] == "alice"
    assert (bob["desired"], bob["status"]) == ("stopped", "shutdown")
    assert board.get(team, TEAM, 2)["owner"] is None  # released: bob left for good
    assert [r.get("member") for r in events.read(team, TEAM)
            if r["event"] == "status" and r.get("to") == "shutdown"] == ["bob"]


def test_a_plan_answer_not_yet_read_still_holds_tasks_back(team: Workspace) -> None:
    """teamd hands a plan-mode member no task while its plan is pending (§6), nor while its
    latest plan was rejected: the lead records its answer before appending the message,
    and a task sent in between would reach the model in the same turn as a rejection it
    has not read yet. Only a plan approved since it joined lets tasks through."""
    actions.spawn(team, TEAM, "planner", "plan first", plan_mode=True)

    def held_back() -> bool:
        return assign.plan_pending(team, TEAM, roster.get(roster.load(team, TEAM), "planner"))

    assert not held_back()
    plan = actions.send(team, TEAM, "lead", "my plan", type_="plan_approval_request",
                        sender="planner")
    assert held_back()
    # the state between the lead's two writes: the record answered, no message yet
    requests.answer(team, TEAM, plan["request_id"], False, feedback="add tests")
    assert held_back()
    answer = inbox.make("plan_approval_response", "lead", "planner", "add tests",
                        request_id=plan["request_id"], approve=False, feedback="add tests")
    inbox.deliver(team, TEAM, [answer])
    assert held_back()  # landed, and the plan still to revise
    again = actions.send(team, TEAM, "lead", "my plan, with tests",
                         type_="plan_approval_request", sender="planner")
    assert held_back()
    requests.answer(team, TEAM, again["request_id"], True)
    assert not held_back()
