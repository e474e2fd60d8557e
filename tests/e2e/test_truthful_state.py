"""State that does not lie (issue 19, CONTRACT §4, §7): a member's status file deleted by
hand while it runs is written back by teamd; after `kill -9` of teamd the next one journals
`exited` (code and signal null, with `reason`) for each member that died with the old one
and clears what no longer holds; after a SIGTERM stop no `retrying at …` error stays on a
member left `pending` (a paused member's reason, which still holds, does).

Real `teamd`, real forked members, the real SDK over HTTP to the scripted model, and the
real `teamctl status`; each test first proves its fault landed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psutil

from teamd import actions, repair
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import (
    TEAM,
    Teamd,
    cells,
    events_of,
    gone,
    live_pid,
    make_team,
    member,
    running_teamd,
    teamd_env,
    wait_status,
    wait_until,
)
from tests.helpers_proc import teamctl_text

T = 30.0


def status_rows(ws: Workspace) -> dict[str, dict[str, Any]]:
    """`teamctl status --json`'s members, by name."""
    doc = json.loads(teamctl_text(ws.root, "status", "--json").stdout)
    return {m["name"]: m for t in doc["teams"] for m in t["members"]}


def test_a_status_file_deleted_by_hand_is_written_back(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    make_team(ws, workdir, "alice")
    with running_teamd(ws, server.url):
        wait_status(ws, "alice", "idle")
        before = member(ws, TEAM, "alice")
        pid = before["pid"]
        assert pid is not None and before["usage"]["output_tokens"] > 0
        ws.store.paths.member_status(TEAM, "alice").unlink()  # the fault
        wait_until(lambda: ws.store.paths.member_status(TEAM, "alice").exists(), T,
                   "teamd to write the file again")
        after = wait_until(lambda: (m := member(ws, TEAM, "alice"))["pid"] == pid and m, T,
                           "the pid back in the roster")
        assert after["status"] == "idle" and after["pid_create_time"] == \
            before["pid_create_time"]
        assert after["usage"] == before["usage"] and after["restarts"] == before["restarts"]
        assert live_pid(ws, TEAM, "alice") == pid  # the same process, never restarted
        row = status_rows(ws)["alice"]
        assert (row["status"], row["pid"], row["live"]) == ("idle", pid, True)
        assert cells(teamctl_text(ws.root, "status").stdout, "alice")["PID"] == str(pid)
        # and it goes on recording itself there: a new call counts
        actions.send(ws, TEAM, "alice", "one more")
        wait_until(lambda: member(ws, TEAM, "alice")["usage"]["output_tokens"]
                   > before["usage"]["output_tokens"], T, "the next call to be counted")
        assert not events_of(ws, "alice", "exited")


def test_after_kill_9_the_next_teamd_journals_each_exit_and_clears_stale_errors(
        ws: Workspace, server: ScriptedServer, workdir: Path, tmp_path: Path) -> None:
    make_team(ws, workdir, "alice", "bob")
    first = Teamd(ws, teamd_env(server.url), tmp_path / "first.log")
    try:
        for name in ("alice", "bob"):
            wait_status(ws, name, "idle")
        pids = {n: member(ws, TEAM, n)["pid"] for n in ("alice", "bob")}
        procs = [psutil.Process(p) for p in pids.values()]
        first.proc.kill()  # the fault: SIGKILL, nothing journaled, nothing cleaned up
        first.proc.wait(10)
        wait_until(lambda: all(gone(p) for p in procs), T, "the members to die with it")
    finally:
        first.stop()
    # what the dead supervisor left: statuses that claim a process (status shows `idle?`)
    assert {n: member(ws, TEAM, n)["status"] for n in pids} == {"alice": "idle",
                                                                 "bob": "idle"}
    assert not events_of(ws, "*", "exited")
    # a stale error of the dead process, as the outside check found (a wake fallback)
    stale = "wake fallback: the supervisor's wake pipe closed"
    with_error = json.loads(ws.store.paths.member_status(TEAM, "bob").read_text())
    ws.store.paths.member_status(TEAM, "bob").write_text(
        json.dumps({**with_error, "last_error": stale})
    )
    assert cells(teamctl_text(ws.root, "status").stdout, "bob")["STATUS"] == "idle?"

    with running_teamd(ws, server.url, log_path=tmp_path / "second.log"):
        for name in ("alice", "bob"):
            wait_until(lambda n=name: live_pid(ws, TEAM, n) not in (None, pids[n]), T,
                       f"{name} forked again")
            wait_status(ws, name, "idle")
        for name in pids:
            exits = events_of(ws, name, "exited")
            assert [(e["code"], e["signal"], e["reason"]) for e in exits] == [
                (None, None, repair.DIED_UNSEEN)], exits
            m = member(ws, TEAM, name)
            assert m["last_exit"]["code"] is None and m["last_exit"]["signal"] is None
            assert m["last_error"] is None, m
        moves = [(e["from"], e["to"]) for e in events_of(ws, "bob", "status")]
        assert ("idle", "pending") in moves  # journaled, then started again
        shown = teamctl_text(ws.root, "status").stdout
        assert "idle?" not in shown and stale not in shown


def test_after_a_sigterm_stop_no_stale_retry_error_stays(
        ws: Workspace, server: ScriptedServer, workdir: Path, tmp_path: Path) -> None:
    server.add_rule({"name": "down", "agent": "alice", "contains": "TRY",
                     "error": {"status": 503, "retry_after": 30}})
    make_team(ws, workdir, "alice")
    actions.spawn(ws, TEAM, "spender", "Wait for work.", cwd=str(workdir), budget_usd=1e-6)
    with running_teamd(ws, server.url, retry_max_wait=30) as daemon:
        wait_status(ws, "alice", "idle")
        wait_status(ws, "spender", "idle")
        actions.send(ws, TEAM, "alice", "TRY this")
        actions.send(ws, TEAM, "spender", "one more call, past the budget")
        # the faults landed: alice waits to retry, spender is paused at its budget
        wait_until(lambda: "retrying at" in (member(ws, TEAM, "alice")["last_error"] or ""),
                   T, "alice's retry error")
        wait_status(ws, "spender", "paused")
        paused_for = member(ws, TEAM, "spender")["last_error"]
        assert paused_for.startswith("member budget reached")
        assert daemon.terminate() == 0
    alice, spender = member(ws, TEAM, "alice"), member(ws, TEAM, "spender")
    assert (alice["status"], alice["last_error"]) == ("pending", None)
    assert (spender["status"], spender["last_error"]) == ("pending", paused_for)
    shown = teamctl_text(ws.root, "status").stdout
    assert "retrying at" not in shown and cells(shown, "alice")["LAST ERROR"] == ""
