"""The crash sweep (CONTRACT §17, issue 22): each scenario counted, then crashed just before
and just after its writes in every process that writes, recovered, and checked.

By default a sample of points per scenario (spread over the processes that write) and the
regression points of what the sweep found; every point with
`pytest -m crash_full tests/crash` or `TEAMD_CRASH_SWEEP=full`. Each prints its figures
(`[crash figure] …`, shown with `-s` or `-rA`).

The same on the PostgreSQL store (CONTRACT §15), each run on a fresh database of the private
cluster (`pg_cluster`; skipped, saying why, where PostgreSQL is not installed): the tests
named `…_on_postgres` (`pytest tests/crash -k postgres`), a smaller sample by default."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import postgres
from tests.crash import scenarios
from tests.crash.sweep import COUNTED, Point, Report, SweepStore, aim, run_once, sweep

#: points per scenario in the default (fast) form
SAMPLE = 3
#: points per scenario in the default form on PostgreSQL (the counting run is checked too)
PG_SAMPLE = 1
#: the scenarios the default form samples (the others' points are kept as regressions)
SAMPLED = ["message", "lead-message", "plan", "permission", "shutdown", "task", "compaction",
           "budget", "remove"]
FULL = os.environ.get("TEAMD_CRASH_SWEEP") == "full"


def figures(report: Report) -> None:
    print(f"[crash figure] {report.name}: {report.writes} durable writes "
          f"{report.counts}, {len(report.outcomes) - 1} points tried ({report.fired} fired), "
          f"{report.checks} invariant checks, {len(report.violations)} violations, "
          f"{report.seconds:.1f} s")


def assert_clean(report: Report) -> None:
    figures(report)
    assert not report.violations, "\n".join(report.violations)


@pytest.fixture
def on_postgres(pg_cluster: postgres.Cluster) -> SweepStore:
    """Each run of a sweep on a fresh database of the private cluster."""
    return SweepStore.on_postgres(pg_cluster)


def sampled() -> None:
    if FULL:
        pytest.skip("TEAMD_CRASH_SWEEP=full: the whole sweep runs instead")


def whole(request: pytest.FixtureRequest) -> None:
    if not (FULL or "crash_full" in str(request.config.getoption("markexpr") or "")):
        pytest.skip("the whole sweep: -m crash_full or TEAMD_CRASH_SWEEP=full")


@pytest.mark.parametrize("name", SAMPLED)
def test_a_sample_of_points(tmp_path: Path, name: str) -> None:
    sampled()
    assert_clean(sweep(tmp_path, scenarios.SPECS[name], SAMPLE))


@pytest.mark.parametrize("name", SAMPLED)
def test_a_sample_of_points_on_postgres(tmp_path: Path, name: str,
                                        on_postgres: SweepStore) -> None:
    sampled()
    assert_clean(sweep(tmp_path, scenarios.SPECS[name], PG_SAMPLE, store=on_postgres))


@pytest.mark.crash_full
@pytest.mark.timeout(0)  # a scenario's every point takes minutes: its runs are bounded each
@pytest.mark.parametrize("name", sorted(scenarios.SPECS))
def test_every_point(tmp_path: Path, name: str, request: pytest.FixtureRequest) -> None:
    whole(request)
    assert_clean(sweep(tmp_path, scenarios.SPECS[name], None))


@pytest.mark.crash_full
@pytest.mark.timeout(0)
@pytest.mark.parametrize("name", sorted(scenarios.SPECS))
def test_every_point_on_postgres(tmp_path: Path, name: str, request: pytest.FixtureRequest,
                                 on_postgres: SweepStore) -> None:
    whole(request)
    assert_clean(sweep(tmp_path, scenarios.SPECS[name], None, store=on_postgres))


# -- what the sweep found, each kept at its crash point ------------------------------------
def one(tmp_path: Path, name: str, point: Point | Callable[[Path, bool], Point],
        path_end: str | None = None) -> None:
    """Run `name` crashed at `point`: it must fire there (at a path ending in `path_end`,
    if given) and leave no violation. A point found by a counting run (`point` a function
    of a folder and whether to count afresh) may be a write off in the next run (a status
    written once more, say, or one fewer, so that the point is never reached): then it is
    found again by a new count, up to 3 times."""
    missed: list[str] = []
    for attempt in range(3):
        w_tmp = tmp_path / f"run{attempt}"
        aimed_at = point(tmp_path / f"count{attempt}", attempt > 0) if callable(point) \
            else point
        outcome, _ = run_once(w_tmp, scenarios.SPECS[name], aimed_at)
        if not outcome.fired:
            assert callable(point), f"{aimed_at} was not reached: the regression aims nowhere"
            missed.append(f"{aimed_at} not reached")
            continue
        fired = [json.loads(line) for line in (w_tmp / "crash.jsonl").read_text().splitlines()
                 if '"fired"' in line]
        if path_end is None or fired[0]["path"].endswith(path_end):
            assert not outcome.violations, "\n".join(outcome.violations)
            return
        missed.append(f"{aimed_at} fired at {fired[0]['path']}")
    raise AssertionError(f"3 runs never crashed at *{path_end}: {missed}")


def aimed(tmp_path: Path, name: str, who: str, path_end: str, after: bool) -> None:
    one(tmp_path, name, lambda tmp, fresh: aim(tmp, scenarios.SPECS[name], who, path_end,
                                                after, fresh=fresh), path_end)


@pytest.mark.parametrize("path_end, after", [
    (".json", True),  # the request record approved, no message yet
    ("alice_inbox.jsonl", False),  # not yet in the member's inbox
])
def test_approve_killed_after_its_record_delivers_once_when_run_again(
        tmp_path: Path, path_end: str, after: bool) -> None:
    """Found from outside first: the answer lost, and approve run again refused."""
    aimed(tmp_path, "plan", "teamctl:approve", path_end, after)


@pytest.mark.parametrize("n, after", [(n, a) for n in range(1, 6) for a in (False, True)])
def test_a_shutdown_answered_for_a_member_not_running_is_one_change(
        tmp_path: Path, n: int, after: bool) -> None:
    """Every point of `teamctl shutdown` of a member with no process: never a `pending`
    record, never an answer without its message, never a status without its line."""
    one(tmp_path, "shutdown-offline", Point("teamctl:shutdown", n, after))


@pytest.mark.parametrize("path_end, after", [("alice_inbox.jsonl", True),
                                             ("events.jsonl", False)])
def test_send_with_an_id_run_again_delivers_once(tmp_path: Path, path_end: str,
                                                 after: bool) -> None:
    aimed(tmp_path, "message", "teamctl:send", path_end, after)


@pytest.mark.parametrize("journaled", [False, True])
def test_a_reply_cut_off_by_a_crash_is_sent_once(tmp_path: Path, journaled: bool) -> None:
    """Found by the sweep: alice killed after her SendMessage landed (in the lead's inbox,
    in the journal) and before its result was recorded got "interrupted" on resume, and
    the model sent the reply again. Now the message carries the call's id and the call is
    run again on resume, landing only where it had not."""
    def point(tmp: Path, fresh: bool) -> Point:
        # just after the lead's inbox, or just after the journal line that follows it
        landed = aim(tmp, scenarios.SPECS["message"], "alice", "lead_inbox.jsonl", True,
                     fresh=fresh)
        return Point("alice", landed.n + journaled, True)
    one(tmp_path, "message", point, "events.jsonl" if journaled else "lead_inbox.jsonl")


def test_a_status_whose_line_a_crash_cut_is_journaled_by_the_next_teamd(
        tmp_path: Path) -> None:
    """Found from outside first (the known one): teamd killed between a member's status
    (here its last, `pending`, on the way out) and its journal line; the next teamd's start
    journals the move."""
    def point(tmp: Path, fresh: bool) -> Point:
        last = aim(tmp, scenarios.SPECS["message"], "teamd", "members/alice.json", False, -1,
                   fresh=fresh)
        return Point("teamd", last.n + 1, False)
    one(tmp_path, "message", point, "events.jsonl")


@pytest.mark.parametrize("path_end, after", [("config.json", True),
                                             ("lead_inbox.jsonl", False)])
def test_a_member_killed_approving_its_shutdown_leaves_it_answered_once(
        tmp_path: Path, path_end: str, after: bool) -> None:
    """Found by the sweep: alice killed after writing `desired=stopped` (or after answering
    the record, before her message) left the request `pending` (or answered with no
    message); teamd, recording her exit for good, now finishes it."""
    aimed(tmp_path, "shutdown", "alice", path_end, after)


def test_a_task_completed_by_a_member_killed_before_its_line_is_journaled(
        tmp_path: Path) -> None:
    """Found by the sweep: alice killed between the task file (completed) and its
    `task_completed` line; teamd, reaping her, journals it."""
    aimed(tmp_path, "task", "alice", "/1.json", True)


def test_a_team_deleted_never_brings_its_tasks_back(tmp_path: Path) -> None:
    """Found from outside first: `.teams/TEAM` renamed away, the kill, `.tasks/TEAM` left:
    the next `create TEAM` brings the old tasks back."""
    aimed(tmp_path, "delete", "teamctl:delete", "/tasks", False)


@pytest.mark.parametrize("path_end", ["members/alice.json", "events.jsonl"])
def test_a_removal_killed_after_the_roster_is_finished_by_remove_run_again(
        tmp_path: Path, path_end: str) -> None:
    """Found by the sweep: `remove` killed after `config.json` left alice out (before her
    status file went, or before the `member_removed` line): run again, it said no such
    member, and the line was lost. Now the roster's write comes last, and the next
    `remove` of that name journals the line (and drops the status file left)."""
    one(tmp_path, "remove", lambda tmp, fresh: aim(
        tmp, scenarios.SPECS["remove"], "teamctl:remove", path_end, False, -1, fresh=fresh),
        path_end)


def test_a_create_killed_before_its_line_is_journaled_by_create_run_again(
        tmp_path: Path) -> None:
    """The known one, left before: `create` killed between `config.json` and its
    `team_created` line lost the line, and `create` again said the team exists. A team
    whose journal holds no line at all has it journaled (`"repaired": true`) by the next
    `create` of that name, which then succeeds (and by `teamd`'s start)."""
    aimed(tmp_path, "delete", "teamctl:create", "events.jsonl", False)


@pytest.mark.parametrize("path_end, after", [("lead_inbox.jsonl", True),
                                             ("events.jsonl", False)])
def test_a_member_killed_telling_its_budget_tells_the_lead_once(
        tmp_path: Path, path_end: str, after: bool) -> None:
    """Found by the sweep: alice killed after her `budget_reached` note landed (before its
    journal line, or before her status) told the lead again once restarted. The note's id
    now comes from her `budget_reached` line, which a restart still paused finds (no model
    call since): it delivers the note only where it has not landed."""
    def point(tmp: Path, fresh: bool) -> Point:
        note = aim(tmp, scenarios.SPECS["budget"], "alice", "lead_inbox.jsonl", True,
                   fresh=fresh)
        return Point("alice", note.n + (not after), after)
    one(tmp_path, "budget", point, path_end)


@pytest.mark.parametrize("back", [1, 8])
def test_a_member_killed_after_a_big_reply_compacts_once_restarted(
        tmp_path: Path, back: int) -> None:
    """Found by the sweep: alice killed between the reply that filled her context and the
    compaction the next message was to start with (here `back` writes before it saves
    her transcript) forgot the context's size once restarted, and answered without
    compacting. The size is now read back from the last reply in her session."""
    def point(tmp: Path, fresh: bool) -> Point:
        if fresh or "compaction" not in COUNTED:
            run_once(tmp, scenarios.SPECS["compaction"], None)
        saved = next(rec for who, rec in COUNTED["compaction"]
                     if who == "alice" and "/transcripts/" in rec["path"])
        return Point("alice", int(saved["n"]) - back, False)
    one(tmp_path, "compaction", point)


def test_a_member_killed_before_approving_its_removal_is_not_started_again(
        tmp_path: Path) -> None:
    """Found by the sweep: alice killed as she approved the shutdown `remove` asked (before
    `desired=stopped`) was gone, which is enough for `remove`, but teamd started her again
    by policy, and `remove` failed: still running. `remove` now stops a member that died
    without answering, so nothing starts it again."""
    aimed(tmp_path, "remove", "alice", "config.json", False)


def test_a_compaction_whose_line_a_kill_cut_is_journaled_by_the_member_restarted(
        tmp_path: Path) -> None:
    """Found by the sweep: alice killed between her session's compaction record and its
    `compacted` line lost the line; restarted, she journals it (`"repaired": true`)."""
    def point(tmp: Path, fresh: bool) -> Point:
        if fresh or "compaction" not in COUNTED:
            run_once(tmp, scenarios.SPECS["compaction"], None)
        mine = [rec for who, rec in COUNTED["compaction"] if who == "alice"]
        saved = next(i for i, rec in enumerate(mine) if "/transcripts/" in rec["path"])
        line = next(rec for rec in mine[saved:] if rec["path"].endswith("events.jsonl"))
        return Point("alice", int(line["n"]), False)
    one(tmp_path, "compaction", point, "events.jsonl")
