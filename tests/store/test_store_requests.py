"""Requests and "always" rules (CONTRACT §6, §11), held by every store: a record is created
once, answered once however many processes answer it at the same moment (a compare-and-set
in the request's unit), and an "always" rule is added once. Written against
`teamd.store.api.Store` only."""

from __future__ import annotations

import time
from typing import Any

import pytest

from teamd.store.api import Store
from tests.store.forked import race

TEAM = "crew"


def record(request_id: str, **fields: Any) -> dict[str, Any]:
    return {"schema": 1, "request_id": request_id, "kind": "shutdown", "sender": "lead",
            "recipient": "alice", "status": "pending", "created_at": time.time(),
            "resolved_at": None, "reason": None, "plan": None, "feedback": None, **fields}


def test_a_request_is_created_once(store: Store, crew: str) -> None:
    first = record("shutdown-1", reason="first")
    assert store.create_request(TEAM, first)
    assert not store.create_request(TEAM, record("shutdown-1", reason="second"))
    assert store.read_request(TEAM, "shutdown-1") == first  # the second changed nothing
    assert store.create_request(TEAM, record("shutdown-2"))
    assert sorted(r["request_id"] for r in store.list_requests(TEAM)) == [
        "shutdown-1", "shutdown-2"]
    assert store.read_request(TEAM, "shutdown-3") is None


def test_the_unit_of_a_request_that_does_not_exist(store: Store, crew: str) -> None:
    with store.request_unit(TEAM, "perm-0") as found:
        assert found is False
    assert store.list_requests(TEAM) == [] and store.read_request(TEAM, "perm-0") is None
    assert store.create_request(TEAM, record("perm-0", kind="permission"))
    with store.request_unit(TEAM, "perm-0") as found:
        assert found is True
        store.write_request(TEAM, record("perm-0", kind="permission", ran=True))
    assert (store.read_request(TEAM, "perm-0") or {}).get("ran") is True


def _answer(store: Store, request_id: str, me: str, go: Any) -> bool:
    """One answer as `requests.answer` gives it: a compare-and-set from pending."""
    assert go.wait(30)
    with store.request_unit(TEAM, request_id) as found:
        assert found
        doc = store.read_request(TEAM, request_id)
        assert doc is not None
        if doc["status"] != "pending":
            return False
        store.write_request(TEAM, {**doc, "status": "approved", "answer_reason": me,
                                   "resolved_at": time.time()})
        return True


@pytest.mark.timeout(120)
def test_racing_answers_from_processes_one_wins(store: Store, crew: str) -> None:
    names = [f"a{i}" for i in range(8)]
    for round_ in range(5):
        rid = f"shutdown-{round_}"
        assert store.create_request(TEAM, record(rid))
        won = race(_answer, [(store, rid, name) for name in names])
        assert won.count(True) == 1, won
        final = store.read_request(TEAM, rid)
        assert final is not None and final["status"] == "approved"
        assert final["answer_reason"] == names[won.index(True)]


def _create(store: Store, request_id: str, go: Any) -> bool:
    assert go.wait(30)
    return store.create_request(TEAM, record(request_id))


@pytest.mark.timeout(120)
def test_racing_creates_from_processes_one_wins(store: Store, crew: str) -> None:
    assert race(_create, [(store, "plan-1")] * 8).count(True) == 1
    assert [r["request_id"] for r in store.list_requests(TEAM)] == ["plan-1"]


def _add_always(store: Store, rules: list[str], go: Any) -> list[bool]:
    assert go.wait(30)
    return [store.add_always(TEAM, rule) for rule in rules]


@pytest.mark.timeout(120)
def test_always_rules_are_added_once(store: Store, crew: str) -> None:
    assert store.always_rules(TEAM) == []
    assert store.add_always(TEAM, "bash(git push)")
    assert not store.add_always(TEAM, "bash(git push)")
    assert store.always_rules(TEAM) == ["bash(git push)"]
    # racing processes: a rule they all add is added once, each one's own rules all kept
    added = race(_add_always, [(store, ["bash(make)", *[f"bash(w{i} {n})" for n in range(10)]])
                                for i in range(6)])
    assert [a[0] for a in added].count(True) == 1  # bash(make), once
    assert all(all(a[1:]) for a in added)
    rules = store.always_rules(TEAM)
    assert rules[0] == "bash(git push)" and rules.count("bash(make)") == 1
    assert sorted(rules[1:]) == sorted(
        ["bash(make)", *[f"bash(w{i} {n})" for i in range(6) for n in range(10)]])
