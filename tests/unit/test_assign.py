"""Assignment rules on their own (CONTRACT §5 "Assignment"): the board index teamd keeps
and the (task, member) pairs it chooses, as pure functions of the members and the board.
End to end (real teamd, real members): tests/e2e/test_assign_e2e.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from teamd import actions, board, files
from teamd.agent.session import Session
from teamd.assign import TAKEN_GRACE, Assigner, BoardIndex
from teamd.layout import Workspace
from teamd.store.files.paths import Paths


def m(name: str, status: str = "sleeping", *, desired: str = "running",
      kind: str = "teammate", plan: bool = False, pid: int | None = None,
      cost: float = 0.0) -> dict[str, Any]:
    return {"name": name, "status": status, "desired": desired, "kind": kind,
            "plan_mode_required": plan, "pid": pid, "usage": {"cost_usd": cost}}


def t(tid: int, *, status: str = "pending", owner: str | None = None,
      blocked_by: tuple[int, ...] = (), blocks: tuple[int, ...] = ()) -> dict[str, Any]:
    return {"id": tid, "subject": f"task {tid}", "status": status, "owner": owner,
            "blocked_by": list(blocked_by), "blocks": list(blocks), "claimed_at": None}


def index(*tasks: dict[str, Any]) -> BoardIndex:
    board_index = BoardIndex()
    board_index.fill(tasks)
    return board_index


def live(members: list[dict[str, Any]]) -> set[str]:
    """Those with a process: every member that is not sleeping."""
    return {x["name"] for x in members if x["status"] != "sleeping"}


def choose(tasks: list[dict[str, Any]], members: list[dict[str, Any]], *,
           pending_plans: frozenset[str] = frozenset(), mail: frozenset[str] = frozenset(),
           idle_since: dict[str, float] | None = None) -> list[tuple[int, str]]:
    assigner = Assigner(index(*tasks))
    assigner.observe(members, 100.0)
    for name, since in (idle_since or {}).items():
        assigner.seen[name] = (assigner.seen[name][0], since)
    return assigner.choose(members, live(members), lambda n: n in pending_plans,
                           lambda n: n in mail)


# -- the board index -------------------------------------------------------------------------
def test_claimable_means_pending_unowned_and_unblocked() -> None:
    idx = index(t(1), t(2, owner="bob"), t(3, blocked_by=(1,)), t(4, status="in_progress",
                                                                   owner="al"),
                t(5, status="completed"), t(6, blocked_by=(5,)))
    assert idx.ready == {1, 6}
    assert idx.owned_ready == {2}
    assert idx.in_progress() == [(4, "al", None)]
    assert idx.lowest_ready(10) == [1, 6]


def test_a_completed_blocker_frees_what_it_blocks_and_nothing_else_is_read() -> None:
    idx = index(t(1, blocks=(2, 3)), t(2, blocked_by=(1,)), t(3, blocked_by=(1,), owner="bob"))
    assert idx.ready == {1}
    idx.note(1, t(1, status="completed", owner="al", blocks=(2, 3)))
    assert idx.ready == {2}
    assert idx.owned_ready == {3}
    assert idx.lowest_ready(1) == [2]


def test_a_claimed_task_leaves_the_heap_and_an_unclaimed_one_comes_back() -> None:
    idx = index(t(1), t(2), t(3))
    assert idx.lowest_ready(2) == [1, 2]
    idx.note(1, t(1, status="in_progress", owner="al"))
    assert idx.lowest_ready(2) == [2, 3]
    idx.note(1, t(1))  # released: pending with no owner again
    assert idx.lowest_ready(5) == [1, 2, 3]
    idx.note(2, None)  # its file is gone
    assert idx.lowest_ready(5) == [1, 3]


def test_the_index_reads_the_board_and_then_one_file(ws: Workspace) -> None:
    actions.create_team(ws, "crew")
    board.create(ws, "crew", "one")
    board.create(ws, "crew", "two", blocked_by=[1])
    idx = BoardIndex.load(ws, "crew")
    assert (idx.ready, idx.top) == ({1}, 2)
    board.update(ws, "crew", 1, status="completed")
    idx.refresh(ws, "crew", 1)
    assert idx.ready == {2}
    board.create(ws, "crew", "three")  # only .highwatermark is looked at, then task 3
    idx.refresh_new(ws, "crew")
    assert (idx.ready, idx.top) == ({2, 3}, 3)


# -- choosing --------------------------------------------------------------------------------
def test_nothing_to_do_chooses_nothing() -> None:
    assert choose([], [m("a", "idle"), m("b")]) == []
    assert choose([t(1, status="in_progress", owner="x")], [m("a", "idle")]) == []


def test_the_lowest_id_goes_to_the_teammate_idle_longest() -> None:
    members = [m("a", "idle"), m("b", "idle"), m("c", "idle")]
    assert choose([t(7), t(3)], members, idle_since={"a": 50, "b": 10, "c": 30}) == [
        (3, "b"), (7, "c")]


def test_each_idle_teammate_gets_one_task() -> None:
    members = [m("a", "idle"), m("b", "idle")]
    assert choose([t(1), t(2), t(3)], members) == [(1, "a"), (2, "b")]


def test_one_sleeper_per_claimable_task_and_only_when_no_one_is_idle() -> None:
    members = [m("a"), m("b"), m("c")]
    assert choose([t(1)], members) == [(1, "a")]
    assert choose([t(1), t(2)], members) == [(1, "a"), (2, "b")]
    assert choose([t(1), t(2), t(3), t(4)], members) == [(1, "a"), (2, "b"), (3, "c")]
    members = [m("a"), m("b"), m("idler", "idle")]
    assert choose([t(1)], members) == [(1, "idler")]
    assert choose([t(1), t(2)], members) == [(1, "idler"), (2, "a")]


def test_a_sleeper_asleep_longest_goes_first() -> None:
    members = [m("a"), m("b"), m("c")]
    assert choose([t(1)], members, idle_since={"a": 30, "b": 20, "c": 10}) == [(1, "c")]


def test_mail_waiting_for_a_member_goes_first_a_task_waits_for_its_turn() -> None:
    members = [m("a", "idle"), m("b", "idle"), m("c")]
    assert choose([t(1), t(2, owner="b")], members, mail=frozenset({"a", "b"})) == [(1, "c")]
    assert choose([t(1)], [m("a"), m("b")], mail=frozenset({"a"})) == [(1, "b")]


def test_a_starting_teammate_counts_as_a_taker() -> None:
    members = [m("a"), m("new", "starting")]
    assert choose([t(1)], members) == []
    assert choose([t(1), t(2)], members) == [(2, "a")]


def test_busy_teammates_and_leads_take_no_task() -> None:
    members = [m("lead", "idle", kind="lead"), m("lead2", "idle", kind="lead"),
               m("busy", "active"), m("a")]
    assert choose([t(1)], members) == [(1, "a")]
    # by name too: `lead` is the lead's name (CONTRACT §3)
    assert choose([t(1)], [m("lead", "idle")]) == []


def test_stopped_and_failed_members_take_nothing() -> None:
    members = [m("a", "idle", desired="stopped"), m("b", "failed"), m("c", "shutdown")]
    assert choose([t(1), t(2, owner="b"), t(3, owner="c")], members) == []


def test_a_pending_plan_takes_nothing() -> None:
    members = [m("planner", "idle", plan=True), m("other", "idle")]
    assert choose([t(1), t(2, owner="planner")], members, pending_plans=frozenset({"planner"})) == [
        (1, "other")]
    assert choose([t(1), t(2, owner="planner")], members) == [(2, "planner"), (1, "other")]


def test_an_owned_task_goes_to_its_owner_once_unblocked_and_idle_or_asleep() -> None:
    blocked = [t(1, status="in_progress", owner="x", blocks=(2,)),
               t(2, owner="b", blocked_by=(1,))]
    assert choose(blocked, [m("a", "idle"), m("b")]) == []
    freed = [t(1, status="completed", owner="x", blocks=(2,)),
             t(2, owner="b", blocked_by=(1,))]
    assert choose(freed, [m("a", "idle"), m("b")]) == [(2, "b")]
    assert choose(freed, [m("a", "idle"), m("b", "idle")]) == [(2, "b")]
    assert choose(freed, [m("a", "idle"), m("b", "active")]) == []  # when it is idle


def test_an_owner_gets_one_task_at_a_time() -> None:
    members = [m("b", "idle")]
    assert choose([t(1, owner="b"), t(2, owner="b"), t(3)], members) == [(1, "b")]


def test_a_lead_owning_a_task_is_not_sent_it() -> None:
    assert choose([t(1, owner="lead")], [m("lead", kind="lead")]) == []


# -- just given a task: busy until seen at work ---------------------------------------------
def test_a_member_given_a_task_is_busy_until_it_has_been_active_again() -> None:
    alice = m("alice", "idle", pid=10)
    assigner = Assigner(index(t(1), t(2)))
    assigner.observe([alice], 100.0)
    assert assigner.choose([alice], {"alice"}, lambda n: False) == [(1, "alice")]
    assigner.index.note(1, t(1, status="in_progress", owner="alice"))
    assigner.gave(alice, t(1, status="in_progress", owner="alice"), 100.0)
    # still idle in the roster, its message still waiting: nothing more for it
    assert assigner.observe([alice], 101.0, has_mail=lambda n: True) is None
    assert assigner.choose([alice], {"alice"}, lambda n: False) == []
    # seen at work, then idle again: the next task
    assigner.observe([m("alice", "active", pid=10)], 102.0)
    assigner.observe([alice], 103.0)
    assert assigner.choose([alice], {"alice"}, lambda n: False) == [(2, "alice")]


def test_a_model_call_or_a_new_process_counts_as_at_work() -> None:
    for after in (m("alice", "idle", pid=10, cost=0.5), m("alice", "idle", pid=11)):
        assigner = Assigner(index(t(2)))
        assigner.gave(m("alice", "idle", pid=10), t(1, status="in_progress"), 100.0)
        assigner.observe([after], 101.0, has_mail=lambda n: True)
        assert assigner.choose([after], {"alice"}, lambda n: False) == [(2, "alice")]


def test_a_member_that_took_the_message_in_and_stayed_idle_is_free_after_a_grace() -> None:
    alice = m("alice", "idle", pid=10)
    assigner = Assigner(index(t(2)))
    assigner.gave(alice, t(1, status="in_progress"), 100.0)
    due = assigner.observe([alice], 101.0, has_mail=lambda n: False)  # taken in
    assert due == 101.0 + TAKEN_GRACE
    assert assigner.choose([alice], {"alice"}, lambda n: False) == []
    assigner.observe([alice], 101.0 + TAKEN_GRACE, has_mail=lambda n: False)
    assert assigner.choose([alice], {"alice"}, lambda n: False) == [(2, "alice")]


# -- told again after a restart ----------------------------------------------------------------
def test_in_progress_tasks_of_waiting_teammates_are_told_once_one_at_a_time() -> None:
    tasks = [t(1, status="in_progress", owner="a"), t(2, status="in_progress", owner="a"),
             t(3, status="in_progress", owner="busy"), t(4, status="in_progress", owner="b"),
             t(5, status="in_progress", owner="lead")]
    members = [m("a", "idle"), m("busy", "active"), m("b"), m("lead", "idle", kind="lead")]
    assigner = Assigner(index(*tasks))
    assigner.observe(members, 100.0)
    assert assigner.untold(members) == [(1, "a", None), (4, "b", None)]
    for tid, name, at in assigner.untold(members):
        assigner.told.add((tid, name, at))
    assert assigner.untold(members) == [(2, "a", None)]


# -- the teammate's side: a task_assigned it knows is not shown again -------------------------
def test_the_conversation_knows_when_it_was_handed_a_task(tmp_path: Path) -> None:
    """A re-sent claim (earlier than the record of it) is old news; a claim made after it
    (the task released, then assigned anew) is not (loop.Member.assigned_task)."""
    files.ensure_dir(Paths(tmp_path).sessions_dir("crew"))
    session = Session(Workspace(tmp_path).store, "crew", "alice")
    assert session.claimed_at(3) is None
    handed = session.append({"type": "user", "claimed": 3, "content": [
        {"type": "text", "text": "<auto-claimed>Task #3: x</auto-claimed>"}]})
    assert session.claimed_at(3) == handed["ts"]
    folded = session.append({"type": "compaction", "summary": "s", "known_ids": [],
                             "claimed_ids": sorted(session.claimed_ids)})
    again = Session.load(session.store, "crew", "alice")
    assert again.claimed_at(3) == folded["ts"] >= handed["ts"]
    assert again.claimed_at(4) is None
