"""The leader's rules (CONTRACT §15), as functions of the records: who leads, which host has
the most room, which member needs a host, what stays on its own host, and that a member
goes only to a host that has its cwd."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from teamd import gitcmd, roster, workdirs
from teamd.errors import BadInput
from teamd.hosts import leader_of
from teamd.layout import Workspace
from teamd.placement import choose, counts, needs_host, place
from tests.harness import make_team, member


def host(name: str, lease: int, *, alive: bool = True, held: bool = True,
         max_members: int = 0, cwd_missing: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"name": name, "lease": lease, "alive": alive, "held": held,
            "max_members": max_members, "cwd_missing": list(cwd_missing)}


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


def test_a_host_that_lacks_the_cwd_is_never_chosen() -> None:
    hosts = [host("roomy", 1, cwd_missing=("/x",)), host("tight", 2, max_members=3)]
    assert choose(hosts, {}, "/y") == "roomy"
    assert choose(hosts, {"tight": 2}, "/x") == "tight"  # less room, but it has /x
    assert choose(hosts, {"tight": 3}, "/x") is None  # full
    hosts[1]["cwd_missing"] = ["/w", "/x"]
    assert choose(hosts, {}, "/x") is None  # room, but not /x
    assert choose(hosts, {}) == "roomy"  # no cwd asked: any with room


def test_place_skips_hosts_without_the_cwd_then_waits_until_one_has_it(
        ws: Workspace, workdir: Path) -> None:
    team = make_team(ws, workdir, "a", team="farm")
    cwd = str(workdir.resolve())
    h1 = host("h1", 1, cwd_missing=(cwd,))
    hosts = {"h1": h1, "h2": host("h2", 2, max_members=1)}
    assert place(ws, team, config(ws, team), hosts, {}) == 1
    assert where(ws, team) == ("h2", "pending", None)  # h1 has more room, not the cwd

    # back from h2 (it lacked it too, and said so): no alive host has it
    hosts["h2"]["cwd_missing"] = [cwd]
    unplace(ws, team, "a")
    assert place(ws, team, config(ws, team), hosts, {}) == 1
    assert where(ws, team) == (None, "pending", workdirs.nowhere(cwd))
    assert place(ws, team, config(ws, team), hosts, {}) == 0  # told once: nothing written

    h1["cwd_missing"] = []  # a mount appeared on h1: its next heartbeat says so
    load: dict[str, int] = {}
    assert place(ws, team, config(ws, team), hosts, load) == 1
    assert where(ws, team) == ("h1", "pending", None) and load == {"h1": 1}


def test_a_taken_over_member_no_host_can_run_waits_with_no_host(
        ws: Workspace, workdir: Path) -> None:
    team = make_team(ws, workdir, "a", team="farm")
    cwd = str(workdir.resolve())
    roster.update_member(ws, team, "a", lambda m, _c: m.update(
        host="dead", status="idle", pid=4321, pid_create_time=1.0))
    hosts = {"dead": host("dead", 1, alive=False, held=False),
             "h2": host("h2", 2, cwd_missing=(cwd,))}
    assert place(ws, team, config(ws, team), hosts, {}) == 1
    assert where(ws, team) == (None, "pending", workdirs.nowhere(cwd))
    assert member(ws, team, "a")["pid"] is None  # its process was the dead host's


def test_a_member_pinned_to_a_host_without_its_cwd_is_never_moved(
        ws: Workspace, workdir: Path) -> None:
    team = make_team(ws, workdir, "p", team="farm")
    roster.update(ws, team, lambda c: c["members"][0].update(pinned_host="h1"))
    hosts = {"h1": host("h1", 1, cwd_missing=(str(workdir.resolve()),)), "h2": host("h2", 2)}
    assert place(ws, team, config(ws, team), hosts, {}) == 1
    assert where(ws, team, "p")[0] == "h1"  # its pin says whether it can run it
    told = workdirs.missing_on("h1", str(workdir.resolve()))  # as h1 says it
    roster.update_member(ws, team, "p", lambda m, _c: m.update(last_error=told))
    assert place(ws, team, config(ws, team), hosts, {}) == 0
    assert where(ws, team, "p") == ("h1", "pending", told)


def test_a_missing_directory_is_listed_until_it_exists(tmp_path: Path) -> None:
    missing = workdirs.Missing()
    later = tmp_path / "later"
    assert missing.add(str(later)) and not missing.add(str(later))  # news once
    assert missing.listed() == [str(later)]
    later.mkdir()
    assert missing.listed() == []
    assert missing.add(str(later))  # news again, should it go


def config(ws: Workspace, team: str) -> dict[str, Any]:
    return roster.load(ws, team)


def where(ws: Workspace, team: str, name: str = "a") -> tuple[Any, ...]:
    m = member(ws, team, name)
    return m.get("host"), m["status"], m["last_error"]


def unplace(ws: Workspace, team: str, name: str) -> None:
    roster.update_member(ws, team, name, lambda m, _c: m.update(host=None))
