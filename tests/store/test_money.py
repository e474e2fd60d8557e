"""Spend, the shared back-off and the call slots (CONTRACT §12), held by every store: spend
added by racing processes sums exactly, the back-off is one read-modify-write, at most
`limit` call slots are held at once across processes and a holder that dies frees its slot.
Written against `teamd.store.api.Store` only."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest

from teamd.store.api import Store
from tests.harness import wait_until
from tests.store.forked import ctx, results, run, start

TEAM = "crew"


def _add(doc: dict[str, Any] | None, amount: float) -> dict[str, Any]:
    return {"schema": 1, "spent_usd": (doc or {}).get("spent_usd", 0.0) + amount}


def test_spend_is_added_to_and_read(store: Store, crew: str) -> None:
    assert store.read_spend(TEAM) == {"schema": 1, "spent_usd": 0.0}
    assert store.add_spend(TEAM, lambda doc: _add(doc, 0.5)) == {"schema": 1, "spent_usd": 0.5}
    assert store.read_spend(TEAM) == {"schema": 1, "spent_usd": 0.5}


def _spend(store: Store, times: int, amount: float) -> int:
    for _ in range(times):
        store.add_spend(TEAM, lambda doc: _add(doc, amount))
    return times


@pytest.mark.timeout(120)
def test_spend_added_by_racing_processes_sums_exactly(store: Store, crew: str) -> None:
    amounts = [0.25, 0.5, 1.0, 2.0, 0.125, 4.0]  # exact in binary: the sum is exact too
    per = 40
    assert run(_spend, [(store, per, a) for a in amounts]) == [per] * len(amounts)
    assert store.read_spend(TEAM) == {"schema": 1, "spent_usd": per * sum(amounts)}


def test_the_backoff_is_read_modify_written(store: Store, crew: str) -> None:
    assert store.read_backoff() is None
    seen: list[Any] = []

    def hold(until: float) -> Any:
        def change(doc: dict[str, Any] | None) -> dict[str, Any] | None:
            seen.append(doc)
            return None if doc is not None and doc["until"] >= until else {
                "schema": 1, "until": until, "status": 429, "model": "m",
                "source": "retry-after"}
        return change

    before = time.time()
    store.update_backoff(hold(before + 30))
    found = store.read_backoff()
    assert found is not None
    doc, written = found
    assert doc["until"] == before + 30 and seen == [None]
    assert before - 1 <= written <= time.time() + 1  # when it was written, epoch seconds
    store.update_backoff(hold(before + 10))  # shorter: kept as it is
    assert seen[-1] == doc and (store.read_backoff() or ({},))[0] == doc
    store.update_backoff(hold(before + 60))
    assert (store.read_backoff() or ({},))[0]["until"] == before + 60


def _hold_off(store: Store, untils: list[float]) -> int:
    for until in untils:
        store.update_backoff(lambda doc, u=until: None if doc is not None
                             and doc["until"] >= u else {"schema": 1, "until": u})
    return len(untils)


@pytest.mark.timeout(120)
def test_racing_backoff_updates_keep_the_latest_until(store: Store, crew: str) -> None:
    untils = [[1000.0 + i + 7 * n for n in range(30)] for i in range(6)]
    run(_hold_off, [(store, u) for u in untils])
    found = store.read_backoff()
    assert found is not None and found[0]["until"] == max(max(u) for u in untils)


def _use_slots(store: Store, limit: int, calls: int, now: Any, peak: Any) -> list[int]:
    taken = []
    for _ in range(calls):
        with store.call_slot(limit) as index:
            with now.get_lock():
                now.value += 1
                peak.value = max(peak.value, now.value)
            taken.append(index)
            time.sleep(0.002)  # a call's length, so that holders overlap
            with now.get_lock():
                now.value -= 1
    return taken


@pytest.mark.timeout(120)
def test_at_most_limit_slots_are_held_at_once(store: Store, crew: str) -> None:
    now, peak = ctx.Value("i", 0), ctx.Value("i", 0)
    taken = run(_use_slots, [(store, 2, 30, now, peak)] * 6)
    assert 1 <= peak.value <= 2, peak.value
    assert {i for t in taken for i in t} <= {0, 1}
    assert sum(len(t) for t in taken) == 6 * 30


def _hold_slot(store: Store, limit: int, holding: Any, release: Any) -> int:
    with store.call_slot(limit) as index:
        holding.put((os.getpid(), index))
        assert release.wait(60)
    return index


def _wait_slot(store: Store, limit: int, blocked: Any) -> int:
    with store.call_slot(limit, between=blocked.set) as index:
        return index


@pytest.mark.timeout(120)
def test_a_slot_held_by_a_process_killed_is_freed(store: Store, crew: str) -> None:
    # one release event per holder: an event a killed process was waiting on is not set
    holding, releases, blocked = ctx.Queue(), [ctx.Event(), ctx.Event()], ctx.Event()
    holders, hout = start(_hold_slot, [(store, 2, holding, r) for r in releases])
    held = dict(holding.get(timeout=30) for _ in holders)
    assert sorted(held.values()) == [0, 1]
    waiter, wout = start(_wait_slot, [(store, 2, blocked)])
    assert blocked.wait(30)  # every slot taken: the third caller waits
    assert waiter[0].is_alive()
    victim, survivor = holders
    os.kill(victim.pid, signal.SIGKILL)
    wait_until(lambda: not victim.is_alive(), 30, "the holder to die")
    assert victim.exitcode == -signal.SIGKILL
    assert results(waiter, wout) == [held[victim.pid]]  # the dead holder's slot, freed
    releases[1].set()
    assert hout.get(timeout=30) == (1, "ok", held[survivor.pid])
    survivor.join(30)
    assert survivor.exitcode == 0
