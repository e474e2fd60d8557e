"""The hosts of a PostgreSQL store (CONTRACT §15), on the private cluster: one claim per host
name, a heartbeat stamped by the database's clock, a host dead once it is older than the
timeout, one leader at a time, and a takeover that fences the host off — a unit begun
before it finishes first, every unit after it is refused, even in a forked member; and the
record lists the members' directories the host does not have, until they appear."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from teamd import budget, roster, workdirs
from teamd.hosts import Host, here_record, leader_of
from teamd.layout import Workspace
from teamd.settings import Settings
from teamd.store.changes import Kind
from teamd.store.errors import LeaseLost
from teamd.store.postgres import PostgresStore, schema

SPEND = {"schema": budget.SCHEMA, "spent_usd": 0.0}


def test_one_teamd_per_host_name_and_a_new_lease_each_join(pg_url: str, tmp_path: Path) -> None:
    a, b = PostgresStore(pg_url, tmp_path), PostgresStore(pg_url, tmp_path)
    first = a.join_host("h1", {"pid": 1})
    assert first is not None
    assert b.join_host("h1", {"pid": 2}) is None  # the name is claimed
    other = b.join_host("h2", {"pid": 2})
    assert other is not None and other.lease != first.lease
    hosts = {h["name"]: h for h in a.list_hosts(30)}
    assert set(hosts) == {"h1", "h2"} and all(h["alive"] and h["held"] for h in hosts.values())
    assert hosts["h1"]["pid"] == 1
    a.leave_host(first)  # a clean stop: dead at once, and the name free again
    assert not {h["name"]: h for h in b.list_hosts(30)}["h1"]["alive"]
    again = b.join_host("h1", {"pid": 3})
    assert again is not None and again.lease > other.lease


def test_a_host_is_dead_once_its_heartbeat_is_older_than_the_timeout(pg_url: str,
                                                                     tmp_path: Path) -> None:
    store = PostgresStore(pg_url, tmp_path)
    claim = store.join_host("h1", {})
    assert claim is not None
    time.sleep(0.3)  # the age to measure: the database's clock moves on
    [h] = store.list_hosts(0.2)
    assert not h["alive"] and h["age"] >= 0.3
    store.beat_host(claim, {"members": 4})
    [h] = store.list_hosts(0.2)
    assert h["alive"] and h["members"] == 4


def test_the_leader_is_the_first_alive_host_until_it_goes_silent(pg_url: str,
                                                                 tmp_path: Path) -> None:
    a, b = PostgresStore(pg_url, tmp_path), PostgresStore(pg_url, tmp_path)
    ca, cb = a.join_host("h1", {}), b.join_host("h2", {})
    assert ca is not None and cb is not None

    def leader(timeout: float) -> str | None:
        return leader_of({h["name"]: h for h in b.list_hosts(timeout)})

    assert leader(30) == "h1"
    time.sleep(0.3)
    b.beat_host(cb)  # h1 silent (a freeze, a kill), h2 beating
    assert leader(0.25) == "h2"


def test_a_takeover_refuses_every_later_unit_of_the_host(
        pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAMD_HOST", "h1")  # this process's connections are host h1's
    host = PostgresStore(pg_url, tmp_path)
    claim = host.join_host("h1", {})
    assert claim is not None
    host.create_team("t", roster.new_roster("t", ""), SPEND)
    host.fence()  # held: passes

    # a unit of the host stopped half-way (a frozen host): ended by the takeover, its
    # locks freed, nothing of it committed
    inside, outcome = threading.Event(), []

    def frozen_unit() -> None:
        try:
            with host.db.unit():
                inside.set()
                time.sleep(2)
                host.db.changed(Kind.SPEND, "t")
                host.db.execute("UPDATE team_docs SET doc = doc WHERE team = 't'")
            outcome.append("committed")
        except BaseException as exc:
            outcome.append(type(exc).__name__)

    worker = threading.Thread(target=frozen_unit)
    worker.start()
    assert inside.wait(10)  # its connection is h1's too
    monkeypatch.setenv("TEAMD_HOST", "leader")
    leader = PostgresStore(pg_url, tmp_path)
    assert not leader.take_over_host("h1", claim.lease, 30, lambda: None)  # alive: no
    moved: list[bool] = []
    assert leader.take_over_host("h1", claim.lease, 0, lambda: moved.append(True))
    assert moved == [True]  # the moves, in the takeover's transaction
    worker.join()
    assert outcome and outcome != ["committed"], outcome
    assert not leader.take_over_host("h1", claim.lease, 0, lambda: None)  # once

    with pytest.raises(LeaseLost):
        host.add_spend("t", lambda doc: {"schema": 1, "spent_usd": 9.0})
    with pytest.raises(LeaseLost):  # and from then on, without asking the database
        host.fence()
    assert leader.read_spend("t") == SPEND  # nothing of it written

    with pytest.raises(LeaseLost):
        host.beat_host(claim)
    [h] = leader.list_hosts(30)
    assert not h["held"] and not h["alive"]


def test_a_forked_member_is_fenced_with_its_hosts_lease(pg_url: str, tmp_path: Path) -> None:
    host = PostgresStore(pg_url, tmp_path)
    claim = host.join_host("h1", {})
    assert claim is not None
    host.create_team("t", roster.new_roster("t", ""), SPEND)
    read, write = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the member: fenced as its teamd is, on a connection of its own
        code = 1
        try:
            host.fence()
            os.write(write, b"1")
            os.read(go_r, 1)
            try:
                host.add_spend("t", lambda doc: {"schema": 1, "spent_usd": 5.0})
            except LeaseLost:
                code = 0
        finally:
            os._exit(code)
    assert os.read(read, 1) == b"1"
    leader = PostgresStore(pg_url, tmp_path)
    assert leader.take_over_host("h1", claim.lease, 0, lambda: None)
    os.write(go_w, b"1")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert leader.read_spend("t") == SPEND


def test_version_1_gains_the_hosts_in_one_migration(pg_url: str, tmp_path: Path) -> None:
    store = PostgresStore(pg_url, tmp_path)
    conn = store.db.fresh()
    for statement in ("DROP FUNCTION teamd_fence", "DROP TABLE hosts", "DROP TABLE leases",
                      "DROP SEQUENCE lease_numbers", "UPDATE teamd_schema SET version = 1"):
        conn.execute(statement)
    assert schema.ensure(conn, pg_url) is False
    assert schema.found_version(conn) == schema.VERSION == 2
    assert PostgresStore(pg_url, tmp_path).join_host("h1", {}) is not None


def test_a_host_s_record_lists_the_cwds_it_lacks_until_they_appear(
        pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAMD_HOST", "h1")
    ws = Workspace.at(tmp_path, store=pg_url)
    claim = ws.store.claim_supervisor(here_record(Settings()))
    assert claim is not None
    host = Host(ws, Settings(), claim)
    [record] = ws.store.list_hosts(30)
    assert record[workdirs.KEY] == []  # from its join
    mount = tmp_path / "mnt" / "src"
    assert host.lacks(str(mount), 0)  # said at once, before the member is handed back
    [record] = ws.store.list_hosts(30)
    assert record[workdirs.KEY] == [str(mount)]
    mount.mkdir(parents=True)  # a mount that appeared
    host.beat(time.time(), 0)
    [record] = ws.store.list_hosts(30)
    assert record[workdirs.KEY] == []
