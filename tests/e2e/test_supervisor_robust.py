"""One team's bad file must not stop the supervisor, nor the other teams."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from teamd import actions, board
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import live_pid, make_team, member, running_teamd, wait_until

T = 20.0


@pytest.fixture
def script() -> dict[str, Any]:
    return {"rules": [], "default": {"content": [{"type": "text", "text": "Waiting."}]}}


def test_a_hand_broken_task_file_is_skipped_and_other_teams_go_on(
        ws: Workspace, tmp_path: Path, server: ScriptedServer) -> None:
    # the members are named apart: what is checked of bob can only be the other team's
    make_team(ws, tmp_path, "alice", team="broken", prompt="Wait for work.")
    make_team(ws, tmp_path, "bob", team="fine", prompt="Wait for work.")
    board.create(ws, "broken", "A real task")
    (ws.store.paths.tasks_dir("broken") / "7.json").write_text("{oops")
    with running_teamd(ws, server.url, idle_timeout=1, backoff_initial=0.2) as daemon:
        # alice of "broken" goes to sleep: the supervisor then reads that team's board on
        # every reconcile (to see whether work would wake her), bad file included
        wait_until(lambda: member(ws, "broken", "alice")["status"] == "sleeping", T,
                   "alice of broken to sleep")
        assert [t["id"] for t in board.list_tasks(ws, "broken")] == [1]
        # bob sleeps too, so only a reconcile of "fine" after the broken board's can wake him
        wait_until(lambda: member(ws, "fine", "bob")["status"] == "sleeping", T,
                   "bob of fine to sleep")
        assert live_pid(ws, "fine", "bob") is None
        actions.send(ws, "fine", "bob", "hello from the other team")
        woken = server.wait_for(lambda r: r["team"] == "fine" and r["agent"] == "bob"
                                and "hello from the other team" in r["last_user_text"], T)
        assert woken["n"] >= 2  # bob's call after his first: he was started again
        wait_until(lambda: live_pid(ws, "fine", "bob")
                   and member(ws, "fine", "bob")["status"] in ("active", "idle"), T,
                   "the other team to go on")
        assert daemon.proc.poll() is None
        assert "7.json: skipped, not a task" in daemon.output()
