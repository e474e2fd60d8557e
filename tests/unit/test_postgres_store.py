"""What only the PostgreSQL store has (CONTRACT §15, §17), on the private cluster
(tests/postgres.py): its schema installed, found and migrated, a newer one refused; a URL
that cannot work refused in one line with the password never shown, and an unreachable
server told apart; a commit counted as a durable write by the crash points; a connection
never shared across a fork; connections cut by the server are opened again (a feed's says
it lost changes). The promises every store keeps are the contract suite's (tests/store/)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest

from teamd import budget, roster
from teamd.errors import BadInput
from teamd.store.changes import Change, Kind
from teamd.store.errors import StoreUnreachable
from teamd.store.postgres import PostgresStore, install_schema, schema
from teamd.store.postgres.connect import TCP_SETTINGS
from teamd.store.postgres.db import lost
from tests.harness import wait_until
from tests.postgres import Cluster, database_name
from tests.store.forked import ctx

SPEND = {"schema": budget.SCHEMA, "spent_usd": 0.0}
SECRET = "s3cr3t-pw"


def store_at(url: str, root: Path) -> PostgresStore:
    return PostgresStore(url, root)


def teamctl(root: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TEAMD_STORE": url}
    return subprocess.run([sys.executable, "-m", "teamctl.cli", "--root", str(root), *args],
                          env=env, capture_output=True, text=True, timeout=60, check=False)


def test_the_schema_is_created_once_and_found_after(pg_cluster: Cluster) -> None:
    name = f"bare{os.getpid()}"
    pg_cluster.sql(f"CREATE DATABASE {name}")
    try:
        url = pg_cluster.url(name)
        assert install_schema(url) is True
        assert install_schema(url) is False  # run again: there already, exit 0
        assert pg_cluster.sql("SELECT version FROM teamd_schema", name) == [(schema.VERSION,)]
    finally:
        pg_cluster.sql(f"DROP DATABASE {name} WITH (FORCE)")


def test_an_older_schema_is_migrated_in_one_step(pg_url: str, pg_cluster: Cluster,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    db = database_name(pg_url)
    monkeypatch.setattr(schema, "VERSION", schema.VERSION + 1)
    monkeypatch.setitem(schema.MIGRATIONS, schema.VERSION - 1,
                        ("ALTER TABLE teams ADD COLUMN migrated boolean",))
    assert install_schema(pg_url) is False
    assert pg_cluster.sql("SELECT version FROM teamd_schema", db) == [(schema.VERSION,)]
    assert pg_cluster.sql("SELECT count(*) FROM information_schema.columns WHERE "
                          "table_name = 'teams' AND column_name = 'migrated'", db) == [(1,)]


def test_a_newer_schema_is_refused_and_nothing_written(pg_url: str, pg_cluster: Cluster,
                                                        hermetic: Path) -> None:
    db = database_name(pg_url)
    pg_cluster.sql(f"UPDATE teamd_schema SET version = {schema.VERSION + 1}", db)
    with pytest.raises(BadInput, match="newer than this teamd"):
        install_schema(pg_url)
    done = teamctl(hermetic, pg_url, "create", "shop")
    assert done.returncode == 2 and "newer than this teamd" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert pg_cluster.sql("SELECT count(*) FROM teams", db) == [(0,)]


def test_a_wrong_password_is_one_line_exit_2_never_showing_it(
        pg_url: str, pg_cluster: Cluster, hermetic: Path) -> None:
    db = database_name(pg_url)
    good = pg_cluster.password_url(db, f"u{os.getpid()}", SECRET)
    assert store_at(good, hermetic).team_names() == []  # the right one works
    wrong = good.replace(SECRET, "not-" + SECRET)
    with pytest.raises(BadInput, match="password authentication failed") as caught:
        store_at(wrong, hermetic).team_names()
    assert SECRET not in str(caught.value) and "***" in str(caught.value)
    assert store_at(good, hermetic).description == good.replace(SECRET, "***")
    done = teamctl(hermetic, wrong, "create", "shop")
    assert done.returncode == 2, done
    assert len(done.stderr.strip().splitlines()) == 1 and SECRET not in done.stderr
    assert pg_cluster.sql("SELECT count(*) FROM teams", db) == [(0,)]


@pytest.mark.parametrize("how", ["no-database", "bad-option", "bad-port"])
def test_a_url_that_cannot_work_is_bad_input(pg_cluster: Cluster, hermetic: Path,
                                             how: str) -> None:
    url = {"no-database": pg_cluster.url("nosuchdb"),
           "bad-option": pg_cluster.url() + "&nosuchoption=1",
           "bad-port": "postgresql://postgres@localhost:notaport/x"}[how]
    with pytest.raises(BadInput):
        store_at(url, hermetic).team_names()


def test_an_unreachable_server_is_exit_1(tmp_path: Path, hermetic: Path) -> None:
    url = f"postgresql://postgres@/teamd?host={tmp_path}"  # no server listens there
    with pytest.raises(StoreUnreachable) as caught:
        store_at(url, hermetic).team_names()
    assert caught.value.exit_code == 1
    done = teamctl(hermetic, url, "status")
    assert done.returncode == 1 and "cannot reach the store" in done.stderr, done


def test_a_connection_notices_a_silent_link_in_seconds_unless_its_url_says(
        pg_url: str, hermetic: Path) -> None:
    """TCP keepalives and a user timeout on every connection (libpq's settings; a dropped
    link then fails a call in seconds, not the kernel's minutes), and a URL's own kept."""
    made = store_at(pg_url, hermetic).db.conn().info.get_parameters()
    assert {k: made.get(k) for k in TCP_SETTINGS} == {
        k: str(v) for k, v in TCP_SETTINGS.items()}
    own = store_at(pg_url + "&keepalives_idle=42", hermetic).db.conn().info.get_parameters()
    assert own["keepalives_idle"] == "42" and own["tcp_user_timeout"] == "10000"


def _deliver(url: str, root: Path) -> None:
    store_at(url, root).deliver("t", "ann", [{"id": "m1", "type": "message"}])


@pytest.mark.parametrize("at", ["1", "after:1"])
def test_a_commit_is_a_durable_write_for_the_crash_points(
        pg_url: str, hermetic: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        at: str) -> None:
    store = store_at(pg_url, hermetic)
    assert store.create_team("t", roster.new_roster("t", ""), SPEND)
    log = tmp_path / "crash.log"
    monkeypatch.setenv("TEAMD_CRASH_AT", at)
    monkeypatch.setenv("TEAMD_CRASH_LOG", str(log))
    child = ctx.Process(target=_deliver, args=(pg_url, hermetic))
    child.start()  # a forked child reads the variables again
    child.join(30)
    assert child.exitcode == -9  # killed at its first commit
    assert '"fired": 1' in log.read_text() and '"what": "commit"' in log.read_text()
    assert store.has_mail("t", "ann") is at.startswith("after:")  # before: nothing of it


def test_a_forked_child_opens_its_own_connection(pg_url: str, hermetic: Path) -> None:
    store = store_at(pg_url, hermetic)
    mine = store.db.one("SELECT pg_backend_pid()")
    out = ctx.Queue()
    child = ctx.Process(target=lambda: out.put(store.db.one("SELECT pg_backend_pid()")))
    child.start()
    theirs = out.get(timeout=30)
    child.join(30)
    assert child.exitcode == 0 and theirs != mine
    assert store.db.one("SELECT pg_backend_pid()") == mine  # the child left ours alone


def test_a_feed_whose_connection_is_cut_says_so_and_listens_again(
        pg_url: str, pg_cluster: Cluster, hermetic: Path) -> None:
    store = store_at(pg_url, hermetic)
    assert store.create_team("t", roster.new_roster("t", ""), SPEND)
    with store.changes(["t"]) as feed:
        assert pg_cluster.terminate(database_name(pg_url)) >= 2  # the feed's and ours
        assert feed.wait(10)
        assert feed.drain() == ([], True)  # lost: read everything again
        assert store.team_names() == ["t"]  # this thread's was cut too: opened again
        store.deliver("t", "ann", [{"id": "m1", "type": "message"}])
        seen: list[Change] = []
        while Change(Kind.INBOX, "t", "ann") not in seen and feed.wait(10):
            seen += feed.drain()[0]
        assert Change(Kind.INBOX, "t", "ann") in seen


def _cut_own_connection(store: PostgresStore, pg_cluster: Cluster) -> None:
    """End, from the server's side, the connection this thread's unit runs on (as a
    takeover's `pg_terminate_backend` or a dropped link does), and wait until it is gone."""
    pid = store.db.one("SELECT pg_backend_pid()")
    pg_cluster.sql(f"SELECT pg_terminate_backend({int(pid)})")
    wait_until(lambda: not pg_cluster.sql(
        f"SELECT 1 FROM pg_stat_activity WHERE pid = {int(pid)}"), 10, "the backend gone")


def test_a_unit_whose_connection_is_cut_is_undone_whole(
        pg_url: str, pg_cluster: Cluster, hermetic: Path) -> None:
    """A unit is one transaction even when its connection is cut under it and the failed
    statement is let go (a look that may fail, as a tool's may): no later statement of
    the unit runs on a new connection, where it would commit alone, without the unit's
    locks and fence, while the rest rolls back (a message taken from an inbox without
    its session records: lost)."""
    store = store_at(pg_url, hermetic)
    assert store.create_team("t", roster.new_roster("t", ""), SPEND)
    line = [{"ts": 1.0, "event": "task_completed", "task_id": 1}]
    with pytest.raises(StoreUnreachable), store.board_unit("t"):
        task_id = store.next_task_id("t")
        _cut_own_connection(store, pg_cluster)
        with contextlib.suppress(StoreUnreachable):
            store.read_task("t", 99)  # fails, and is let go
        store.write_task("t", {"id": task_id, "subject": "s", "status": "completed"})
        store.emit("t", line, max_bytes=1 << 20, keep=1)  # appended at the commit
    assert store.task_ids("t") == [] and store.read_journal("t") == []
    assert store.top_task_id("t") == 0


def test_a_connection_the_server_ended_mid_pipeline_counts_as_lost(
        pg_url: str, hermetic: Path) -> None:
    """Ended by the server in the middle of a commit's pipeline, a connection may not look
    broken yet, and psycopg raises "cannot exit pipeline mode while busy" with the
    server's AdminShutdown as its context (seen in the three-host test, where a member's
    tool then failed with a raw OperationalError instead of "cannot reach the store"):
    that is the connection lost too — closed, so it is never used again."""
    store = store_at(pg_url, hermetic)
    conn = store.db.conn()
    busy = psycopg.OperationalError("cannot exit pipeline mode while busy")
    busy.__context__ = psycopg.errors.AdminShutdown(
        "terminating connection due to administrator command")
    assert not conn.broken and lost(busy, conn) and conn.closed
    assert store.team_names() == []  # the next unit opens a new one
    other = store.db.conn()
    assert not lost(psycopg.OperationalError("a statement's own trouble"), other)
    assert not other.closed


def test_a_transaction_undone_to_break_a_deadlock_is_store_unreachable(
        pg_url: str, hermetic: Path) -> None:
    """Two units taking two locks in opposite orders: PostgreSQL ends one of them after
    `deadlock_timeout`, undone whole. That one raises StoreUnreachable (nothing written,
    try again: what a supervisor's loop and a member's retry already handle), not a raw
    psycopg error that would end the process."""
    store = store_at(pg_url, hermetic)
    both = threading.Barrier(2)
    outcome: dict[str, BaseException | None] = {}

    def take(first: str, second: str) -> None:
        try:
            with store.db.unit(first):
                both.wait(10)
                with store.db.unit(second):
                    pass
            outcome[first] = None
        except BaseException as exc:
            outcome[first] = exc

    threads = [threading.Thread(target=take, args=order) for order in (("a", "b"), ("b", "a"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    errors = [e for e in outcome.values() if e is not None]
    assert len(outcome) == 2 and len(errors) == 1, outcome
    assert isinstance(errors[0], StoreUnreachable) and "40P01" in str(errors[0])


def _nest(url: str, root: Path, roster_first: bool, rounds: int, go: object) -> int:
    """Units nested two ways, each writing a state and journaling: the roster's unit
    around the member's with the journal line between (as teamd writes a status), or the
    member's alone with the line inside it (as a member does)."""
    go.wait(30)  # type: ignore[attr-defined]
    store = store_at(url, root)
    line = [{"ts": 1.0, "event": "x"}]
    for n in range(rounds):
        if roster_first:
            with store.roster_unit("t"):
                store.emit("t", line, max_bytes=1 << 20, keep=1)
                with store.member_unit("t", "ann"):
                    store.write_state("t", "ann", {"name": "ann", "n": n})
        else:
            with store.member_unit("t", "ann"):
                store.write_state("t", "ann", {"name": "ann", "n": n})
                store.emit("t", line, max_bytes=1 << 20, keep=1)
                store.deliver("t", "ann", [{"id": f"m{os.getpid()}-{n}", "type": "message"}])
    return rounds


@pytest.mark.timeout(120)
def test_units_nested_two_ways_with_appends_never_deadlock(pg_url: str,
                                                           hermetic: Path) -> None:
    """An append's lock is taken at the commit: a journal line written inside a roster
    unit does not hold the journal while the member's unit is waited for, so a member
    journaling inside its own unit cannot wait on it in turn (PostgreSQL would abort one
    of the two as a deadlock)."""
    from tests.store.forked import race

    store = store_at(pg_url, hermetic)
    assert store.create_team("t", roster.new_roster("t", ""), SPEND)
    done = race(_nest, [(pg_url, hermetic, i % 2 == 0, 60) for i in range(4)])
    assert done == [60] * 4
    assert len(store.read_journal("t")) == 4 * 60


def _hold_claim(url: str, root: Path, held: Any, release: Any) -> bool:
    """Hold a claim of task 1 until told to let go."""
    with store_at(url, root).claim_unit("t", 1) as found:
        assert found is not None and found["id"] == 1
        held.set()
        assert release.wait(30)
    return True


@pytest.mark.timeout(120)
def test_a_claim_of_a_task_another_claim_holds_is_lost_at_once(pg_url: str,
                                                               hermetic: Path) -> None:
    """SKIP LOCKED (CONTRACT §15): while a claim of task 1 is under way in another process,
    a claim of task 1 yields None without waiting for it, a claim of task 2 goes on beside
    it, and once the first is over task 1 can be claimed again."""
    from tests.store.forked import results, start

    store = store_at(pg_url, hermetic)
    assert store.create_team("t", roster.new_roster("t", ""), SPEND)
    with store.board_unit("t"):
        for _ in range(2):
            task_id = store.next_task_id("t")
            store.write_task("t", {"schema": 1, "id": task_id, "status": "pending",
                                   "owner": None, "blocked_by": []})
    held, release = ctx.Event(), ctx.Event()
    procs, out = start(_hold_claim, [(pg_url, hermetic, held, release)])
    try:
        assert held.wait(30)
        with store.claim_unit("t", 1) as found:
            assert found is None  # the other holds it: lost, not waited for
        with store.claim_unit("t", 2) as other:
            assert other is not None and other["id"] == 2
    finally:
        release.set()
    assert results(procs, out) == [True]
    with store.claim_unit("t", 1) as again:
        assert again is not None and again["id"] == 1
