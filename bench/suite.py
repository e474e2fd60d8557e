"""`python -m bench`: run every benchmark, each in its own bounded process, and write
`results.md` and `results.json` from what this run measured.

Each benchmark runs as `python -m bench --run-one NAME` in a new session: past its time
limit the whole process group is ended (the benchmark's `teamd`, its teammates and the
seed-design processes with it) and the table says so. The parent only collects rows.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

from bench.common import REPO, Context, cell, commit, dump, fs_type, machine, ratio_cell

# In the order of the table in issue 15.
BENCHMARKS = ("wake", "spawn", "idle", "append", "claims", "assign", "cli", "sleep", "cache",
              "sleeper", "scale", "forwarder", "web", "crash", "hosts", "tool_steps")
GRACE = 30.0  # beyond a benchmark's own limit before its process group is ended


def load(name: str) -> ModuleType:
    return importlib.import_module(f"bench.bench_{name}")


def default_workdir() -> Path:
    """Workspaces go on a real disk (fsync costs nothing on tmpfs): the temp folder unless
    it is in memory, else the current directory."""
    tmp = Path(tempfile.gettempdir())
    return Path.cwd() if fs_type(tmp) in ("tmpfs", "ramfs") else tmp


def make_context(module: ModuleType, quick: bool, workdir: Path) -> Context:
    limit = module.LIMIT[1] if quick else module.LIMIT[0]
    work = Path(tempfile.mkdtemp(prefix=f"teamd-bench-{module.NAME}-", dir=workdir))
    # the benchmark stops early at 85 % of its limit and reports the runs it managed
    return Context(quick=quick, workdir=work, deadline=time.monotonic() + 0.85 * limit,
                   name=module.NAME)


def run_one(name: str, quick: bool, workdir: Path, result: Path, keep: bool) -> int:
    """In the child: run one benchmark and write its rows (or its error) to `result`."""
    def on_term(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)  # run the `finally`s: stop teamd, end seed members

    signal.signal(signal.SIGTERM, on_term)
    module = load(name)
    ctx = make_context(module, quick, workdir)
    try:
        rows = module.run(ctx)
        dump(result, {"rows": rows})
        return 0
    except Exception as exc:
        traceback.print_exc()
        dump(result, {"rows": [], "error": f"{type(exc).__name__}: {exc}"})
        return 1
    finally:
        if not keep:
            shutil.rmtree(ctx.workdir, ignore_errors=True)


def run_child(module: ModuleType, opts: argparse.Namespace) -> dict[str, Any]:
    limit = module.LIMIT[1] if opts.quick else module.LIMIT[0]
    fd, result_name = tempfile.mkstemp(prefix="teamd-bench-result-", suffix=".json")
    os.close(fd)
    result = Path(result_name)
    cmd = [sys.executable, "-m", "bench", "--run-one", module.NAME, "--result", str(result),
           "--dir", str(opts.dir)]
    cmd += ["--quick"] if opts.quick else []
    cmd += ["--keep"] if opts.keep else []
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=REPO, start_new_session=True, stdin=subprocess.DEVNULL)
    status, error = "ok", ""
    try:
        proc.wait(limit + GRACE)
    except subprocess.TimeoutExpired:
        status, error = "timeout", f"stopped after {limit + GRACE:.0f} s"
        end_group(proc)
    seconds = time.monotonic() - started
    try:
        found = json.loads(result.read_text() or "{}")
    except (OSError, ValueError):
        found = {}
    finally:
        result.unlink(missing_ok=True)
    if found.get("error"):
        status, error = "error", found["error"]
    elif status == "ok" and proc.returncode != 0:
        status, error = "error", f"exited {proc.returncode}"
    return {"name": module.NAME, "title": module.TITLE, "status": status, "error": error,
            "seconds": round(seconds, 1), "limit": limit, "rows": found.get("rows", [])}


def end_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the benchmark's process group (its finallys stop teamd), SIGKILL after 15 s."""
    for sig, wait in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


# -- writing the results -----------------------------------------------------------------
def render(results: dict[str, Any]) -> str:
    m, c = results["machine"], results["code"]
    lines = [
        "# teamd benchmarks",
        "",
        f"Written by `python -m bench{' --quick' if results['quick'] else ''}` on "
        f"{results['date']} in {results['seconds']:.0f} s; commit `{c['commit'][:12]}` "
        f"({c['branch']}{', with uncommitted changes' if c['dirty'] else ''}). Every figure "
        "below comes from that run; each baseline was measured in the same run.",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gb']} GB, Linux {m['kernel']}, "
        f"Python {m['python']}; workspaces on {results['filesystem']}; load average "
        f"{' '.join(map(str, m['load_average']))} before the run.",
        "",
        "| figure | ours | baseline, same run | ours vs baseline |",
        "|---|---|---|---|",
    ]
    notes = []
    for bench in results["benchmarks"]:
        if bench["status"] != "ok" and not bench["rows"]:
            lines.append(f"| {bench['title']} | {bench['status']}: {bench['error'][:300]} | — "
                         "| — |")
            continue
        for r in bench["rows"]:
            if r["ours"] is None and r["baseline"] is None:
                lines.append(f"| {r['title']} | {r['note']}: {r['what']} | — | — |")
                continue
            lines.append(f"| {r['title']} | {cell(r['ours'])} | {cell(r['baseline'])} | "
                         f"{ratio_cell(r)} |")
            notes.append(f"- **{r['title']}** — {r['what']}"
                         + (f" {r['note']}" if r.get("note") else ""))
        if bench["status"] != "ok":
            notes.append(f"- **{bench['title']}**: {bench['status']} ({bench['error']}); "
                         "the rows above are what it measured before that.")
    lines += ["", "Cells: the headline figure (p50 where p99 is asked, else the median), then "
              "the number of runs and their spread. The ratio compares the headlines.", "",
              "## How each figure was measured", "", *notes, "",
              "## Time per benchmark", ""]
    lines += [f"- {b['name']}: {b['seconds']:.0f} s (limit {b['limit']:.0f} s), {b['status']}"
              for b in results["benchmarks"]]
    return "\n".join(lines) + "\n"


def write(results: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    dump(out / "results.json", results)
    (out / "results.md").write_text(render(results))


def standalone(module: ModuleType) -> int:
    """`python -m bench.bench_X [--quick]`: one benchmark in this process, table printed."""
    ap = argparse.ArgumentParser(description=(module.__doc__ or "").split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny counts (smoke mode)")
    ap.add_argument("--dir", type=Path, default=default_workdir(),
                    help="where the temporary workspaces go (a real disk)")
    opts = ap.parse_args()
    started = time.monotonic()
    ctx = make_context(module, opts.quick, opts.dir)
    try:
        rows = module.run(ctx)
    finally:
        shutil.rmtree(ctx.workdir, ignore_errors=True)
    print(render(assemble(opts.quick, opts.dir, [
        {"name": module.NAME, "title": module.TITLE, "status": "ok", "error": "",
         "seconds": round(time.monotonic() - started, 1),
         "limit": module.LIMIT[1 if opts.quick else 0], "rows": rows}], started)))
    return 0


def assemble(quick: bool, workdir: Path, benches: list[dict[str, Any]], started: float,
             before: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"schema": 1, "quick": quick,
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "seconds": round(time.monotonic() - started, 1),
            "machine": before or machine(), "code": commit(), "filesystem": fs_type(workdir),
            "benchmarks": benches}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench",
        description="Run teamd's benchmarks, each next to its seed-design baseline, and "
        "write results.md and results.json.",
        epilog="example: python -m bench --quick --out /tmp/b   (smoke run, a few seconds "
        "each)\n         python -m bench --only wake,spawn",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny counts: the smoke mode")
    ap.add_argument("--only", action="append", default=[], metavar="NAME",
                    help=f"run only these (comma-separated or repeated): {', '.join(BENCHMARKS)}")
    ap.add_argument("--out", type=Path, default=REPO / "bench",
                    help="where results.md and results.json go (default: bench/)")
    ap.add_argument("--dir", type=Path, default=None,
                    help="where the temporary workspaces go (default: the temp folder, "
                    "unless it is a tmpfs)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary workspaces")
    ap.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    ap.add_argument("--run-one", help=argparse.SUPPRESS)
    ap.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    opts = ap.parse_args(argv)
    opts.dir = (opts.dir or default_workdir()).resolve()
    if opts.run_one:
        return run_one(opts.run_one, opts.quick, opts.dir, opts.result, opts.keep)
    if opts.list:
        for name in BENCHMARKS:
            print(f"{name:<8} {load(name).TITLE}")
        return 0
    chosen = [n.strip() for arg in opts.only for n in arg.split(",") if n.strip()]
    unknown = [n for n in chosen if n not in BENCHMARKS]
    if unknown:
        print(f"python -m bench: unknown benchmark {', '.join(unknown)}; one of: "
              f"{', '.join(BENCHMARKS)}", file=sys.stderr)
        return 2
    if not opts.dir.is_dir():
        print(f"python -m bench: --dir {opts.dir} is not a folder", file=sys.stderr)
        return 2
    names = [n for n in BENCHMARKS if not chosen or n in chosen]
    started, before = time.monotonic(), machine()
    fs = fs_type(opts.dir)
    print(f"teamd benchmarks{' (quick)' if opts.quick else ''}: {len(names)} to run; "
          f"workspaces in {opts.dir} ({fs}); results to {opts.out}", file=sys.stderr)
    if fs in ("tmpfs", "ramfs"):
        print("warning: the workspaces are in memory; fsync costs nothing there",
              file=sys.stderr)
    benches = []
    for i, name in enumerate(names, 1):
        module = load(name)
        limit = module.LIMIT[1] if opts.quick else module.LIMIT[0]
        print(f"[{i}/{len(names)}] {name}: {module.TITLE} (limit {limit:.0f} s)",
              file=sys.stderr, flush=True)
        result = run_child(module, opts)
        print(f"[{i}/{len(names)}] {name}: {result['status']} in {result['seconds']:.0f} s"
              + (f" ({result['error']})" if result["error"] else ""), file=sys.stderr,
              flush=True)
        benches.append(result)
    results = assemble(opts.quick, opts.dir, benches, started, before)
    write(results, opts.out)
    print(render(results))
    print(f"wrote {opts.out / 'results.md'} and {opts.out / 'results.json'}", file=sys.stderr)
    return 0 if all(b["status"] == "ok" for b in benches) else 1
