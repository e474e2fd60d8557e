"""teamd hands out work, end to end (CONTRACT §5 "Assignment", issue 10): a real `teamd run`,
teammates forked by it on the real `anthropic` SDK, the scripted model server.

Each task goes to exactly one teammate; the one idle longest gets the next; a sleeper is
forked only when no teammate is idle, one per task; a task given an owner reaches that owner
once unblocked, asleep or not; the lead, and a member whose plan is pending, get nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from teamd import actions, board, requests
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import journal, make_team, member, running_teamd, wait_until

TEAM = "crew"
T = 20.0
CLAIMED = r"<auto-claimed>Task #(?P<tid>\d+)"


def finish_rule(**extra: Any) -> dict[str, Any]:
    """The model completes the task it was handed."""
    return {"name": "finish", "regex": CLAIMED, **extra, "reply": {"content": [
        {"type": "tool_use", "name": "TaskUpdate",
         "input": {"task_id": "{int:tid}", "status": "completed"}}]}}


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer({"rules": [finish_rule()],
                         "default": {"content": [{"type": "text", "text": "Done."}]}}) as srv:
        yield srv


def status(ws: Workspace, name: str) -> str:
    return str(member(ws, TEAM, name)["status"])


def wait_all(ws: Workspace, names: list[str], want: str) -> None:
    wait_until(lambda: all(status(ws, n) == want for n in names), T,
               f"{', '.join(names)} to be {want}")


def assigned(ws: Workspace) -> list[tuple[int, str]]:
    """(task, recipient) of every task_assigned teamd sent, in order."""
    return [(r["message"]["task_id"], r["message"]["recipient"]) for r in journal(ws, TEAM)
            if r["event"] == "message" and r["message"]["type"] == "task_assigned"]


def shown(server: ScriptedServer, task_id: int) -> list[str]:
    """The agents whose new input carried the task's <auto-claimed> turn, once per showing."""
    return [r["agent"] for r in server.requests
            if f"<auto-claimed>Task #{task_id}:" in r["last_user_text"]]


def spawned_since(ws: Workspace, name: str, since: int) -> int:
    return sum(1 for r in journal(ws, TEAM)[since:] if r["event"] == "spawned"
               and r.get("member") == name)


def went_idle(ws: Workspace, name: str) -> int:
    """How many times the member's status became `idle` (the journal's status events)."""
    return sum(1 for r in journal(ws, TEAM) if r["event"] == "status"
               and r.get("member") == name and r.get("to") == "idle")


def done(ws: Workspace, *ids: int) -> bool:
    return all(board.get(ws, TEAM, i)["status"] == "completed" for i in ids)


def test_each_task_goes_to_exactly_one_teammate(ws: Workspace, server: ScriptedServer,
                                                workdir: Path) -> None:
    names = ["alice", "bob", "carol"]
    make_team(ws, workdir, *names, prompt="Wait for work.")
    with running_teamd(ws, server.url):
        wait_all(ws, names, "idle")
        for i in range(8):
            board.create(ws, TEAM, f"chore {i}")
        wait_until(lambda: done(ws, *range(1, 9)), T, "every chore done")
        wait_all(ws, names, "idle")
    events = journal(ws, TEAM)
    for tid in range(1, 9):
        claims = [r for r in events if r["event"] == "task_claimed" and r["task_id"] == tid]
        assert len(claims) == 1, tid
        owner = board.get(ws, TEAM, tid)["owner"]
        assert [name for t, name in assigned(ws) if t == tid] == [owner]
        assert shown(server, tid) == [owner], tid  # handed to the model once, by its owner
    # no teammate scanned the board: every claim was teamd's, made for the member
    assert {r["member"] for r in events if r["event"] == "task_claimed"} <= set(names)
    assert len({board.get(ws, TEAM, t)["owner"] for t in range(1, 9)}) > 1  # shared out


def test_a_new_task_goes_to_the_teammate_idle_longest(ws: Workspace, server: ScriptedServer,
                                                      workdir: Path) -> None:
    names = ["alice", "bob", "carol"]
    make_team(ws, workdir, *names, prompt="Wait for work.")
    with running_teamd(ws, server.url):
        wait_all(ws, names, "idle")
        # alice and carol work a little and settle again, in that order: bob, the second to
        # join, has now been idle longest, then alice, then carol
        for name in ("alice", "carol"):
            settled = went_idle(ws, name)
            actions.send(ws, TEAM, name, f"ping {name}")
            wait_until(lambda n=name, k=settled: went_idle(ws, n) > k, T, f"{name} idle again")
        board.create(ws, TEAM, "the first job")
        wait_until(lambda: done(ws, 1), T, "the first job done")
        assert assigned(ws) == [(1, "bob")]
        wait_all(ws, names, "idle")
        board.create(ws, TEAM, "the second job")  # bob was just busy: alice now
        wait_until(lambda: done(ws, 2), T, "the second job done")
    assert assigned(ws) == [(1, "bob"), (2, "alice")]


def test_a_sleeper_is_woken_only_when_no_teammate_is_idle(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    server.add_rule(finish_rule(agent="alice", contains="slow job", delay=3.0), first=True)
    names = ["alice", "bob", "carol"]
    make_team(ws, workdir, *names, prompt="Wait for work.")
    with running_teamd(ws, server.url, idle_timeout=1):
        wait_all(ws, names, "sleeping")
    with running_teamd(ws, server.url, idle_timeout=60):
        actions.send(ws, TEAM, "alice", "stay up")  # alice awake and idle; bob, carol asleep
        wait_until(lambda: status(ws, "alice") == "idle" and any(
            "stay up" in r["last_user_text"] for r in server.requests), T, "alice idle")
        mark = len(journal(ws, TEAM))
        board.create(ws, TEAM, "slow job")
        wait_until(lambda: board.get(ws, TEAM, 1)["status"] == "in_progress", T, "a claim")
        assert board.get(ws, TEAM, 1)["owner"] == "alice"  # the idle one, no sleeper
        assert spawned_since(ws, "bob", mark) + spawned_since(ws, "carol", mark) == 0
        # alice is busy for a while: no teammate is idle, so one sleeper is woken for it
        board.create(ws, TEAM, "quick job")
        wait_until(lambda: done(ws, 1, 2), T, "both jobs done")
        woken = [n for n in ("bob", "carol") if spawned_since(ws, n, mark)]
        assert woken == [board.get(ws, TEAM, 2)["owner"]], woken
        assert spawned_since(ws, woken[0], mark) == 1
        other = ({"bob", "carol"} - set(woken)).pop()
        assert status(ws, other) == "sleeping"
    assert assigned(ws) == [(1, "alice"), (2, woken[0])]


@pytest.mark.parametrize("asleep", [False, True], ids=["idle-owner", "sleeping-owner"])
def test_a_task_given_an_owner_reaches_it_once_unblocked(
        ws: Workspace, server: ScriptedServer, workdir: Path, asleep: bool) -> None:
    server.add_rule(finish_rule(agent="alice", delay=1.0), first=True)
    names = ["alice", "bob"]
    make_team(ws, workdir, *names, prompt="Wait for work.")
    with running_teamd(ws, server.url, idle_timeout=1 if asleep else 60):
        wait_all(ws, names, "sleeping" if asleep else "idle")
        mark = len(journal(ws, TEAM))
        board.create(ws, TEAM, "for alice", owner="alice")
        board.create(ws, TEAM, "for bob, after alice's", blocked_by=[1], owner="bob")
        wait_until(lambda: done(ws, 1, 2), T, "both tasks done")
    events = journal(ws, TEAM)
    completed_1 = next(r["ts"] for r in events if r["event"] == "task_completed"
                       and r["task_id"] == 1)
    claimed_2 = next(r for r in events if r["event"] == "task_claimed" and r["task_id"] == 2)
    assert claimed_2["member"] == "bob" and claimed_2["ts"] > completed_1
    assert assigned(ws) == [(1, "alice"), (2, "bob")]
    assert shown(server, 2) == ["bob"]
    if asleep:  # bob slept until his task was free, then was forked for it, once
        assert spawned_since(ws, "bob", mark) == 1
        woke = next(r["ts"] for r in events[mark:] if r["event"] == "spawned"
                    and r["member"] == "bob")
        assert woke > completed_1


def test_the_lead_is_never_assigned_work(ws: Workspace, server: ScriptedServer,
                                         workdir: Path) -> None:
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "lead", "Lead the team.", lead=True, cwd=str(workdir))
    with running_teamd(ws, server.url):
        wait_all(ws, ["lead"], "idle")
        board.create(ws, TEAM, "for anyone")
        board.create(ws, TEAM, "the lead's own", owner="lead")
        # the lead answers a message: teamd has reconciled with both tasks on the board
        before = len(server.requests)
        actions.send(ws, TEAM, "lead", "status?", sender="user")
        server.wait_for(lambda r: "status?" in r["last_user_text"], T, since=before)
        wait_all(ws, ["lead"], "idle")
        assert board.get(ws, TEAM, 1)["owner"] is None
        actions.spawn(ws, TEAM, "worker", "Wait for work.", cwd=str(workdir))
        wait_until(lambda: done(ws, 1), T, "the worker to do task 1")
        wait_all(ws, ["worker"], "idle")
    assert assigned(ws) == [(1, "worker")]
    assert board.get(ws, TEAM, 2)["status"] == "pending"
    assert shown(server, 1) == ["worker"]


def test_a_member_whose_plan_is_pending_gets_nothing(ws: Workspace, server: ScriptedServer,
                                                     workdir: Path) -> None:
    server.add_rule({"agent": "planner", "contains": "PLAN-FIRST", "reply": {"content": [
        {"type": "tool_use", "name": "SubmitPlan", "input": {"plan": "PLAN: do it"}}]}},
        first=True)
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "planner", "PLAN-FIRST", cwd=str(workdir), plan_mode=True)
    with running_teamd(ws, server.url):
        plan = wait_until(lambda: requests.list_requests(ws, TEAM), T, "the plan")[0]
        wait_all(ws, ["planner"], "idle")
        # idle longest, but its plan is pending: the task waits for the newcomer, and its
        # own task waits for the approval
        actions.spawn(ws, TEAM, "other", "Wait for work.", cwd=str(workdir))
        wait_all(ws, ["other"], "idle")
        board.create(ws, TEAM, "the planner's own", owner="planner")
        board.create(ws, TEAM, "for anyone")
        wait_until(lambda: done(ws, 2), T, "task 2 done")
        wait_all(ws, ["other"], "idle")
        assert assigned(ws) == [(2, "other")]
        assert board.get(ws, TEAM, 1)["status"] == "pending"
        actions.answer_request(ws, TEAM, plan["request_id"], True, only="plan_approval")
        wait_until(lambda: done(ws, 1), T, "the planner's task done after the approval")
    assert assigned(ws) == [(2, "other"), (1, "planner")]
    assert shown(server, 1) == ["planner"]
    approved = requests.get(ws, TEAM, plan["request_id"])["resolved_at"]
    assert board.get(ws, TEAM, 1)["claimed_at"] > approved
