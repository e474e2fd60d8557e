"""The change feed (`Store.changes`, `Store.wait_for`): every kind of change is reported as
a typed `Change`, a team made after the feed opened is reported, and a wait returns on a
change made by another process."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import teamd.roster
from teamd import budget
from teamd.store.api import Feed, Store
from teamd.store.changes import Change, Kind
from tests.store import forked

T = "t"
WAIT = 10.0  # a deadline, never reached when the feed works


def roster(team: str = T) -> dict[str, Any]:
    return {**teamd.roster.new_roster(team, ""), "members": [{"name": "ann"}]}


def make_team(store: Store, team: str = T) -> None:
    assert store.create_team(team, roster(team), {"schema": budget.SCHEMA, "spent_usd": 0.0})


def next_task(store: Store) -> None:
    with store.board_unit(T):
        store.next_task_id(T)


def write_task(store: Store) -> None:
    with store.board_unit(T):
        store.write_task(T, {"id": 1, "subject": "s", "status": "pending"})


def add_spend(store: Store) -> None:
    store.add_spend(T, lambda doc: {"schema": 1, "spent_usd": 1.0})


def write_state(store: Store) -> None:
    with store.roster_unit(T), store.member_unit(T, "ann"):
        store.write_state(T, "ann", {"schema": 2, "name": "ann", "status": "idle"})


def write_spec(store: Store) -> None:
    with store.roster_unit(T):
        store.write_spec(T, {**roster(), "description": "changed"})


#: kind → (how to cause it, the change expected)
CAUSES: dict[Kind, tuple[Callable[[Store], object], Change]] = {
    Kind.SPEC: (write_spec, Change(Kind.SPEC, T)),
    Kind.MEMBER: (write_state, Change(Kind.MEMBER, T, "ann")),
    Kind.INBOX: (lambda s: s.deliver(T, "ann", [{"id": "m1", "type": "message"}]),
                 Change(Kind.INBOX, T, "ann")),
    Kind.TASK: (write_task, Change(Kind.TASK, T, "1")),
    Kind.TASK_IDS: (next_task, Change(Kind.TASK_IDS, T)),
    Kind.REQUEST: (lambda s: s.create_request(T, {"request_id": "r1", "status": "pending"}),
                   Change(Kind.REQUEST, T, "r1")),
    Kind.SPEND: (add_spend, Change(Kind.SPEND, T)),
    Kind.JOURNAL: (lambda s: s.emit(T, [{"ts": 1.0, "event": "x"}],
                                                 max_bytes=1 << 20, keep=1),
                   Change(Kind.JOURNAL, T)),
    Kind.SESSION: (lambda s: s.append_session(T, "ann", [{"n": 1}]),
                   Change(Kind.SESSION, T, "ann")),
}


@contextmanager
def feed_of(store: Store, teams: list[str] | None = None,
            kinds: frozenset[Kind] | None = None) -> Iterator[Feed]:
    with store.changes(teams, kinds=kinds) as feed:
        if feed.polling:
            pytest.skip("this store cannot push changes here (polling)")
        yield feed


def changes_until(feed: Feed, wanted: Change) -> list[Change]:
    """Every change reported until `wanted` is (or the deadline passes)."""
    seen: list[Change] = []
    while wanted not in seen and feed.wait(WAIT):
        seen += feed.drain()[0]
    return seen


@pytest.mark.parametrize("kind", list(CAUSES), ids=str)
def test_each_kind_is_reported_for_its_change(store: Store, kind: Kind) -> None:
    cause, expected = CAUSES[kind]
    make_team(store)
    with feed_of(store) as feed:
        feed.drain()
        cause(store)
        assert expected in changes_until(feed, expected)


def test_a_team_coming_and_going_is_reported(store: Store) -> None:
    with feed_of(store) as feed:
        make_team(store)
        assert Change(Kind.TEAM, T) in changes_until(feed, Change(Kind.TEAM, T))
        with store.roster_unit(T):
            store.delete_team(T, {"ts": 1.0, "event": "team_deleted"}, purge=True)
        assert Change(Kind.TEAM, T) in changes_until(feed, Change(Kind.TEAM, T))


@pytest.mark.parametrize("teams", [None, [T]], ids=["every-team", "named"])
def test_a_team_made_after_the_feed_opened_is_reported(store: Store,
                                                       teams: list[str] | None) -> None:
    with feed_of(store, teams) as feed:
        make_team(store)
        assert Change(Kind.TEAM, T) in changes_until(feed, Change(Kind.TEAM, T))
        write_state(store)  # and what happens in it from then on
        expected = Change(Kind.MEMBER, T, "ann")
        assert expected in changes_until(feed, expected)


def test_only_the_kinds_asked_are_reported(store: Store) -> None:
    make_team(store)
    with feed_of(store, kinds=frozenset({Kind.MEMBER})) as feed:
        write_spec(store)
        assert not feed.wait(0.3)  # a roster change is not one of the kinds asked
        write_state(store)
        changes = changes_until(feed, Change(Kind.MEMBER, T, "ann"))
        assert changes and all(c.kind is Kind.MEMBER for c in changes)


def test_only_the_teams_asked_are_reported(store: Store) -> None:
    make_team(store)
    make_team(store, "other")
    with feed_of(store, ["other"]) as feed:
        write_state(store)  # team t
        assert not feed.wait(0.3)


def test_an_unwatched_team_is_no_longer_reported(store: Store) -> None:
    make_team(store)
    with feed_of(store, [T]) as feed:
        feed.unwatch(T)
        write_state(store)
        assert not feed.wait(0.3)
        feed.watch(T)
        write_state(store)
        assert Change(Kind.MEMBER, T, "ann") in changes_until(feed, Change(Kind.MEMBER, T, "ann"))


def test_wait_returns_on_a_change_made_by_another_process(store: Store) -> None:
    make_team(store)
    with feed_of(store, [T]) as feed:
        assert not feed.wait(0.1)  # nothing happened: the wait runs to its timeout
        writer = forked.start(write_state, [(store,)])
        try:
            assert feed.wait(WAIT)
            assert feed.wait(0)  # the wait drained nothing: what woke it is still there
            assert Change(Kind.MEMBER, T, "ann") in changes_until(
                feed, Change(Kind.MEMBER, T, "ann"))
        finally:
            forked.results(*writer)


def test_wait_returns_when_another_descriptor_is_readable(store: Store) -> None:
    make_team(store)
    r, w = os.pipe()
    try:
        with feed_of(store, [T]) as feed:
            os.write(w, b"x")
            assert feed.wait(WAIT, also=[r])
            assert feed.drain() == ([], False)
    finally:
        os.close(r)
        os.close(w)


def test_wait_for_returns_what_the_check_found_after_another_process_wrote(
        store: Store) -> None:
    make_team(store)

    def check() -> str | None:
        state = store.read_state(T, "ann")
        return None if state is None else str(state["status"])

    assert store.wait_for([T], check, timeout=0.2) is None  # falsy at the deadline
    writer = forked.start(write_state, [(store,)])
    try:
        assert store.wait_for([T], check, timeout=WAIT) == "idle"
    finally:
        forked.results(*writer)
