"""`Toolbox.run` with a `record` on the PostgreSQL store (CONTRACT §15): a team tool's
writes, its `tool_call` line and its recorded result are one transaction. A start refused
after its blocker was written keeps the blocker and records why, as on files; a step whose
commit fails (its connection cut by the server) raises, leaving neither the effect nor the
record — in the store or in the member's session in memory. Real PostgreSQL (`pg_url`), a
real session, the real handlers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from teamd import actions, board
from teamd.agent.session import Session
from teamd.agent.tools import Toolbox, ToolResult
from teamd.layout import Workspace
from teamd.store.errors import StoreUnreachable
from tests.harness import journal

TEAM = "proj"


@pytest.fixture
def member(pg_url: str, tmp_path: Path) -> tuple[Workspace, Toolbox, Session]:
    ws = Workspace.at(tmp_path / "ws", store=pg_url)
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "alice", "work", cwd=str(tmp_path))
    box = Toolbox(ws, TEAM, "alice", kind="teammate", cwd=tmp_path, bash_timeout=10,
                  plan_mode_required=False)
    return ws, box, Session.load(ws.store, TEAM, "alice")


def recorder(session: Session, then: Any = None) -> Any:
    def record(result: ToolResult) -> None:
        session.append({"type": "tool_result", "block": {
            "type": "tool_result", "tool_use_id": "toolu_1", "content": result.content,
            "is_error": result.is_error}})
        if then is not None:
            then()
    return record


def stored(ws: Workspace) -> list[dict[str, Any]]:
    return ws.store.read_session(TEAM, "alice")


def test_a_refused_start_keeps_the_blocker_it_added_and_records_why_as_on_files(
        member: tuple[Workspace, Toolbox, Session]) -> None:
    """TaskUpdate in_progress adding a blocker: the blocker is written, then the start is
    refused because of it — an error result, the blocker kept, the same on either store
    (a handler that raises leaves nothing: tests/store/test_together.py)."""
    ws, box, session = member
    first, second = (board.create(ws, TEAM, s)["id"] for s in ("first", "second"))
    result = box.run("TaskUpdate", {"task_id": second, "status": "in_progress",
                                    "add_blocked_by": [first]}, record=recorder(session))
    assert result.is_error and "blocked by #1" in result.content
    assert board.get(ws, TEAM, second)["blocked_by"] == [first]  # what it says is true
    assert [r["block"]["content"] for r in stored(ws)] == [result.content]
    assert session.records[-1]["block"]["content"] == result.content
    [line] = [e for e in journal(ws, TEAM) if e["event"] == "tool_call"]
    assert line["ok"] is False


def test_a_step_whose_commit_fails_leaves_neither_effect_nor_record(
        member: tuple[Workspace, Toolbox, Session]) -> None:
    ws, box, session = member
    task_id = board.create(ws, TEAM, "the work", owner="alice")["id"]
    db = ws.store.db  # type: ignore[attr-defined]

    def cut() -> None:  # the server ends this connection before the step's commit
        with db.fresh() as other:
            other.execute("SELECT pg_terminate_backend(%s)", (db.conn().info.backend_pid,))

    before = list(session.records)
    with pytest.raises(StoreUnreachable):
        box.run("TaskUpdate", {"task_id": task_id, "status": "completed"},
                record=recorder(session, cut))
    assert session.records == before  # nothing in memory the store does not have
    assert stored(ws) == before
    assert board.get(ws, TEAM, task_id)["status"] == "pending"
    assert not [e for e in journal(ws, TEAM) if e["event"] in ("tool_call", "task_completed")]
    # resumed (a new connection), the same call is done and recorded, once
    done = box.run("TaskUpdate", {"task_id": task_id, "status": "completed"},
                   record=recorder(session))
    assert "[completed]" in done.content and session.records[-1]["block"]["content"] == \
        done.content == stored(ws)[-1]["block"]["content"]
