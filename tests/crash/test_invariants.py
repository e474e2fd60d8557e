"""The sweep's invariants (invariants.py) read the records through the store seam: a promise
broken by hand — the state a crash would leave, were the store wrong — is found on the
PostgreSQL store as on files, so a sweep with no violation there proves something."""

from __future__ import annotations

from pathlib import Path

import pytest

from teamd import actions, board, requests
from tests.crash import invariants, scenarios
from tests.crash.sweep import FILES, SweepStore, world
from tests.harness import make_team


@pytest.fixture(params=["files", "postgres"])
def store(request: pytest.FixtureRequest) -> SweepStore:
    if request.param == "files":
        return FILES
    return SweepStore.on_postgres(request.getfixturevalue("pg_cluster"))


def test_a_promise_broken_in_the_store_is_found(tmp_path: Path, store: SweepStore) -> None:
    spec = scenarios.SPECS["shutdown-offline"]  # no teamd: its model is never asked
    with world(tmp_path, spec, None, store) as w:
        assert (w.ws.store_url is None) == (store is FILES)
        make_team(w.ws, w.workdir, "alice")
        assert invariants.check(w) == []
        # a task completed with no `task_completed` line
        task = board.create(w.ws, w.team, "Done by hand")
        w.ws.store.write_task(w.team, {**task, "status": "completed"})
        # a request answered with no answer message
        rid = actions.send(w.ws, w.team, "lead", "the plan", type_="plan_approval_request",
                           sender="alice")["request_id"]
        requests.answer(w.ws, w.team, rid, True)
        found = invariants.check(w)
    assert f"task {task['id']} completed, not journaled" in found
    assert f"request {rid} approved with 0 answer message(s)" in found
