"""A team on the PostgreSQL store, end to end (CONTRACT §15): a real `teamd run` with
`TEAMD_STORE` naming a fresh database of the private cluster (tests/postgres.py), teamctl
acting on the same store, a member forked by teamd calling the scripted model over the real
`anthropic` SDK. Nothing of the team is written under `.teams/` or `.tasks/` but the
member's own stderr log (host-local, CONTRACT §15): its records are rows of the database,
and it wakes for a message and a task through LISTEN/NOTIFY, without polling.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import cli, lead_got, member, running_teamd, send_to_lead, tool_use, wait_until
from tests.postgres import Cluster, database_name

TEAM = "shop"
T = 30.0


@pytest.fixture
def pg_ws(ws: Workspace, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    """The test's workspace, its store the test's database (`TEAMD_STORE`, as a person sets
    it), for this process, teamctl and the teamd it starts."""
    monkeypatch.setenv("TEAMD_STORE", pg_url)
    return Workspace.at(ws.root)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    rules = [
        {"name": "answer", "regex": "ping from the lead",
         "reply": send_to_lead("pong from the database")},
        {"name": "finish", "regex": r"<auto-claimed>Task #(?P<tid>\d+)",
         "reply": {"content": [tool_use("TaskUpdate", task_id="{int:tid}",
                                        status="completed")]}},
    ]
    with ScriptedServer({"rules": rules,
                         "default": {"content": [{"type": "text", "text": "Done."}]}}) as srv:
        yield srv


def as_json(*args: str, root: Path) -> object:
    return json.loads(cli(root, *args).stdout)


def test_a_team_runs_on_postgresql(pg_ws: Workspace, pg_url: str, server: ScriptedServer,
                                   workdir: Path) -> None:
    root = pg_ws.root
    assert pg_ws.store.description == pg_url  # no password in this URL: shown as it is
    cli(root, "create", TEAM, "--description", "on PostgreSQL")
    cli(root, "spawn", TEAM, "alice", "--prompt", "Wait for work.", "--cwd", str(workdir))
    with running_teamd(pg_ws, server.url, store=pg_url):
        wait_until(lambda: member(pg_ws, TEAM, "alice")["status"] == "idle", T,
                   "alice to be idle")
        cli(root, "send", TEAM, "alice", "ping from the lead")
        lead_got(pg_ws, lambda m: m["content"] == "pong from the database",
                 "alice's answer in the lead's inbox", T, team=TEAM)
        drained = [json.loads(line) for line in
                   cli(root, "inbox", TEAM, "--json").stdout.splitlines()]
        assert [(m["sender"], m["content"]) for m in drained if m["type"] == "message"] == [
            ("alice", "pong from the database")]
        assert any("ping from the lead" in r["last_user_text"] for r in server.requests)

        cli(root, "task", "add", TEAM, "Ship it")
        wait_until(lambda: as_json("task", "show", TEAM, "1", "--json", root=root)["status"]
                   == "completed", T, "task 1 completed by alice")
        task = as_json("task", "show", TEAM, "1", "--json", root=root)
        assert task["owner"] == "alice"

        status = as_json("status", TEAM, "--json", root=root)
        alice = next(m for t in _teams(status) for m in t["members"] if m["name"] == "alice")
        assert alice["status"] in ("idle", "active") and alice["pid"]
        events = [json.loads(line) for line in
                  cli(root, "logs", TEAM, "--json").stdout.splitlines() if line.strip()]
        kinds = {e["event"] for e in events}
        assert {"team_created", "member_added", "spawned", "task_created",
                "task_completed"} <= kinds
        assert "wake_fallback" not in kinds  # woken by LISTEN/NOTIFY, never by polling
        assert any(e["event"] == "message" and e["message"]["content"] ==
                   "pong from the database" for e in events)
    # the records are the database's: no team folder's record was written as a file
    local = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert f".teams/{TEAM}/logs/alice.log" in local  # the member's own stderr: host-local
    assert not [p for p in local if p.startswith((".tasks", f".teams/{TEAM}/sessions",
                                                  f".teams/{TEAM}/config.json"))], local


def test_a_message_whose_notice_was_lost_still_wakes_its_member(
        pg_ws: Workspace, pg_url: str, pg_cluster: Cluster, server: ScriptedServer,
        workdir: Path) -> None:
    """A lost connection is a lost inotify event (CONTRACT §15): teamd reconnects, reads
    again, and every member looks at its inbox. The loss is made certain: teamd stopped
    (SIGSTOP), every connection of the database ended, a message sent — its NOTIFY reaches
    no one — then teamd let go on. The three-host test found an idle member left with its
    task's message unread when the cut landed as it was sent."""
    root = pg_ws.root
    cli(root, "create", TEAM)
    cli(root, "spawn", TEAM, "alice", "--prompt", "Wait for work.", "--cwd", str(workdir))
    with running_teamd(pg_ws, server.url, store=pg_url) as daemon:
        # idle, and its idle notice sent: from then on only a poke makes it look again
        lead_got(pg_ws, lambda m: m["type"] == "idle_notification" and m["sender"] == "alice",
                 "alice's idle notice", T, team=TEAM)
        teamd = psutil.Process(daemon.pid)
        teamd.suspend()
        try:
            assert pg_cluster.terminate(database_name(pg_url)) >= 1  # teamd's LISTEN too
            cli(root, "send", TEAM, "alice", "ping from the lead")
        finally:
            teamd.resume()
        lead_got(pg_ws, lambda m: m["content"] == "pong from the database",
                 "alice's answer in the lead's inbox", T, team=TEAM)


def _teams(status: object) -> list[dict[str, object]]:
    """The teams of `status --json` (one team, or every team)."""
    assert isinstance(status, dict)
    teams = status.get("teams")
    return list(teams) if isinstance(teams, list) else [status]
