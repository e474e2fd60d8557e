"""The leader's rules (CONTRACT §15), as functions of the records: who leads, which host has
the most room, which member needs a host, and what stays on its own host."""

from __future__ import annotations

from typing import Any

import pytest

from teamd import gitcmd
from teamd.errors import BadInput
from teamd.hosts import leader_of
from teamd.placement import choose, counts, needs_host


def host(name: str, lease: int, *, alive: bool = True, held: bool = True,
         max_members: int = 0) -> dict[str, Any]:
    return {"name": name, "lease": lease, "alive": alive, "held": held,
            "max_members": max_members}


def test_the_leader_is_the_alive_host_that_joined_first() -> None:
    hosts = {"a": host("a", 7), "b": host("b", 3), "c": host("c", 1, alive=False)}
    assert leader_of(hosts) == "b"
    assert leader_of({"c": host("c", 1, alive=False)}) is None
    assert leader_of({"b": host("b", 3, held=False)}) is None  # taken over


def test_most_room_then_fewest_members_then_name() -> None:
    hosts = [host("a", 1, max_members=4), host("b", 2, max_members=10), host("c", 3),
             host("d", 4, alive=False)]
    assert choose(hosts, {"a": 1, "b": 9, "c": 50}) == "c"  # no limit: the most room
    capped = hosts[:2]
    assert choose(capped, {"a": 1, "b": 9}) == "a"  # 3 left against 1
    assert choose(capped, {"a": 4, "b": 10}) is None  # full
    assert choose([host("x", 1), host("y", 2)], {"x": 2, "y": 1}) == "y"
    assert choose([host("y", 1), host("x", 2)], {}) == "x"


def test_which_members_need_a_host() -> None:
    hosts = {"a": host("a", 1), "gone": host("gone", 2, alive=False, held=False),
             "late": host("late", 3, alive=False)}
    assert needs_host({"desired": "running"}, hosts)
    assert not needs_host({"desired": "stopped"}, hosts)  # placed when started
    assert not needs_host({"host": "a", "desired": "running"}, hosts)
    assert needs_host({"host": "gone", "desired": "running"}, hosts)  # taken over
    assert not needs_host({"host": "late"}, hosts)  # dead, not yet taken over
    assert needs_host({"host": "unknown"}, hosts)
    assert needs_host({"pinned_host": "a", "host": None}, hosts)
    pinned_dead = {"pinned_host": "gone", "host": "gone", "desired": "running"}
    assert needs_host({**pinned_dead, "status": "idle"}, hosts)  # to be told to wait
    assert needs_host({**pinned_dead, "status": "sleeping"}, hosts)
    assert not needs_host({**pinned_dead, "status": "pending",  # told: it waits
                           "last_error": "waiting for host gone"}, hosts)
    assert not needs_host({**pinned_dead, "desired": "stopped", "status": "shutdown"}, hosts)
    assert not needs_host({**pinned_dead, "host": "a", "pinned_host": "a"}, hosts)
    # dead, not yet taken over: its process may still run there; nothing is changed yet
    assert not needs_host({**pinned_dead, "host": "late", "pinned_host": "late",
                           "status": "idle"}, hosts)


def test_counts_only_members_to_run() -> None:
    roster = {"members": [{"host": "a", "desired": "running"},
                          {"host": "a", "desired": "stopped"}, {"desired": "running"}]}
    assert counts([roster]) == {"a": 1}


def test_a_worktree_on_another_host_is_that_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAMD_HOST", "here")
    member = {"name": "w", "worktree": {"path": "/x", "branch": "b"}, "pinned_host": "there"}
    with pytest.raises(BadInput, match="on host there: run this there"):
        gitcmd.worktree_of({"members": [member]}, "w")
    assert gitcmd.worktree_of({"members": [{**member, "pinned_host": "here"}]}, "w")["path"] \
        == "/x"
