"""teamd.board: ids, dependencies, claiming and releasing (CONTRACT §5)."""

from __future__ import annotations

import pytest

from teamd import board, events, files
from teamd.errors import BadInput
from teamd.layout import Workspace
from tests.helpers_proc import snapshot

TEAM = "t"


def make(ws: Workspace, n: int, **kw: object) -> list[int]:
    return [board.create(ws, TEAM, f"task {i}", **kw)["id"] for i in range(n)]  # type: ignore[arg-type]


def hwm(ws: Workspace) -> int:
    return int(ws.store.paths.highwatermark(TEAM).read_text())


# -- ids ---------------------------------------------------------------------------------
def test_task_file_has_the_contract_fields(ws: Workspace, team: str) -> None:
    task = board.create(ws, team, "  Design schema  ", "details", created_by="alice")
    on_disk = files.read_json(ws.store.paths.task(team, 1))
    assert on_disk == task
    assert task["schema"] == 1 and task["id"] == 1 and task["subject"] == "Design schema"
    assert task["status"] == "pending" and task["owner"] is None
    assert task["blocked_by"] == [] and task["blocks"] == []
    assert task["created_by"] == "alice" and task["description"] == "details"
    assert task["claimed_at"] is None and task["completed_at"] is None
    assert isinstance(task["created_at"], float) and isinstance(task["updated_at"], float)
    assert hwm(ws) == 1
    created = [r for r in events.read(ws, team) if r["event"] == "task_created"]
    assert created[0]["task_id"] == 1 and created[0]["member"] == "alice"


def test_ids_are_sequential_and_never_reused_after_a_delete(ws: Workspace, team: str) -> None:
    assert make(ws, 3) == [1, 2, 3]
    ws.store.paths.task(team, 3).unlink()
    ws.store.paths.task(team, 2).unlink()
    assert make(ws, 1) == [4]
    assert hwm(ws) == 4


def test_missing_highwatermark_counts_the_highest_id_on_disk(ws: Workspace,
                                                             team: str) -> None:
    make(ws, 3)
    ws.store.paths.highwatermark(team).unlink()
    assert make(ws, 1) == [4]
    assert hwm(ws) == 4


def test_highwatermark_ahead_of_the_disk_wins(ws: Workspace, team: str) -> None:
    make(ws, 1)
    ws.store.paths.highwatermark(team).write_text("41\n")
    assert make(ws, 1) == [42]


def test_unreadable_highwatermark_falls_back_to_the_disk(ws: Workspace, team: str) -> None:
    make(ws, 2)
    ws.store.paths.highwatermark(team).write_text("garbage")
    assert make(ws, 1) == [3]


def test_create_needs_a_subject_and_a_team(ws: Workspace, team: str) -> None:
    with pytest.raises(BadInput, match="subject"):
        board.create(ws, team, "   ")
    with pytest.raises(BadInput, match="unknown team"):
        board.create(ws, "nope", "x")


# -- dependencies ------------------------------------------------------------------------
def test_dependencies_are_kept_both_ways(ws: Workspace, team: str) -> None:
    make(ws, 2)
    t3 = board.create(ws, team, "three", blocked_by=[1, 2])
    assert t3["blocked_by"] == [1, 2]
    assert board.get(ws, team, 1)["blocks"] == [3]
    assert board.get(ws, team, 2)["blocks"] == [3]
    board.update(ws, team, 1, add_blocked_by=[2])
    assert board.get(ws, team, 1)["blocked_by"] == [2]
    assert board.get(ws, team, 2)["blocks"] == [1, 3]
    board.create(ws, team, "four")
    board.update(ws, team, 4, add_blocks=[3])  # the other side: 3 now waits on 4 too
    assert board.get(ws, team, 3)["blocked_by"] == [1, 2, 4]
    assert board.get(ws, team, 4)["blocks"] == [3]
    # adding an edge twice changes nothing
    board.update(ws, team, 3, add_blocked_by=[4])
    assert board.get(ws, team, 3)["blocked_by"] == [1, 2, 4]


@pytest.mark.parametrize("edge", [
    {"add_blocked_by": [3]},  # 1 <- 2 <- 3, then 1 waits on 3
    {"add_blocked_by": [2]},  # direct 2-cycle
    {"add_blocked_by": [1]},  # itself
    {"add_blocks": [1]},      # 1 blocks itself
])
def test_a_cycle_is_refused_and_nothing_changes(ws: Workspace, team: str,
                                                edge: dict[str, list[int]]) -> None:
    make(ws, 1)
    board.create(ws, team, "two", blocked_by=[1])
    board.create(ws, team, "three", blocked_by=[2])
    before = snapshot(ws.root)
    with pytest.raises(BadInput, match=r"cycle|itself"):
        board.update(ws, team, 1, **edge)  # type: ignore[arg-type]
    assert snapshot(ws.root) == before


def test_a_missing_task_is_refused_and_nothing_changes(ws: Workspace, team: str) -> None:
    before = snapshot(ws.root)
    with pytest.raises(BadInput, match="unknown task #7"):
        board.create(ws, team, "x", blocked_by=[7])
    with pytest.raises(BadInput, match="unknown task #7"):
        board.update(ws, team, 7, status="completed")
    assert snapshot(ws.root) == before  # not even the board's lock file
    make(ws, 1)
    before = snapshot(ws.root)
    for kw in ({"add_blocked_by": [9]}, {"add_blocks": [9]}):
        with pytest.raises(BadInput, match="unknown task #9"):
            board.update(ws, team, 1, **kw)  # type: ignore[arg-type]
    with pytest.raises(BadInput, match="status"):
        board.update(ws, team, 1, status="done")
    assert snapshot(ws.root) == before


def test_update_status_and_owner(ws: Workspace, team: str) -> None:
    make(ws, 1)
    t = board.update(ws, team, 1, status="in_progress", owner="alice")
    assert t["status"] == "in_progress" and t["owner"] == "alice"
    assert isinstance(t["claimed_at"], float) and t["completed_at"] is None
    t = board.update(ws, team, 1, status="completed")
    assert isinstance(t["completed_at"], float) and t["owner"] == "alice"
    t = board.update(ws, team, 1, owner=None, status="pending")
    assert t["owner"] is None and t["completed_at"] is None
    names = [r["event"] for r in events.read(ws, team) if r.get("task_id") == 1]
    assert names == ["task_created", "task_updated", "task_completed", "task_updated"]
    assert files.read_json(ws.store.paths.task(team, 1)) == t


# -- claiming ----------------------------------------------------------------------------
def test_claim_rechecks_under_the_lock(ws: Workspace, team: str) -> None:
    make(ws, 2)
    # between the look and the claim, someone else took #1
    assert board.claim(ws, team, "bob", 1) is not None
    assert board.claim(ws, team, "alice", 1) is None
    assert board.get(ws, team, 1)["owner"] == "bob"
    board.update(ws, team, 2, status="completed")
    assert board.claim(ws, team, "alice", 2) is None  # completed: not claimable
    with pytest.raises(BadInput, match="unknown task"):
        board.claim(ws, team, "alice", 99)


def test_owned_pending_task_is_claimed_by_its_owner_only(ws: Workspace, team: str) -> None:
    make(ws, 3)
    board.update(ws, team, 2, owner="alice")
    board.update(ws, team, 3, owner="alice")
    assert board.claim(ws, team, "bob", 2) is None
    assert board.claim(ws, team, "bob", 3) is None  # 3 is alice's
    assert board.claim(ws, team, "alice", 2)["id"] == 2  # type: ignore[index]
    assert board.claim(ws, team, "bob", 1)["id"] == 1  # type: ignore[index]
    assert board.claim(ws, team, "alice", 3)["id"] == 3  # type: ignore[index]


def test_owned_task_waits_for_its_blockers(ws: Workspace, team: str) -> None:
    make(ws, 1)
    board.create(ws, team, "two", blocked_by=[1])
    board.update(ws, team, 2, owner="alice")
    assert board.claim(ws, team, "alice", 2) is None  # 1 is not completed yet
    assert board.claim(ws, team, "alice", 1)["id"] == 1  # type: ignore[index]
    board.update(ws, team, 1, status="completed")
    assert board.claim(ws, team, "alice", 2)["id"] == 2  # type: ignore[index]


def test_release_returns_unfinished_tasks_to_the_pool(ws: Workspace, team: str) -> None:
    make(ws, 4)
    board.claim(ws, team, "alice", 1)
    board.claim(ws, team, "alice", 2)
    board.update(ws, team, 2, status="completed")
    board.update(ws, team, 3, owner="alice")  # given but not started
    board.claim(ws, team, "bob", 4)
    assert board.release(ws, team, "alice") == [1, 3]
    t1, t2, t3, t4 = (board.get(ws, team, i) for i in (1, 2, 3, 4))
    assert (t1["status"], t1["owner"]) == ("pending", None)
    assert (t2["status"], t2["owner"]) == ("completed", "alice")
    assert (t3["status"], t3["owner"]) == ("pending", None)
    assert (t4["status"], t4["owner"]) == ("in_progress", "bob")
    released = [r["task_id"] for r in events.read(ws, team) if r["event"] == "task_released"]
    assert released == [1, 3]
    assert board.release(ws, team, "alice") == []
    assert board.release(ws, "nope", "alice") == []


def test_current_task_is_the_lowest_in_progress_owned(ws: Workspace, team: str) -> None:
    make(ws, 3)
    assert board.current_task(board.list_tasks(ws, team), "alice") is None
    board.claim(ws, team, "alice", 3)
    board.claim(ws, team, "alice", 2)
    assert board.current_task(board.list_tasks(ws, team), "alice") == 2


def test_list_and_get(ws: Workspace, team: str) -> None:
    make(ws, 11)
    assert [t["id"] for t in board.list_tasks(ws, team)] == list(range(1, 12))
    with pytest.raises(BadInput, match="unknown team"):
        board.list_tasks(ws, "nope")
    with pytest.raises(BadInput, match="unknown task #12"):
        board.get(ws, team, 12)
    with pytest.raises(BadInput, match="unknown team"):
        board.get(ws, "nope", 1)
