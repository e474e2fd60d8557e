"""Steps `together` (CONTRACT §15: a team tool's effect and its recorded result are one
transaction), held by every store: on PostgreSQL the units of a step are one transaction —
seen by no other process until the step ends, and not at all when it raises — each unit a
savepoint that leaves nothing when it raises, what is to follow the commit run only once
it went through, and a hook's part (`apart`) its own; on the files store each unit is
durable as it ends, as outside a step. Another process reads (a forked worker), so what
"seen" means is what every reader sees. Written against `teamd.store.api.Store` only."""

from __future__ import annotations

from typing import Any

import pytest

from teamd.store.api import Store
from teamd.store.errors import StoreUnreachable
from tests.store.conftest import Faults
from tests.store.forked import run
from tests.store.test_store_board import TEAM, add, task

pytestmark = pytest.mark.usefixtures("crew")


def joins(store: Store) -> bool:
    """Whether the store makes a step one transaction (PostgreSQL) or not (files)."""
    return store.description != "files"


def _seen(store: Store) -> dict[str, Any]:
    """What another process reads of the team now."""
    return {"tasks": store.task_ids(TEAM),
            "session": [r["n"] for r in store.read_session(TEAM, "alice")],
            "journal": [e["event"] for e in store.read_journal(TEAM)
                        if e["event"].startswith("step")]}


def seen(store: Store) -> dict[str, Any]:
    [got] = run(_seen, [(store,)])
    return dict(got)


def write(store: Store, n: int) -> None:
    """One unit of each kind a tool's step holds: a task, a session record, a journal
    line."""
    add(store, subject=f"task {n}")
    store.append_session(TEAM, "alice", [{"type": "user", "n": n, "content": []}])
    store.emit(TEAM, [{"ts": 1.0, "event": f"step{n}"}], max_bytes=1 << 20, keep=1)


NOTHING = {"tasks": [], "session": [], "journal": []}
ONE = {"tasks": [1], "session": [1], "journal": ["step1"]}


def test_a_step_is_seen_whole_once_it_ends(store: Store) -> None:
    followed: list[str] = []
    with store.together():
        write(store, 1)
        store.after_commit(lambda: followed.append("after"))
        during = seen(store)
        followed.append("end of step")
    assert during == (NOTHING if joins(store) else ONE)
    assert followed == (["end of step", "after"] if joins(store) else ["after", "end of step"])
    assert seen(store) == ONE


def test_a_step_that_raises_leaves_nothing_on_a_database(store: Store) -> None:
    followed: list[str] = []
    with pytest.raises(ValueError), store.together():
        write(store, 1)
        store.after_commit(lambda: followed.append("after"))
        raise ValueError("the handler failed")
    if joins(store):
        assert (seen(store), followed) == (NOTHING, [])
        assert add(store) == 1  # the id it took is handed out again: it was never out
    else:
        assert (seen(store), followed) == (ONE, ["after"])
    with store.together():  # the next step is a step of its own
        write(store, 2)
    assert seen(store)["session"] == ([2] if joins(store) else [1, 2])


def test_a_unit_that_raises_inside_a_step_leaves_nothing_of_itself(store: Store) -> None:
    with store.together():
        add(store)
        with pytest.raises(ValueError), store.board_unit(TEAM):
            store.write_task(TEAM, task(7))
            store.emit(TEAM, [{"ts": 1.0, "event": "step7"}], max_bytes=1 << 20, keep=1)
            raise ValueError("refused after it wrote")
        store.append_session(TEAM, "alice", [{"type": "user", "n": 1, "content": []}])
    got = seen(store)
    if joins(store):  # back to the unit's savepoint: the step's other units stand
        assert got == {"tasks": [1], "session": [1], "journal": []}
    else:  # files: what a unit wrote before it raised stays
        assert got["tasks"] == [1, 7] and got["session"] == [1]


def test_a_hook_runs_apart_before_the_first_unit_and_never_after(store: Store) -> None:
    with store.together():
        with store.board_unit(TEAM):  # a read under the board's lock begins nothing
            assert store.task_ids(TEAM) == []
        with store.apart():  # a hook, and its journal line: durable at once
            store.emit(TEAM, [{"ts": 1.0, "event": "step0"}], max_bytes=1 << 20, keep=1)
            assert seen(store)["journal"] == ["step0"]
        write(store, 1)
        if joins(store):  # the transaction is open: a hook now would hold it idle
            with pytest.raises(RuntimeError, match="before the step's first write"), \
                    store.apart():
                pass
    assert seen(store) == {**ONE, "journal": ["step0", "step1"]}


def test_a_step_whose_end_fails_leaves_nothing_and_nothing_follows(store: Store,
                                                                    faults: Faults) -> None:
    """The connection cut by the server before the step ends (the fault is real: its
    backend terminated): the end raises, nothing is written, nothing that was to follow
    the commit runs — a member's session takes in no record the store does not have."""
    followed: list[str] = []
    with pytest.raises(StoreUnreachable), store.together():
        write(store, 1)
        store.after_commit(lambda: followed.append("after"))
        faults.cut()
    assert (followed, seen(store)) == ([], NOTHING)
    with store.together():  # the next step, on a new connection
        write(store, 2)
    assert seen(store) == {"tasks": [1], "session": [2], "journal": ["step2"]}
