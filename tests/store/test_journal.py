"""The store's journal (CONTRACT §7): lines kept in order across rotation, read from either
end, and followed as they are added — by a writer in another process.

Written against `teamd.store.api.Store` only: every store must pass it unchanged.
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
#: small parts: a few ticks fill one, so every test here rotates many times
SMALL = {"max_bytes": 600, "keep": 1000}


def tick(n: int) -> Json:
    return {"ts": 1000.0 + n, "event": "tick", "n": n, "pad": "x" * 40}


def ticks(records: list[Json]) -> list[int]:
    return [r["n"] for r in records if r.get("event") == "tick"]


def test_emitted_lines_are_read_in_order_across_rotation(store: Store, crew: str) -> None:
    for n in range(0, 60, 3):
        store.emit(crew, [tick(n), tick(n + 1), tick(n + 2)], **SMALL)
    every = list(store.stream_journal(crew))
    assert ticks(every) == list(range(60))
    current = ticks(store.read_journal(crew))
    assert current and current == list(range(60 - len(current), 60))  # the newest part
    assert len(current) < 60  # so it did rotate


def test_the_last_matching_lines_span_the_rotated_parts(store: Store,
                                                                 crew: str) -> None:
    for n in range(40):
        store.emit(crew, [tick(n)], **SMALL)
    odd = list(store.stream_journal(crew, match=lambda r: r.get("n", 0) % 2 == 1, last=15))
    assert ticks(odd) == list(range(11, 40, 2))
    late = list(store.stream_journal(crew, match=lambda r: r.get("n", -1) >= 25, last=100))
    assert ticks(late) == list(range(25, 40))


def test_a_line_that_is_no_record_is_skipped_and_said(store: Store, crew: str) -> None:
    store.emit(crew, [tick(1), {"event": ["not", "odd"]}, tick(2)], **SMALL)
    bad: list[bytes] = []
    assert ticks(list(store.stream_journal(crew, on_bad=bad.append))) == [1, 2]
    assert bad == []  # every record the store was given is a record


def _emit_ticks(root: Path, start: int, count: int, go: Any) -> None:
    go.wait(30)
    store = Workspace.at(root).store
    for n in range(start, start + count):
        store.emit(TEAM, [tick(n)], **SMALL)


@pytest.mark.timeout(60)
def test_a_follower_sees_every_new_line_across_rotations(store: Store, crew: str,
                                                         hermetic: Path) -> None:
    store.emit(crew, [tick(n) for n in range(30)], **SMALL)
    go = ctx.Event()
    writer = ctx.Process(target=_emit_ticks, args=(hermetic, 30, 300, go))
    writer.start()
    follower = store.stream_journal(crew, match=lambda r: r["event"] == "tick", follow=True,
                                    poll=0.05, on_caught_up=go.set)
    got = [next(follower)["n"] for _ in range(330)]  # the writer starts once caught up
    writer.join(30)
    assert writer.exitcode == 0 and go.is_set()
    follower.close()
    assert got == list(range(330)), "a line lost or doubled at a rotation"
    assert len(store.read_journal(crew)) < 300  # it rotated while followed


@pytest.mark.timeout(60)
def test_a_follower_ends_at_the_team_deleted_line(store: Store, crew: str) -> None:
    follower = store.stream_journal(crew, match=lambda r: r["event"] != "team_created",
                                    follow=True, poll=0.05)
    store.emit(crew, [tick(1)], **SMALL)
    assert next(follower)["n"] == 1
    store.emit(crew, [{"ts": 2000.0, "event": "team_deleted"}], **SMALL)
    assert [r["event"] for r in follower] == ["team_deleted"]  # and then it ends
