"""A team tool's effect and its recorded result are one transaction (CONTRACT §15, §17):
on PostgreSQL, alice killed just before, or just after, the commit of her tool's step
(`Store.together`, logged as `commit together`) — her TaskUpdate completing a task (the
sweep's `task` scenario: its `task_completed` hook and worktree commit run before the step's
transaction) or her SendMessage (the `message` scenario).

Before the commit, neither is there: the task is completed only after her restart, once
her model was told the call was not run and called again; her message is delivered once,
by the call run again on resume. After it, both are: her session holds the call's real
result from before the kill, and her model is never told "not re-run". Every invariant of
the sweep holds too (`invariants.check`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from teamd import board
from teamd.agent.session import INTERRUPTED
from tests.crash import invariants, scenarios
from tests.crash.scenarios import CUT
from tests.crash.sweep import COUNTED, Point, SweepStore, World, counted, run_once, world
from tests.harness import journal, last_user, turn_text

pytestmark = pytest.mark.timeout(600)

#: the crash log's name for the commit of a step together (`teamd.store.postgres.db`)
STEP = "commit together"


@pytest.fixture
def on_postgres(pg_cluster: Any) -> SweepStore:
    return SweepStore.on_postgres(pg_cluster)


def step_point(tmp: Path, name: str, store: SweepStore, after: bool, fresh: bool) -> Point:
    """Alice's last step together in the scenario's counting run: her TaskUpdate's (after
    her write_file's) in `task`, her SendMessage's (after her bash's) in `message`."""
    key = counted(name, store)
    if fresh or key not in COUNTED:
        run_once(tmp, scenarios.SPECS[name], None, store)
    steps = [rec for who, rec in COUNTED[key] if who == "alice" and rec["what"] == STEP]
    assert len(steps) >= 2, f"alice made {len(steps)} step(s) together in {name}"
    return Point("alice", int(steps[-1]["n"]), after)


def calls(w: World, tool: str) -> list[tuple[str, dict[str, Any]]]:
    """Alice's calls of `tool` in her session, each with the record of its result."""
    records = w.ws.store.read_session(w.team, "alice")
    results = {r["block"]["tool_use_id"]: r for r in records if r["type"] == "tool_result"}
    return [(b["id"], results[b["id"]]) for r in records if r["type"] == "assistant"
            for b in r["content"] if b.get("type") == "tool_use" and b["name"] == tool]


def told_not_run(w: World) -> list[str]:
    """The requests of alice's model whose new input says a call was not re-run."""
    return [turn_text(last_user(r)) for r in w.server.requests
            if r["agent"] == "alice" and CUT in turn_text(last_user(r))]


def tool_lines(w: World, tool: str) -> list[dict[str, Any]]:
    return [e for e in journal(w.ws, w.team) if e["event"] == "tool_call" and e["tool"] == tool]


def crashed(tmp: Path, name: str, after: bool, store: SweepStore,
            check: Any) -> None:
    """Run scenario `name` with alice killed at her last step's commit, then `check(w)`
    with every invariant held. The commit's number may shift from one run to the next: a
    run whose crash fired elsewhere is tried again on a fresh count, up to 3 times."""
    missed = []
    for attempt in range(3):
        point = step_point(tmp / f"count{attempt}", name, store, after, attempt > 0)
        with world(tmp / f"run{attempt}", scenarios.SPECS[name], point, store) as w:
            scenarios.SPECS[name].body(w)
            violations = invariants.check(w)
            fired = [json.loads(line) for line in w.log.read_text().splitlines()
                     if '"fired"' in line]
            if not fired or fired[0]["what"] != STEP:
                missed.append(f"{point}: {fired}")
                continue
            assert not violations, "\n".join(violations)
            check(w)
            return
    raise AssertionError(f"never killed at alice's step: {missed}")


def test_a_task_update_killed_before_its_commit_is_neither_done_nor_recorded(
        tmp_path: Path, on_postgres: SweepStore) -> None:
    def check(w: World) -> None:
        [(_, first), (_, again)] = calls(w, "TaskUpdate")
        assert first["block"]["content"] == INTERRUPTED  # no result was kept
        assert "[completed]" in again["block"]["content"]
        [done] = board.list_tasks(w.ws, w.team)
        # completed only after the restart recorded the first call as not run
        assert done["status"] == "completed" and done["completed_at"] > first["ts"]
        assert [e["ok"] for e in tool_lines(w, "TaskUpdate")] == [True]  # the re-run's
        assert len(told_not_run(w)) == 1
    crashed(tmp_path, "task", False, on_postgres, check)


def test_a_task_update_killed_after_its_commit_is_done_and_recorded(
        tmp_path: Path, on_postgres: SweepStore) -> None:
    def check(w: World) -> None:
        [(_, result)] = calls(w, "TaskUpdate")
        assert "[completed]" in result["block"]["content"]
        [done] = board.list_tasks(w.ws, w.team)
        assert done["status"] == "completed" and done["completed_at"] <= result["ts"]
        assert len(tool_lines(w, "TaskUpdate")) == 1
        assert told_not_run(w) == []  # the model got its real result
    crashed(tmp_path, "task", True, on_postgres, check)


@pytest.mark.parametrize("after", [False, True])
def test_a_send_message_killed_at_its_commit_is_delivered_once(
        tmp_path: Path, on_postgres: SweepStore, after: bool) -> None:
    def check(w: World) -> None:
        [(call_id, result)] = calls(w, "SendMessage")
        sent = [e["message"] for e in journal(w.ws, w.team) if e["event"] == "message"
                and "PONG-7f3" in str(e["message"].get("content"))]
        assert [m["id"] for m in sent] == [call_id]  # once, by the call's id
        assert result["block"]["content"] == f"sent to lead (id {call_id})"
        # before: the call run again on resume (its first step undone) — its one line
        assert len(tool_lines(w, "SendMessage")) == 1
        assert told_not_run(w) == []
    crashed(tmp_path, "message", after, on_postgres, check)
