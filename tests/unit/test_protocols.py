"""teamd.protocols and teamd.pgroup: the waiting sequences and the process-group runner,
called as the library (what teamctl runs, beside the actions the lead's tools share), on
real files and real processes."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from teamd import actions, board, pgroup, protocols, requests, roster
from teamd.errors import Interrupted, TeamdError
from teamd.layout import Workspace
from tests.harness import gone, make_live, wait_until

TEAM = "t"


@pytest.fixture
def team(ws: Workspace) -> str:
    actions.create_team(ws, TEAM)
    for name in ("alice", "bob"):
        actions.spawn(ws, TEAM, name, "work")
    return TEAM


# -- the sequences -----------------------------------------------------------------------
def test_remove_of_a_member_not_running_answers_for_it_and_takes_it_out(
        ws: Workspace, team: str) -> None:
    task = board.create(ws, team, "alice's")
    assert board.claim(ws, team, "alice", task["id"]) is not None
    gone = protocols.remove(ws, team, "alice", timeout=5)
    assert gone["name"] == "alice"
    assert roster.find(roster.load(ws, team), "alice") is None
    assert board.get(ws, team, task["id"])["owner"] is None
    [record] = requests.list_requests(ws, team)
    assert (record["kind"], record["recipient"], record["status"]) == (
        "shutdown", "alice", "approved")
    assert record["answer_reason"] == "not running"


def test_a_rejection_ends_the_wait_with_its_reason(ws: Workspace, team: str,
                                                   live_process: psutil.Process) -> None:
    make_live(ws, team, "alice", live_process)
    rid = actions.shutdown(ws, team, "alice")["request"]["request_id"]
    actions.send(ws, team, "lead", "no", type_="shutdown_response", sender="alice",
                 request_id=rid, approve=False, reason="half-way through a migration")
    assert requests.get(ws, team, rid)["status"] == "rejected"
    with pytest.raises(TeamdError, match="alice rejected the shutdown: half-way through"):
        protocols.await_shutdown(ws, team, rid, "alice", 30)


def test_a_wait_that_times_out_says_what_is_pending(ws: Workspace, team: str,
                                                    live_process: psutil.Process) -> None:
    make_live(ws, team, "alice", live_process)
    rid = actions.shutdown(ws, team, "alice")["request"]["request_id"]
    said: list[str] = []
    with pytest.raises(TeamdError, match=rf"timed out after 0\.2s: alice has not answered "
                                         rf"shutdown request {rid}"):
        protocols.await_shutdown(ws, team, rid, "alice", 0.2, announce="asked",
                                 say=said.append)
    assert said == ["asked"]
    assert requests.get(ws, team, rid)["status"] == "pending"  # it stays pending


def test_delete_with_nobody_live_archives_the_team_at_once(ws: Workspace, team: str) -> None:
    said: list[str] = []
    archive = protocols.delete(ws, team, timeout=5, say=said.append)
    assert archive is not None and (archive / "events.jsonl").is_file()
    assert actions.team_gone(ws, team) and said == []  # nobody was live: nobody asked


def test_ctrl_c_in_a_wait_says_what_is_pending() -> None:
    with pytest.raises(Interrupted, match=r"^interrupted: alice is still up$") as caught, \
            protocols.interruptible(lambda: "alice is still up"):
        raise KeyboardInterrupt
    assert caught.value.exit_code == 130


# -- the process-group runner ------------------------------------------------------------
def test_run_feeds_stdin_keeps_stderr_and_kills_what_the_command_left(tmp_path: Path) -> None:
    ran = pgroup.run(["/bin/sh", "-c", "sleep 60 & echo $! > bg; cat >&2; echo to-stdout"],
                     tmp_path, pgroup.child_env(), timeout=30, cap=100, keep=50,
                     stdin=b"the event", stderr_only=True)
    assert (ran.output, ran.returncode, ran.timed_out) == ("the event", 0, False)
    left = int((tmp_path / "bg").read_text())
    wait_until(lambda: gone(left), 10, "the background sleep killed with its group")


def test_run_times_out_killing_the_group_and_cuts_long_output(tmp_path: Path) -> None:
    ran = pgroup.run(["/bin/sh", "-c", "head -c 5000 /dev/zero | tr '\\0' x; sleep 60"],
                     tmp_path, pgroup.child_env(), timeout=0.5, cap=100, keep=50)
    assert ran.timed_out and ran.returncode is None
    assert "characters omitted" in ran.output and len(ran.output) < 200
