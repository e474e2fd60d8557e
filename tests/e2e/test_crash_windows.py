"""Crash windows between two writes that cannot be one: each must lose no work.

A claim (board) and the <auto-claimed> record (session) are two files. A teammate killed
between them owns an in-progress task its conversation never heard of; when it comes
back it must take that task up, and only once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from teamd import actions, board, files
from teamd.agent.session import Session
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from teamd.store.files.paths import Paths
from tests.harness import journal, member, running_teamd, wait_until

TEAM = "crew"
T = 20.0


@pytest.fixture
def script() -> dict[str, Any]:
    return {"rules": [
        {"name": "finish", "regex": r"<auto-claimed>Task #(?P<tid>\d+)", "reply": {"content": [
            {"type": "tool_use", "name": "TaskUpdate",
             "input": {"task_id": "{int:tid}", "status": "completed"}}]}},
    ], "default": {"content": [{"type": "text", "text": "Waiting."}]}}


def test_a_claim_the_conversation_never_heard_of_is_taken_up_once(
        ws: Workspace, tmp_path: Path, server: ScriptedServer) -> None:
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "alice", "Work the board.", cwd=str(tmp_path))
    board.create(ws, TEAM, "Port the login page")
    board.create(ws, TEAM, "Port the settings page")
    # the state a kill -9 leaves right after board.claim: owned, in progress, untold
    assert board.claim(ws, TEAM, "alice", 1)["id"] == 1

    with running_teamd(ws, server.url, idle_timeout=60):
        wait_until(lambda: all(t["status"] == "completed"
                               for t in board.list_tasks(ws, TEAM)), T,
                   "both tasks to be completed")
        wait_until(lambda: member(ws, TEAM, "alice")["status"] == "idle", T, "alice idle")

    told = [r for r in server.requests if r["rule"] == "finish"]
    assert sorted(int(r["last_user_text"].split("#")[1].split(":")[0]) for r in told) == \
        [1, 2], "each task handed to the model exactly once"
    session = Session.load(ws.store, TEAM, "alice")
    assert session.claimed_ids == {1, 2}


def test_claimed_ids_survive_compaction(tmp_path: Path) -> None:
    files.ensure_dir(Paths(tmp_path).sessions_dir(TEAM))
    session = Session(Workspace(tmp_path).store, TEAM, "alice")
    session.append({"type": "user", "claimed": 7, "content": [{"type": "text", "text": "x"}]})
    session.append({"type": "compaction", "summary": "s", "known_ids": [],
                    "claimed_ids": sorted(session.claimed_ids)})
    assert Session.load(session.store, TEAM, "alice").claimed_ids == {7}


def test_a_task_the_model_started_itself_is_not_announced_again(
        ws: Workspace, tmp_path: Path) -> None:
    with ScriptedServer({"rules": [
        {"name": "start", "agent": "alice", "nth": 1, "reply": {"content": [
            {"type": "tool_use", "name": "TaskUpdate",
             "input": {"task_id": 1, "status": "in_progress"}}]}},
    ], "default": {"content": [{"type": "text", "text": "Working on it."}]}}) as server:
        actions.create_team(ws, TEAM)
        actions.spawn(ws, TEAM, "alice", "Start task 1.", cwd=str(tmp_path))
        board.create(ws, TEAM, "Port the login page")
        board.create(ws, TEAM, "Port the settings page")
        with running_teamd(ws, server.url, idle_timeout=60):
            # idle, alice first looks for owned tasks she was never told of, then claims
            server.wait_for(lambda r: "<auto-claimed>Task #2" in r["last_user_text"],
                            timeout=T)
        assert not [r for r in server.requests if "<auto-claimed>Task #1" in
                    r["last_user_text"]], "task 1 was the model's own: not re-announced"


def idle_notes(ws: Workspace) -> int:
    return sum(1 for r in journal(ws, TEAM) if r.get("event") == "message"
               and r["message"]["type"] == "idle_notification")


def test_waking_from_sleep_is_not_news_to_the_lead(ws: Workspace, tmp_path: Path,
                                                    server: ScriptedServer) -> None:
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "alice", "Wait for work.", cwd=str(tmp_path))
    with running_teamd(ws, server.url, idle_timeout=1):
        wait_until(lambda: member(ws, TEAM, "alice")["status"] == "sleeping", T, "sleep")
        assert idle_notes(ws) == 1  # the first turn ended
        actions.send(ws, TEAM, "alice", "are you there?")
        server.wait_for(lambda r: "are you there?" in r["last_user_text"], timeout=T)
        wait_until(lambda: idle_notes(ws) >= 2, T, "the second idle notification")
        wait_until(lambda: member(ws, TEAM, "alice")["status"] in ("idle", "sleeping"), T,
                   "alice idle again")
    # one per turn the model ended; none for being forked again to read the message
    assert idle_notes(ws) == 2
