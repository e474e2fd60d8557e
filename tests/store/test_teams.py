"""Teams coming and going (`create_team`, `delete_team`, `archives`, `keep_removed`): a team
is made once, a deleted team leaves no board behind, and a board left over is refused."""

from __future__ import annotations

from typing import Any

import pytest

from teamd import budget, roster
from teamd.errors import BadInput
from teamd.store.api import Store

T = "t"
SPEND = {"schema": budget.SCHEMA, "spent_usd": 0.0}


def spec(description: str = "") -> dict[str, Any]:
    return roster.new_roster(T, description)


def delete(store: Store, *, purge: bool = False, ts: float = 1700000000.5) -> str | None:
    with store.roster_unit(T):
        return store.delete_team(T, {"ts": ts, "event": "team_deleted"}, purge=purge)


def test_a_team_is_made_once(store: Store) -> None:
    assert store.team_names() == [] and not store.team_exists(T)
    assert store.create_team(T, spec("first"), SPEND)
    assert not store.create_team(T, spec("second"), SPEND)  # nothing written
    assert store.team_exists(T) and store.team_names() == [T]
    assert (store.read_spec(T) or {})["description"] == "first"
    assert T in store.describe_team(T) and store.describe_spec(T)


def test_deleting_keeps_an_archive_unless_purged(store: Store) -> None:
    store.create_team(T, spec("first"), SPEND)
    kept = delete(store)
    assert kept is not None and store.archives(T) == [kept]
    assert not store.team_exists(T) and store.team_names() == []
    store.create_team(T, spec("second"), SPEND)
    assert delete(store, purge=True, ts=1700000001.5) is None
    assert store.archives(T) == [kept] and not store.team_exists(T)


def test_a_deleted_team_leaves_no_board(store: Store) -> None:
    store.create_team(T, spec(), SPEND)
    with store.board_unit(T):
        store.write_task(T, {"id": store.next_task_id(T), "subject": "old",
                             "status": "pending"})
    delete(store)
    assert store.task_ids(T) == []
    store.create_team(T, spec(), SPEND)  # made again by that name: a board of its own
    assert store.task_ids(T) == [] and store.top_task_id(T) == 0


def test_a_board_left_over_by_a_deleted_team_is_refused(store: Store, faults: Any) -> None:
    store.create_team(T, spec(), SPEND)
    faults.leave_board(T)
    with pytest.raises(BadInput, match=f"team '{T}'.*left over"):
        store.create_team(T, spec(), SPEND)
    assert not store.team_exists(T)


def test_a_removed_members_records_are_kept_aside(store: Store) -> None:
    store.create_team(T, spec(), SPEND)
    assert store.keep_removed(T, "ann", "20240101T000000.000001") is None  # nothing to keep
    store.deliver(T, "ann", [{"id": "m1", "type": "message"}])
    store.append_session(T, "ann", [{"n": 1}])
    kept = store.keep_removed(T, "ann", "20240101T000000.000002")
    assert kept is not None and store.removed(T, "ann") == [kept]
    assert not store.has_mail(T, "ann") and store.read_session(T, "ann") == []
