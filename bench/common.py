"""What the benchmarks share: the run context, figures and rows, statistics, the machine.

A benchmark module (`bench/bench_*.py`) exposes `NAME`, `TITLE`, `LIMIT` (seconds, full and
quick) and `run(ctx) -> list[Row]`. Every number a row carries is computed here from the
samples the benchmark measured in this run; nothing is typed in by hand.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[1]
MB = 1024 * 1024

Figure = dict[str, Any]
Row = dict[str, Any]


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def fs_type(path: Path) -> str:
    """The filesystem type of the mount holding `path` (from /proc/mounts), or '?'."""
    best, kind = "", "?"
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return kind
    target = str(path.resolve())
    for line in mounts:
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) > len(best):
            best, kind = point, parts[2]
    return kind


# -- the run context ---------------------------------------------------------------------
@dataclass
class Context:
    """One benchmark's run: its mode, its own scratch folder (on disk), its deadline."""

    quick: bool
    workdir: Path
    deadline: float  # time.monotonic(); loops stop early past it and report the runs done
    name: str = "bench"

    def n(self, full: int, quick: int) -> int:
        return quick if self.quick else full

    def seconds(self, full: float, quick: float) -> float:
        return quick if self.quick else full

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def expired(self) -> bool:
        return time.monotonic() >= self.deadline

    def progress(self, text: str) -> None:
        print(f"  {self.name}: {text}", file=sys.stderr, flush=True)


def bench_env() -> None:
    """No real key, no systemd socket: benchmarks talk to the scripted server only."""
    for key in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "NOTIFY_SOCKET", "WATCHDOG_USEC",
                "WATCHDOG_PID"):
        os.environ.pop(key, None)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)


# -- figures and rows --------------------------------------------------------------------
def figure(label: str, unit: str, values: list[float], *, p99: bool = False,
           counts: dict[str, int] | None = None, detail: str = "") -> Figure:
    """A measured figure: its samples summarised (runs, min, median, max, p50/p99 if asked).

    `headline` is the number a ratio compares: p50 (= median) of the samples.
    """
    fig: Figure = {"label": label, "unit": unit, "runs": len(values), "p99_asked": p99}
    if values:
        fig.update(min=min(values), median=statistics.median(values), max=max(values),
                   mean=statistics.fmean(values), headline=statistics.median(values))
        if p99:
            fig.update(p50=percentile(values, 50), p99=percentile(values, 99))
            fig["headline"] = fig["p50"]
    if counts is not None:
        fig["counts"] = dict(counts)
    if detail:
        fig["detail"] = detail
    fig["samples"] = list(values)
    return fig


def row(key: str, title: str, what: str, ours: Figure | None, baseline: Figure | None = None,
        *, better: str = "lower", note: str = "", compare: bool = True) -> Row:
    """One line of the table: our figure next to the baseline measured in the same run
    (`compare=False` when the two measured different things, e.g. different counts)."""
    ratio = None
    if compare and ours and baseline and ours.get("headline") and baseline.get("headline"):
        a, b = float(ours["headline"]), float(baseline["headline"])
        ratio = b / a if better == "lower" else a / b
    return {"key": key, "title": title, "what": what, "ours": ours, "baseline": baseline,
            "better": better, "ratio": ratio, "compare": compare, "note": note}


def not_measured(key: str, title: str, why: str, note: str = "not yet measured") -> Row:
    """A row with no figure: `note: why` stands in the table instead."""
    return {"key": key, "title": title, "what": why, "ours": None, "baseline": None,
            "better": "lower", "ratio": None, "note": note}


def fmt(value: float) -> str:
    """A number with as many digits as its size deserves."""
    a = abs(value)
    if a >= 100:
        return f"{value:,.0f}"
    if a >= 10:
        return f"{value:.1f}"
    if a >= 1:
        return f"{value:.2f}"
    if a == 0:
        return "0"
    return f"{value:.2g}" if a >= 0.001 else f"{value:.1e}"


def cell(fig: Figure | None) -> str:
    """A figure as one Markdown table cell."""
    if fig is None:
        return "—"
    unit = fig["unit"]
    if not fig["runs"]:
        return f"{fig['label']}: no runs"
    if fig["p99_asked"]:
        head = f"p50 **{fmt(fig['p50'])}** · p99 {fmt(fig['p99'])} {unit}"
    elif fig["runs"] == 1:
        head = f"**{fmt(fig['median'])}** {unit}"
    else:
        head = f"median **{fmt(fig['median'])}** {unit}"
    parts = [f"{fig['label']}: {head}"]
    if fig["runs"] > 1:
        parts.append(f"{fig['runs']} runs, min {fmt(fig['min'])}, max {fmt(fig['max'])}")
    else:
        parts.append("1 run")
    if fig.get("counts"):
        parts.append(", ".join(f"{k} {v}" for k, v in fig["counts"].items()))
    if fig.get("detail"):
        parts.append(fig["detail"])
    return "<br>".join(parts)


def ratio_cell(r: Row) -> str:
    """How ours compares with the baseline, in words that do not depend on which way is
    better: "ours 120× lower" (latency, memory) or "ours 9.9× higher" (throughput)."""
    ours, base = r.get("ours") or {}, r.get("baseline") or {}
    if not r.get("compare", True):
        return "— (not like for like)"
    if r["ratio"] is None:
        if ours.get("headline") == 0 and base.get("headline"):
            return f"ours 0 vs {fmt(base['headline'])}"
        return "—"
    a, b = float(ours["headline"]), float(base["headline"])
    return f"ours {fmt(b / a)}× lower" if a < b else f"ours {fmt(a / b)}× higher"


# -- the machine and the code ------------------------------------------------------------
def machine() -> dict[str, Any]:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_kb = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    except (OSError, ValueError):
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gb": round(mem_kb / 1024 / 1024, 1),
            "kernel": platform.release(), "python": sys.version.split()[0],
            "platform": platform.platform(), "load_average": [round(x, 2) for x in
                                                              os.getloadavg()]}


def commit() -> dict[str, Any]:
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True,
                                  text=True, timeout=10, check=True).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": git("rev-parse", "HEAD") or "?", "branch": git("rev-parse",
            "--abbrev-ref", "HEAD") or "?", "dirty": bool(dirty)}


# -- processes ---------------------------------------------------------------------------
def cpu_ns(pid: int) -> int:
    """Nanoseconds on CPU of every thread of `pid` (/proc/PID/task/*/schedstat: exact,
    where cpu_times counts 10 ms ticks). 0 once the process is gone."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                total += int(fh.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total


def dump(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")
