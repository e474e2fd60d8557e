"""A member's own status writes (`teamd.agent.standing`, CONTRACT §4): once it has approved
its shutdown (`stopping`), nothing it does on the way out writes another status — a Claude
Code member's forwarder, in its own thread, may still refuse a last call at a budget; a
write the store could not take (its connection cut) is made again."""

from __future__ import annotations

import threading
from pathlib import Path

import psycopg
import pytest

from teamd import actions
from teamd.agent.forwarder import Forwarder
from teamd.agent.loop import Member
from teamd.layout import Workspace
from teamd.states import Status
from teamd.store.postgres.base import lock_name
from tests.harness import TEAM, make_live, make_team, member, wait_until
from tests.postgres import Cluster, database_name


def test_a_member_leaving_writes_no_other_status(ws: Workspace, workdir: Path) -> None:
    make_team(ws, workdir, "coder")
    make_live(ws, TEAM, "coder", status="active")
    actions.set_budget(ws, TEAM, "0.01", member="coder")
    fwd = Forwarder(Member(ws, TEAM, "coder"), upstream="http://127.0.0.1:9")
    fwd.m.standing.update(status=Status.STOPPING)
    # spent: a call the forwarder is asked for now is refused, as at any budget reached
    fwd.m.standing.update(usage_add={"input_tokens": 1}, cost_add=1.0)
    assert fwd.held() is not None
    left = member(ws, TEAM, "coder")
    assert left["status"] == "stopping"  # not moved back to `paused`
    assert left["last_error"].startswith("member budget reached")
    # before it leaves, the same refusal pauses it
    fwd.m.standing.status = Status.ACTIVE
    make_live(ws, TEAM, "coder", status="active")
    assert fwd.held() is not None and member(ws, TEAM, "coder")["status"] == "paused"


def test_a_status_write_whose_connection_is_cut_is_written_again(
        pg_url: str, pg_cluster: Cluster, hermetic: Path, workdir: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """A member's status write undone by a cut connection (a host's connections ended, a
    link that blinked) is tried again until the store takes it: left unwritten, the member
    would sit idle while the roster says `active` until its next change (the three-host
    test found one). The cut is made to land inside the write, at its commit: the test
    holds the team's journal lock, so the member's commit waits on it, and ends the
    member's connection there."""
    ws = Workspace.at(hermetic, store=pg_url)
    make_team(ws, workdir, "coder")
    make_live(ws, TEAM, "coder", status="active")
    m = Member(ws, TEAM, "coder")
    m.standing.status = Status.ACTIVE
    journal = lock_name("journal", TEAM)
    with psycopg.connect(pg_url, autocommit=True) as holder:
        holder.execute("BEGIN")
        holder.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (journal,))
        writer = threading.Thread(target=m.standing.update, kwargs={"status": Status.IDLE})
        writer.start()
        waiting = ("SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                   f"AND datname = '{database_name(pg_url)}'")
        wait_until(lambda: pg_cluster.sql(waiting), 30, "the status write waiting at its commit")
        [(pid,)] = pg_cluster.sql(waiting)
        pg_cluster.sql(f"SELECT pg_terminate_backend({int(pid)})")
        holder.execute("COMMIT")
    writer.join(30)
    assert not writer.is_alive()
    assert member(ws, TEAM, "coder")["status"] == "idle"
    assert "trying again" in caplog.text  # the cut landed: the first try was undone
