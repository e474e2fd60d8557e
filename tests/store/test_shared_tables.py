"""The settings every host applies (`read_shared_tables`, `write_shared_tables`, CONTRACT
§15): a store that shares them keeps one document, replaced whole, read by every process,
and reports each team's roster changed when it is written (each host's teamd then wakes
its paused members); a store that shares nothing (files) keeps none and writes nothing."""

from __future__ import annotations

from typing import Any

from teamd.store.api import Store
from teamd.store.changes import Change, Kind
from tests.store import forked
from tests.store.test_feed import changes_until, feed_of, make_team

RULES: dict[str, Any] = {
    "permissions": {"default": "ask", "deny": ["bash(rm *)"], "allow": ["read_file"]},
    "hooks": {"task_completed": "pytest -q"},
    "prices": {"claude-sonnet-5-5": {"input": 2.5, "output": 12.0,
                                     "long": {"threshold": 100000, "input": 5.0,
                                              "output": 20.0}}},
}
NONE: dict[str, Any] = {"permissions": {}, "hooks": {}, "prices": {}}


def shares(store: Store) -> bool:
    """Whether `store` keeps the tables for every host: a database does, files do not."""
    return store.description != "files"


def read(store: Store) -> Any:
    return store.read_shared_tables()


def test_one_document_replaced_whole_and_read_by_every_process(store: Store) -> None:
    assert read(store) is None  # nothing written yet: each host's own tables apply
    assert store.write_shared_tables(RULES) is shares(store)
    assert read(store) == (RULES if shares(store) else None)
    assert forked.run(read, [(store,)]) == [RULES if shares(store) else None]
    assert store.write_shared_tables(NONE) is shares(store)  # whole: no table of RULES kept
    assert read(store) == (NONE if shares(store) else None)
    assert forked.run(read, [(store,)]) == [NONE if shares(store) else None]


def test_writing_them_reports_every_teams_roster_changed(store: Store) -> None:
    make_team(store, "one")
    make_team(store, "two")
    with feed_of(store, kinds=frozenset({Kind.SPEC})) as feed:
        feed.drain()
        if not store.write_shared_tables(RULES):
            assert not feed.wait(0.3)  # nothing shared, nothing changed
            return
        seen = changes_until(feed, Change(Kind.SPEC, "one"))
        seen += changes_until(feed, Change(Kind.SPEC, "two"))
    assert {Change(Kind.SPEC, "one"), Change(Kind.SPEC, "two")} <= set(seen)
