"""The supervisor's claim and records (`claim_supervisor`, `supervisor_info`, paging's
record): one process at a time holds the claim, and it is freed when its holder dies."""

from __future__ import annotations

import os
import signal
from typing import Any

from teamd import budget, roster
from teamd.store.api import Store
from tests.store import forked


def info(**more: Any) -> dict[str, Any]:
    return {"schema": 1, "pid": os.getpid(), "version": "test", **more}


def claim(store: Store, everyone: Any = None) -> bool:
    """In a process of its own: did it become the supervisor? Held until `everyone` (a
    barrier) has tried."""
    won = store.claim_supervisor(info(pid=os.getpid())) is not None
    if everyone is not None:
        everyone.wait(60)
    return won


def claim_and_hold(store: Store, ready: Any) -> None:
    """Claim, say so, and hold the claim until killed."""
    handle = store.claim_supervisor(info(pid=os.getpid()))
    ready.put(handle is not None)
    signal.pause()


def test_of_processes_claiming_at_once_one_wins(store: Store) -> None:
    everyone = forked.ctx.Barrier(4)
    assert sorted(forked.run(claim, [(store, everyone)] * 4)) == [False, False, False, True]


def test_the_claim_is_freed_when_its_holder_dies(store: Store) -> None:
    ready = forked.ctx.Queue()
    holder = forked.ctx.Process(target=claim_and_hold, args=(store, ready))
    holder.start()
    try:
        assert ready.get(timeout=60) is True
        assert store.claim_supervisor(info()) is None  # held by the other process
        assert (store.supervisor_info() or {})["pid"] == holder.pid
    finally:
        os.kill(holder.pid or 0, signal.SIGKILL)
        holder.join(10)
    assert holder.exitcode == -signal.SIGKILL
    handle = store.claim_supervisor(info())
    assert handle is not None
    store.release_supervisor(handle)


def test_the_record_follows_the_claim(store: Store) -> None:
    assert store.supervisor_info() is None
    handle = store.claim_supervisor(info(errors={}))
    assert store.supervisor_info() == info(errors={})
    store.write_supervisor_info(info(errors={"t": {"ts": 1.0}}))
    assert store.supervisor_info() == info(errors={"t": {"ts": 1.0}})
    store.release_supervisor(handle)
    assert store.supervisor_info() is None
    assert forked.run(claim, [(store,)]) == [True]  # released: another may claim


def test_pagings_record(store: Store) -> None:
    assert store.create_team("t", roster.new_roster("t", ""),
                             {"schema": budget.SCHEMA, "spent_usd": 0.0})
    assert store.read_paged("t") is None
    store.write_paged("t", {"schema": 1, "paged": ["m1"]})
    assert store.read_paged("t") == {"schema": 1, "paged": ["m1"]}
