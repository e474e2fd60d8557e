"""The store's sessions and transcripts (CONTRACT §6, §8): appends are durable and read
back whole, by another process too; a torn or bad line is mended only by the member
(`mend=True`); a follower sees new records as they land.

Written against `teamd.store.api.Store` only. The one fault no interface call can make — a
writer that died in the middle of a line — is made by `tear`, which each store spells for
itself.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from teamd.files import Json
from teamd.layout import Workspace
from teamd.store.api import Store

TEAM = "crew"  # the `crew` fixture's team
ctx = multiprocessing.get_context("fork")


def turn(n: int) -> Json:
    return {"type": "user", "n": n, "content": [{"type": "text", "text": f"turn {n}"}]}


def ns(records: list[Json]) -> list[int]:
    return [r["n"] for r in records]


def _append(root: Path, start: int, count: int, go: Any = None) -> None:
    if go is not None:
        go.wait(30)
    store = Workspace.at(root).store
    for n in range(start, start + count):
        store.append_session(TEAM, "alice", [turn(n)])


def test_appends_are_read_back_in_order_by_another_process(store: Store, crew: str,
                                                           hermetic: Path) -> None:
    assert store.read_session(crew, "alice") == []  # no conversation yet
    store.append_session(crew, "alice", [turn(0), turn(1)])
    child = ctx.Process(target=_append, args=(hermetic, 2, 20))
    child.start()
    child.join(30)
    assert child.exitcode == 0
    assert ns(store.read_session(crew, "alice")) == list(range(22))
    assert store.read_session(crew, "bob") == []  # each member its own


def test_a_torn_tail_is_mended_only_when_asked(store: Store, crew: str, faults: Any) -> None:
    store.append_session(crew, "alice", [turn(0), turn(1)])
    faults.tear_session(crew, "alice", b'{"type": "user", "n": 2, "content": [{"ty')
    assert faults.torn(crew, "alice")  # the fault happened
    assert ns(store.read_session(crew, "alice")) == [0, 1]  # skipped, not mended
    assert faults.torn(crew, "alice")  # a reader that is not the member leaves it
    assert ns(store.read_session(crew, "alice", mend=True)) == [0, 1]
    assert not faults.torn(crew, "alice")
    store.append_session(crew, "alice", [turn(2)])
    assert ns(store.read_session(crew, "alice")) == [0, 1, 2]  # nothing glued onto it


def test_a_bad_line_is_skipped_and_mended_away(store: Store, crew: str, faults: Any) -> None:
    store.append_session(crew, "alice", [turn(0)])
    faults.tear_session(crew, "alice", b"not json\n")
    store.append_session(crew, "alice", [turn(1)])
    assert ns(store.read_session(crew, "alice")) == [0, 1]
    assert ns(store.read_session(crew, "alice", mend=True)) == [0, 1]
    assert ns(store.read_session(crew, "alice")) == [0, 1]


def test_a_transcript_is_kept_apart_from_the_session(store: Store, crew: str) -> None:
    store.append_session(crew, "alice", [turn(0)])
    turns = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]
    first = store.keep_transcript(crew, "alice", "20250101T000000.000001", turns)
    second = store.keep_transcript(crew, "alice", "20250101T000000.000002", turns[:1])
    assert first and second and first != second
    assert ns(store.read_session(crew, "alice")) == [0]  # the session is left as it was
    third = store.keep_transcript(crew, "bob-2", "20240101T000000.000000", turns)
    assert store.list_transcripts(crew) == [  # by name, then stamp; a name may hold '-'
        ("alice", "20250101T000000.000001", first), ("alice", "20250101T000000.000002", second),
        ("bob-2", "20240101T000000.000000", third)]
    for name, _, where in store.list_transcripts(crew):
        assert store.read_transcript(crew, name, where) == (turns if where != second
                                                             else turns[:1])


@pytest.mark.timeout(60)
def test_a_follower_sees_new_records_as_they_land(store: Store, crew: str,
                                                  hermetic: Path) -> None:
    store.append_session(crew, "alice", [turn(0), turn(1)])
    follower = store.follow_session(crew, "alice", skip=1, poll=0.05)
    assert next(follower)["n"] == 1  # what was there, past `skip`
    writer = ctx.Process(target=_append, args=(hermetic, 2, 100))
    writer.start()
    got = [next(follower)["n"] for _ in range(100)]
    writer.join(30)
    assert writer.exitcode == 0
    follower.close()
    assert got == list(range(2, 102))
