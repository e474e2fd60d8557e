"""The crash sweep (CONTRACT §17, issue 22): each scenario counted, then crashed just before
and just after its writes in every process that writes, recovered, and checked.

By default a sample of points per scenario (the first and last write of each process among
them) and the regression points of what the sweep found; every point with
`pytest -m crash_full tests/crash` or `TEAMD_CRASH_SWEEP=full`. Each prints its figures
(`[crash figure] …`, shown with `-s` or `-rA`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.crash import scenarios
from tests.crash.sweep import Point, Report, run_once, sweep

#: points per scenario in the default (fast) form
SAMPLE = 4
FULL = os.environ.get("TEAMD_CRASH_SWEEP") == "full"


def figures(report: Report) -> None:
    print(f"[crash figure] {report.name}: {report.writes} durable writes "
          f"{report.counts}, {len(report.outcomes) - 1} points tried ({report.fired} fired), "
          f"{report.checks} invariant checks, {len(report.violations)} violations, "
          f"{report.seconds:.1f} s")


def assert_clean(report: Report) -> None:
    figures(report)
    assert not report.violations, "\n".join(report.violations)


@pytest.mark.parametrize("name", ["message", "lead-message", "plan", "shutdown",
                                  "shutdown-offline"])
def test_a_sample_of_points(tmp_path: Path, name: str) -> None:
    if FULL:
        pytest.skip("TEAMD_CRASH_SWEEP=full: the whole sweep runs instead")
    assert_clean(sweep(tmp_path, scenarios.SPECS[name], SAMPLE))


@pytest.mark.crash_full
@pytest.mark.parametrize("name", sorted(set(scenarios.SPECS) - {"delete"}))
def test_every_point(tmp_path: Path, name: str, request: pytest.FixtureRequest) -> None:
    if not (FULL or "crash_full" in str(request.config.getoption("markexpr") or "")):
        pytest.skip("the whole sweep: -m crash_full or TEAMD_CRASH_SWEEP=full")
    assert_clean(sweep(tmp_path, scenarios.SPECS[name], None))


# -- what the sweep found, each kept at its crash point ------------------------------------
def one(tmp_path: Path, name: str, point: Point) -> None:
    outcome, _ = run_once(tmp_path, scenarios.SPECS[name], point)
    assert outcome.fired, f"{point} was not reached: the regression no longer aims there"
    assert not outcome.violations, "\n".join(outcome.violations)


@pytest.mark.parametrize("point", [
    Point("teamctl:approve", 1, True),  # the record approved, no message yet
    Point("teamctl:approve", 3, False),  # journaled, not yet in the member's inbox
])
def test_approve_killed_after_its_record_delivers_once_when_run_again(
        tmp_path: Path, point: Point) -> None:
    one(tmp_path, "plan", point)


@pytest.mark.parametrize("n, after", [(n, a) for n in range(1, 6) for a in (False, True)])
def test_a_shutdown_answered_for_a_member_not_running_is_one_change(
        tmp_path: Path, n: int, after: bool) -> None:
    """Every point of `teamctl shutdown` of a member with no process: never a `pending`
    record, never an answer without its message, never a status without its line."""
    one(tmp_path, "shutdown-offline", Point("teamctl:shutdown", n, after))


@pytest.mark.parametrize("point", [Point("teamctl:send", 1, True),
                                   Point("teamctl:send", 2, False)])
def test_send_with_an_id_run_again_delivers_once(tmp_path: Path, point: Point) -> None:
    one(tmp_path, "message", point)


@pytest.mark.xfail(strict=True, reason="store seam: delete removes .tasks/TEAM first, and "
                   "create refuses a left-over .tasks/TEAM")
def test_a_team_deleted_never_brings_its_tasks_back(tmp_path: Path) -> None:
    one(tmp_path, "delete", Point("teamctl:delete", 4, True))
