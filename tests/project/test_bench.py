"""The benchmark suite's smoke mode (`python -m bench --quick`): every benchmark runs with
tiny counts and writes well-formed results, so the benchmarks never rot. No figure is
asserted: speed is shown by the full `python -m bench`, never by timed assertions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.suite import BENCHMARKS

REPO = Path(__file__).resolve().parents[2]
# rows the table gives a baseline measured in the same run
WITH_BASELINE = ("delivery", "spawn", "pss", "uss", "memory_total", "cpu", "append_fsync_on",
                 "append_fsync_off", "claims", "cli_list", "cli_send", "cache_share",
                 "cache_cost")


def git_status() -> str:
    return subprocess.run(["git", "-C", str(REPO), "status", "--porcelain"],
                          capture_output=True, text=True, check=False).stdout


def check_figure(fig: dict[str, Any]) -> None:
    assert fig["runs"] >= 1 and fig["runs"] == len(fig["samples"]), fig
    assert fig["min"] <= fig["median"] <= fig["max"], fig
    assert fig["min"] == min(fig["samples"]) and fig["max"] == max(fig["samples"])
    if fig["p99_asked"]:
        assert fig["min"] <= fig["p50"] <= fig["p99"] <= fig["max"], fig


@pytest.mark.timeout(900)
def test_quick_run_writes_every_benchmark_to_out(tmp_path: Path) -> None:
    out, work = tmp_path / "out", tmp_path / "work"
    work.mkdir()
    before = git_status()
    done = subprocess.run([sys.executable, "-m", "bench", "--quick", "--out", str(out),
                           "--dir", str(work)], cwd=REPO, capture_output=True, text=True,
                          timeout=840)
    assert done.returncode == 0, done.stderr[-4000:]
    assert f"[{len(BENCHMARKS)}/{len(BENCHMARKS)}]" in done.stderr  # progress was shown

    results = json.loads((out / "results.json").read_text())
    assert results["quick"] is True
    assert len(results["code"]["commit"]) == 40
    assert results["machine"]["cores"] >= 1 and results["machine"]["cpu"]
    assert [b["name"] for b in results["benchmarks"]] == list(BENCHMARKS)
    rows = {}
    for bench in results["benchmarks"]:
        assert bench["status"] == "ok", bench
        assert bench["rows"], bench["name"]
        for r in bench["rows"]:
            rows[r["key"]] = r
            for fig in (r["ours"], r["baseline"]):
                if fig is not None:
                    check_figure(fig)
    for key in WITH_BASELINE:
        assert rows[key]["ours"] and rows[key]["baseline"], key
    for key in ("delivery", "send"):
        assert rows[key]["ours"]["p99_asked"]
    for key in ("append_fsync_on", "append_fsync_off"):
        for side in ("ours", "baseline"):
            assert set(rows[key][side]["counts"]) >= {"lost", "duplicated", "torn"}
    assert rows["claims"]["baseline"]["counts"]["double_claims"] >= 0
    if not (REPO / "bench" / "scale.py").exists():
        assert rows["scale"]["note"] == "not yet measured"

    md = (out / "results.md").read_text()
    assert results["code"]["commit"][:12] in md
    table = [line for line in md.splitlines() if line.startswith("| ")]
    assert len(table) == 1 + len(rows)  # the header and one line per row
    for r in rows.values():
        assert r["title"] in md
    assert "not yet measured" in md or (REPO / "bench" / "scale.py").exists()

    assert list(work.iterdir()) == []  # the workspaces were removed
    assert git_status() == before  # nothing written into the repository


def test_unknown_benchmark_is_refused() -> None:
    done = subprocess.run([sys.executable, "-m", "bench", "--only", "wake,nope"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"python -m bench: unknown benchmark nope; one of: {', '.join(BENCHMARKS)}"]
