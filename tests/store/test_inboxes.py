"""The store's inboxes (CONTRACT §3): a delivery is all or none; the take is exactly once.

Written against `teamd.store.api.Store` only: every store must pass it unchanged. Senders
and readers are forked processes, as members and teamctl are.
"""

from __future__ import annotations

import multiprocessing
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from teamd import inbox
from teamd.files import Json
from teamd.layout import Workspace
from teamd.store.api import Store

TEAM = "crew"  # the `crew` fixture's team
ctx = multiprocessing.get_context("fork")


def message(mid: str, content: str = "hi") -> Json:
    return {"id": mid, "type": "message", "sender": "lead", "recipient": "alice",
            "content": content, "timestamp": time.time()}


def ids(found: list[Json]) -> list[str]:
    return [m["id"] for m in found]


def _deliver_batches(root: Path, batches: int, size: int) -> None:
    store = Workspace.at(root).store
    for b in range(batches):
        store.deliver(TEAM, "alice", [message(f"b{b}-{i}") for i in range(size)])


@pytest.mark.timeout(120)
def test_a_delivery_is_seen_all_or_none(store: Store, crew: str, hermetic: Path) -> None:
    """A reader at any moment sees each batch whole or not at all, never a part of it."""
    batches, size = 150, 6
    sender = ctx.Process(target=_deliver_batches, args=(hermetic, batches, size))
    sender.start()
    looks = 0
    while True:
        done = not sender.is_alive()
        seen = Counter(mid.split("-")[0] for mid in ids(store.peek(crew, "alice",
                                                                    inbox.judge())))
        looks += 1
        assert set(seen.values()) <= {size}, f"a batch seen in part: {seen}"
        if done:
            break
    sender.join(30)
    assert sender.exitcode == 0
    assert len(seen) == batches and looks > 1
    assert store.has_mail(crew, "alice")


def test_a_take_whose_consumer_raises_removes_nothing(store: Store, crew: str) -> None:
    store.deliver(crew, "alice", [message("m1"), message("m2"), message("m3")])
    handed: list[str] = []

    def crash(batch: list[Json]) -> None:
        handed.extend(ids(batch))
        raise RuntimeError("the member died before recording them")

    with pytest.raises(RuntimeError, match="died"):
        store.take(crew, "alice", crash, inbox.judge())
    assert handed == ["m1", "m2", "m3"]  # the fault happened with the messages in hand
    assert ids(store.peek(crew, "alice", inbox.judge())) == ["m1", "m2", "m3"]
    got: list[Json] = []
    store.take(crew, "alice", got.extend, inbox.judge())
    assert ids(got) == ["m1", "m2", "m3"]
    assert not store.has_mail(crew, "alice")


def test_a_take_leaves_what_keep_refuses_for_the_next(store: Store, crew: str) -> None:
    store.deliver(crew, "alice", [message(f"m{i}") for i in range(5)])
    got: list[Json] = []
    found = store.take(crew, "alice", got.extend, inbox.judge(),
                       keep=lambda m: m["id"] in ("m0", "m1"))
    assert ids(got) == ids(found.taken) == ["m0", "m1"]
    assert ids(store.peek(crew, "alice", inbox.judge())) == ["m2", "m3", "m4"]


def _send_many(root: Path, who: int, count: int) -> None:
    store = Workspace.at(root).store
    for i in range(count):
        store.deliver(TEAM, "alice", [message(f"s{who}-{i}")])


@pytest.mark.timeout(120)
def test_every_message_is_taken_exactly_once_while_senders_deliver(
        store: Store, crew: str, hermetic: Path) -> None:
    senders, count = 3, 200
    procs = [ctx.Process(target=_send_many, args=(hermetic, s, count)) for s in range(senders)]
    for proc in procs:
        proc.start()
    taken: list[str] = []
    takes = 0

    def record(batch: list[Json]) -> None:
        taken.extend(ids(batch))

    def take_some() -> None:
        nonlocal takes
        budget = {"left": 7}  # some takes leave messages behind: the rewrite path too

        def keep(_m: Json) -> bool:
            budget["left"] -= 1
            return budget["left"] >= 0 or takes % 2 == 0
        store.take(crew, "alice", record, inbox.judge(), keep=keep)
        takes += 1

    while any(p.is_alive() for p in procs):
        take_some()
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0
    while store.has_mail(crew, "alice"):
        take_some()
    want = {f"s{s}-{i}" for s in range(senders) for i in range(count)}
    assert len(taken) == len(want) and set(taken) == want, "lost or taken twice"
    for s in range(senders):  # each sender's messages in the order it sent them
        mine = [int(mid.split("-")[1]) for mid in taken if mid.startswith(f"s{s}-")]
        assert mine == sorted(mine)
    assert takes > 2


def test_a_bad_line_is_refused_and_moved_out_of_the_inbox(store: Store, crew: str) -> None:
    bad: dict[str, Any] = {"id": "b1", "sender": "lead"}  # no type: not a message
    store.deliver(crew, "alice", [message("m1"), bad, message("m1", "again"), message("m2")])
    assert ids(store.peek(crew, "alice", inbox.judge())) == ["m1", "m2"]  # skipped, not moved
    got: list[Json] = []
    found = store.take(crew, "alice", got.extend, inbox.judge())
    assert ids(got) == ["m1", "m2"] and got[0]["content"] == "hi"
    assert sorted((r.reason, r.id) for r, _ in found.refused) == [
        ("duplicate id", "m1"), ("missing field type", "b1")]
    assert not store.has_mail(crew, "alice")  # aside, out of the inbox: never read again
    assert store.describe_inbox(crew, "alice")


def test_the_inbox_mark_moves_with_every_write_and_cut(store: Store, crew: str) -> None:
    assert store.inbox_mark(crew, "alice") is None and not store.has_mail(crew, "alice")
    store.deliver(crew, "alice", [message("m1")])
    first = store.inbox_mark(crew, "alice")
    store.deliver(crew, "alice", [message("m2")])
    second = store.inbox_mark(crew, "alice")
    store.take(crew, "alice", lambda _batch: None, inbox.judge())
    third = store.inbox_mark(crew, "alice")
    assert None not in (first, second, third) and len({first, second, third}) == 3
    assert not store.has_mail(crew, "alice")


def _take_and_die(root: Path, handed: Any) -> None:
    """A member taking its inbox that is killed (SIGKILL, no clean-up) in the middle of
    recording the batch: the messages in hand, the take not finished."""
    import os
    import signal

    def die(batch: list[Json]) -> None:
        handed.send(ids(batch))  # a pipe's send is written before it returns
        os.kill(os.getpid(), signal.SIGKILL)

    Workspace.at(root).store.take(TEAM, "alice", die, inbox.judge())


@pytest.mark.timeout(60)
def test_a_taker_killed_mid_take_loses_nothing_and_holds_nothing(
        store: Store, crew: str, hermetic: Path) -> None:
    """kill -9 of a process inside `take` (its unit held, the messages in hand): every
    message is still there, taken exactly once by the next taker, and the inbox can be
    written and taken again (a dead holder holds nothing)."""
    store.deliver(crew, "alice", [message("m1"), message("m2")])
    reader, handed = ctx.Pipe(duplex=False)
    taker = ctx.Process(target=_take_and_die, args=(hermetic, handed))
    taker.start()
    taker.join(30)
    assert taker.exitcode == -9  # the kill landed, inside the take
    assert reader.poll(5) and reader.recv() == ["m1", "m2"]
    store.deliver(crew, "alice", [message("m3")])  # the inbox's unit is free again
    got: list[Json] = []
    store.take(crew, "alice", got.extend, inbox.judge())
    assert ids(got) == ["m1", "m2", "m3"]
    got.clear()
    store.take(crew, "alice", got.extend, inbox.judge())
    assert got == [] and not store.has_mail(crew, "alice")
