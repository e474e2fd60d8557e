"""The board's promises (CONTRACT §5), held by every store: ids never handed out twice nor
reused, one owner for a task however many processes claim it in a unit, a unit's writes
seen whole. Written against `teamd.store.api.Store` only."""

from __future__ import annotations

import time
from typing import Any

import pytest

from teamd.store.api import Store
from tests.store.forked import ctx, race, results, run, start

TEAM = "crew"


def task(task_id: int, **fields: Any) -> dict[str, Any]:
    return {"schema": 1, "id": task_id, "subject": f"task {task_id}", "description": "",
            "status": "pending", "owner": None, "blocked_by": [], "blocks": [],
            "created_by": "lead", "created_at": 1.0, "updated_at": 1.0, "claimed_at": None,
            "completed_at": None, "commits": [], **fields}


def add(store: Store, **fields: Any) -> int:
    """A new task, as `board.create` makes one: a new id, then its task, in one unit."""
    with store.board_unit(TEAM):
        task_id = store.next_task_id(TEAM)
        store.write_task(TEAM, task(task_id, **fields))
    return task_id


def test_a_task_is_kept_and_read_back(store: Store, crew: str) -> None:
    assert store.board_exists(TEAM)
    assert store.task_ids(TEAM) == [] and store.top_task_id(TEAM) == 0
    assert store.read_task(TEAM, 1) is None
    first, second = add(store), add(store, owner="bob")
    assert (first, second) == (1, 2)
    assert store.read_task(TEAM, 2) == task(2, owner="bob")
    with store.board_unit(TEAM):
        store.write_task(TEAM, task(1, status="completed"))
    assert store.read_task(TEAM, 1) == task(1, status="completed")
    assert store.task_ids(TEAM) == [1, 2] and store.top_task_id(TEAM) == 2


def test_the_whole_board_is_read_at_once_in_id_order(store: Store, crew: str) -> None:
    assert store.read_tasks(TEAM) == [] and store.read_tasks("nope") == []
    ids = [add(store, subject=f"s{i}") for i in range(12)]  # 10 and 11 sort after 1 as text
    with store.board_unit(TEAM):
        store.write_task(TEAM, task(3, subject="s2", status="completed"))
    got = store.read_tasks(TEAM)
    assert [t["id"] for t in got] == ids == list(range(1, 13))
    assert got == [store.read_task(TEAM, task_id) for task_id in ids]
    assert got[2]["status"] == "completed"


def test_a_claim_unit_reads_its_task_and_none_when_there_is_none(store: Store,
                                                                 crew: str) -> None:
    task_id = add(store, owner="bob")
    with store.claim_unit(TEAM, task_id) as found:
        assert found == task(task_id, owner="bob")
    with store.claim_unit(TEAM, 99) as missing:
        assert missing is None


def test_ids_are_never_reused_not_even_those_of_tasks_never_written(store: Store,
                                                                    crew: str) -> None:
    add(store)
    with store.board_unit(TEAM):
        lost = store.next_task_id(TEAM)  # handed out, then its task never written (a crash)
    assert lost == 2 and store.top_task_id(TEAM) == 2
    assert store.task_ids(TEAM) == [1] and store.read_task(TEAM, lost) is None
    assert add(store) == 3
    assert store.task_ids(TEAM) == [1, 3]


def test_the_top_id_raised_by_an_import_is_never_handed_out(store: Store, crew: str) -> None:
    add(store)
    with store.board_unit(TEAM):
        store.raise_top_task_id(TEAM, 7)  # the ids a team used in the store it came from
        store.raise_top_task_id(TEAM, 3)  # lower: no change
    assert store.top_task_id(TEAM) == 7
    assert add(store) == 8 and store.task_ids(TEAM) == [1, 8]


def test_a_board_that_does_not_exist(store: Store) -> None:
    assert not store.board_exists("nope")
    assert store.task_ids("nope") == [] and store.top_task_id("nope") == 0
    assert store.read_task("nope", 1) is None


def _add_many(store: Store, count: int) -> list[int]:
    return [add(store) for _ in range(count)]


@pytest.mark.timeout(120)
def test_ids_from_racing_processes_are_all_different(store: Store, crew: str) -> None:
    procs, per = 6, 25
    got = [i for ids in run(_add_many, [(store, per)] * procs) for i in ids]
    assert sorted(got) == list(range(1, procs * per + 1))  # each once, none skipped
    assert store.task_ids(TEAM) == sorted(got) and store.top_task_id(TEAM) == procs * per


def _claim(store: Store, task_id: int, me: str, go: Any) -> bool:
    """One claim as `board.claim` makes it: re-checked and written in one unit."""
    assert go.wait(30)
    with store.board_unit(TEAM):
        found = store.read_task(TEAM, task_id)
        assert found is not None
        if found["owner"] is not None or found["status"] != "pending":
            return False
        store.write_task(TEAM, {**found, "owner": me, "status": "in_progress",
                                "claimed_at": time.time()})
        return True


@pytest.mark.timeout(120)
def test_a_task_claimed_by_racing_processes_has_one_owner(store: Store, crew: str) -> None:
    names = [f"m{i}" for i in range(8)]
    for _ in range(5):
        task_id = add(store)
        won = race(_claim, [(store, task_id, name) for name in names])
        assert won.count(True) == 1, won
        final = store.read_task(TEAM, task_id)
        assert final is not None and final["status"] == "in_progress"
        assert final["owner"] == names[won.index(True)]


def _write_pairs(store: Store, rounds: int) -> int:
    """Tasks 1 and 2 always carry the same `n`: each round writes both in one unit."""
    for n in range(rounds):
        with store.board_unit(TEAM):
            for task_id in (1, 2):
                found = store.read_task(TEAM, task_id)
                assert found is not None
                store.write_task(TEAM, {**found, "description": str(n)})
    return rounds


def _read_pairs(store: Store, stop: Any) -> int:
    """Inside a unit, tasks 1 and 2 must agree: a unit's writes are never seen in half."""
    seen = 0
    while not stop.is_set() or seen == 0:
        with store.board_unit(TEAM):
            one, two = store.read_task(TEAM, 1), store.read_task(TEAM, 2)
        assert one is not None and two is not None
        assert one["description"] == two["description"], (one, two)
        seen += 1
    return seen


@pytest.mark.timeout(120)
def test_a_units_writes_are_seen_whole(store: Store, crew: str) -> None:
    add(store, description="start")
    add(store, description="start")
    stop = ctx.Event()
    readers, rout = start(_read_pairs, [(store, stop)] * 2)
    writers, wout = start(_write_pairs, [(store, 100)] * 2)
    assert results(writers, wout) == [100, 100]
    stop.set()
    assert all(n > 0 for n in results(readers, rout))
    one, two = store.read_task(TEAM, 1), store.read_task(TEAM, 2)
    assert one is not None and two is not None
    assert one["description"] == two["description"] == "99"


@pytest.mark.timeout(60)
def test_a_unit_is_entered_again_by_the_process_that_holds_it(store: Store,
                                                              crew: str) -> None:
    with store.board_unit(TEAM), store.board_unit(TEAM):  # would wait on itself forever
        task_id = store.next_task_id(TEAM)
        store.write_task(TEAM, task(task_id))
    assert store.task_ids(TEAM) == [task_id]


def _claim_in_claim_unit(store: Store, task_id: int, me: str) -> bool:
    """One claim as `board.claim` makes it: in the task's claim unit, re-checked there on
    the task the unit read."""
    with store.claim_unit(TEAM, task_id) as found:
        if found is None:
            return False  # another claim of it was under way: lost
        assert found == store.read_task(TEAM, task_id)
        if found["owner"] is not None or found["status"] != "pending":
            return False
        store.write_task(TEAM, {**found, "owner": me, "status": "in_progress"})
        return True


@pytest.mark.timeout(120)
def test_claims_in_claim_units_give_each_task_one_owner(store: Store, crew: str) -> None:
    """Racers for the same tasks, each trying every task in turn: every task claimed once,
    and the board's own unit still sees the claims whole."""
    ids = [add(store) for _ in range(6)]
    won = race(_claim_all, [(store, ids, f"m{i}") for i in range(8)])
    owners = [task_id for got in won for task_id in got]
    assert sorted(owners) == ids  # each task once, none lost
    with store.board_unit(TEAM):
        final = [store.read_task(TEAM, task_id) for task_id in ids]
    assert all(t is not None and t["status"] == "in_progress" for t in final)


def _claim_all(store: Store, ids: list[int], me: str, go: Any) -> list[int]:
    assert go.wait(30)
    return [task_id for task_id in ids if _claim_in_claim_unit(store, task_id, me)]
