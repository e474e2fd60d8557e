"""One team's bad file must not stop the supervisor, nor the other teams."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from teamd import actions, board
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import live_pid, member, running_teamd, wait_until

T = 20.0


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer({"rules": [], "default": {"content": [
            {"type": "text", "text": "Waiting."}]}}) as srv:
        yield srv


def test_a_hand_broken_task_file_is_skipped_and_other_teams_go_on(
        ws: Workspace, tmp_path: Path, server: ScriptedServer) -> None:
    for team in ("broken", "fine"):
        actions.create_team(ws, team)
        actions.spawn(ws, team, "alice", "Wait for work.", cwd=str(tmp_path))
    board.create(ws, "broken", "A real task")
    (ws.tasks_dir("broken") / "7.json").write_text("{oops")
    with running_teamd(ws, server.url, idle_timeout=1, backoff_initial=0.2) as daemon:
        # alice of "broken" goes to sleep: the supervisor then reads that team's board on
        # every reconcile (to see whether work would wake her), bad file included
        wait_until(lambda: member(ws, "broken", "alice")["status"] == "sleeping", T,
                   "alice of broken to sleep")
        assert [t["id"] for t in board.list_tasks(ws, "broken")] == [1]
        actions.send(ws, "fine", "alice", "hello")
        wait_until(lambda: live_pid(ws, "fine", "alice")
                   and member(ws, "fine", "alice")["status"] in ("active", "idle"), T,
                   "the other team to go on")
        assert daemon.proc.poll() is None
        assert "7.json: skipped, not a task" in daemon.output()
