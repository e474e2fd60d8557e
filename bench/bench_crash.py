#!/usr/bin/env python3
"""The crash sweep (CONTRACT §17, issue 22): for each scenario, its durable writes counted,
then a run crashed just before and just after each write of each process that writes
(`teamd`, a teammate, the LLM lead, each `teamctl` command), recovered, and checked against
the invariants (`tests/crash/`). The figure is the time per point; the counts say how many
writes, points, invariant checks and violations. `--quick`: a sample of points.

    python -m bench.bench_crash [--quick]
"""

from __future__ import annotations

import sys

from bench.common import Context, Row, bench_env, figure, row
from tests.crash import scenarios
from tests.crash.sweep import Report, sweep

NAME = "crash"
TITLE = "crash at every write (before and after each), then the invariants"
LIMIT = (2400.0, 300.0)
#: points per scenario with --quick
QUICK_SAMPLE = 4
#: what the sweep runs: every scenario the suite sweeps in full
SWEPT = ("message", "lead-message", "plan", "permission", "shutdown", "shutdown-offline",
         "task")


def scenario_row(report: Report) -> Row:
    tried = len(report.outcomes) - 1
    counts = {"durable writes": report.writes, "points": report.planned, "tried": tried,
              "fired": report.fired, "invariant checks": report.checks,
              "violations": len(report.violations)}
    detail = ", ".join(f"{who} {n}" for who, n in sorted(report.counts.items()))
    fig = figure("seconds per point", "s", [o.seconds for o in report.outcomes[1:]],
                 counts=counts, detail=detail)
    note = f"{len(report.violations)} violations" + (
        f"; {report.planned - tried} points not reached in the time" if tried < report.planned
        else "")
    return row(f"crash-{report.name}", f"crash sweep: {report.name}",
               f"{report.writes} writes ({detail}); {tried} of {report.planned} points, "
               f"{report.fired} fired; {report.checks} invariant checks", fig,
               compare=False, note=note)


def run(ctx: Context) -> list[Row]:
    bench_env()
    rows: list[Row] = []
    total: list[float] = []
    for name in SWEPT:
        if ctx.expired():
            rows.append(row(f"crash-{name}", f"crash sweep: {name}", "not reached in the time",
                            None, compare=False, note="out of time"))
            continue
        ctx.progress(name)
        report = sweep(ctx.workdir / name, scenarios.SPECS[name],
                       QUICK_SAMPLE if ctx.quick else None, ctx.expired)
        total.append(report.seconds)
        rows.append(scenario_row(report))
    rows.append(row("crash", TITLE, f"{len(SWEPT)} scenarios, the whole sweep's time",
                    figure("sweep", "s", [sum(total)]), compare=False))
    return rows


if __name__ == "__main__":
    from bench.suite import standalone

    sys.exit(standalone(sys.modules[__name__]))
