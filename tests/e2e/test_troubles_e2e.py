"""teamd's own errors for a team, journaled as `supervisor_error` (CONTRACT.md section 7,
issue 19): a corrupt roster and a rejected reload, once each until they clear, and the
latest that still holds in `status`. A real `teamd run`, real files, real signals."""

from __future__ import annotations

import json
import signal
from typing import Any

from teamd import actions, pidfile
from teamd.files import atomic_write_bytes
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import T, journal, running_teamd, wait_status, wait_until
from tests.helpers_proc import ctl

TEAMS = ("crew", "other")


def errors_in(ws: Workspace, team: str) -> list[dict[str, Any]]:
    return [e for e in journal(ws, team) if e["event"] == "supervisor_error"]


def held(ws: Workspace) -> dict[str, Any]:
    """teamd's errors that still hold, as `status` reads them (teamd.json)."""
    info = pidfile.running(ws) or {}
    return dict(info.get("errors") or {})


def test_a_corrupt_roster_is_journaled_once_until_it_clears(
        ws: Workspace, server: ScriptedServer) -> None:
    for team in TEAMS:
        actions.create_team(ws, team)
    actions.spawn(ws, "other", "alice", "work")
    good = ws.store.paths.config("crew").read_bytes()
    with running_teamd(ws, server.url):
        wait_status(ws, "alice", "idle", team="other")
        # replaced whole (as an editor saves), so teamd never reads half a write
        atomic_write_bytes(ws.store.paths.config("crew"), b'{"schema": 2, "name": "crew", "memb')
        first = wait_until(lambda: errors_in(ws, "crew"), T, "supervisor_error in crew")
        assert "config.json" in first[0]["reason"] and "not valid JSON" in first[0]["reason"]
        assert held(ws)["crew"]["reason"] == first[0]["reason"]
        # reconcile passes go on (the other team is served): the error is not journaled again
        for name in ("bob", "carol"):
            actions.spawn(ws, "other", name, "work")
            wait_status(ws, name, "idle", team="other")
        assert len(errors_in(ws, "crew")) == 1 and errors_in(ws, "other") == []
        # repaired: it clears (status no longer shows it); broken again: journaled again
        atomic_write_bytes(ws.store.paths.config("crew"), good)
        wait_until(lambda: "crew" not in held(ws), T, "the error to clear")
        atomic_write_bytes(ws.store.paths.config("crew"), b"[]")
        wait_until(lambda: len(errors_in(ws, "crew")) == 2, T, "the second error")
        atomic_write_bytes(ws.store.paths.config("crew"), good)
        wait_until(lambda: "crew" not in held(ws), T, "the error to clear again")
    assert len(errors_in(ws, "crew")) == 2


def test_a_rejected_reload_is_journaled_in_every_team_and_shown_by_status(
        ws: Workspace, server: ScriptedServer) -> None:
    for team in TEAMS:
        actions.create_team(ws, team)
    with running_teamd(ws, server.url) as daemon:
        # its signal handlers are in place once it has journaled its start
        wait_until(lambda: all(e["event"] == "supervisor_started" for t in TEAMS
                               for e in journal(ws, t)[-1:]), T, "teamd to start")
        ws.settings_file.write_text("idle_timout = 5\n")
        daemon.proc.send_signal(signal.SIGHUP)
        for team in TEAMS:
            found = wait_until(lambda team=team: errors_in(ws, team), T, f"the error in {team}")
            assert "unknown setting 'idle_timout'" in found[0]["reason"]
        out = ctl(ws, "status")
        assert out.count("teamd error since") == 2 and "idle_timout" in out
        doc = json.loads(ctl(ws, "status", "crew", "--json"))
        assert "unknown setting 'idle_timout'" in doc["teams"][0]["supervisor_error"]["reason"]
        # the same error again: said in teamd's log, not journaled again
        daemon.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: daemon.output().count("keeping the settings in force") == 2, T,
                   "the second reload to be refused")
        assert [len(errors_in(ws, team)) for team in TEAMS] == [1, 1]
        ws.settings_file.write_text("idle_timeout = 5\n")
        daemon.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: not held(ws), T, "the errors to clear")
        assert "teamd error" not in ctl(ws, "status")
        assert daemon.proc.poll() is None
