#!/usr/bin/env python3
"""Issue 10's scale table for this code: what one claim, one `task add`, an idle team and a
large roster cost as the board and the team grow, each figure with its runs and spread.

- one claim (in-process, board locked) of a given task,
  and one `teamctl task add` (whole command), at 100 / 1k / 10k / 100k tasks;
- `teamctl logs -n 100` on a 60 MB journal: time and peak RSS (bench/bench_logs.py);
- a `task add` with 10 idle members: until it is claimed, and the members' CPU in all;
  teamd's CPU with those 10 asleep — at 1k and 100k tasks;
- start all members (every first model request) for 10 / 100 / 300 (1,000 with --full),
  and the idle CPU of 10 / 300 awake members, with any fall-back to polling counted;
- N sleeping members (300; 1,000 with --full): teamd's CPU, a roster change until teamd
  acts on it, a sleeper woken (inbox line → its request).

Everything is real: a `teamd run` subprocess forks the teammates, which talk to the scripted
server over HTTP. Boards are written straight to disk (`write_board`; tests/unit/test_board_scale.py
uses it too); rosters are built through the library. Every phase has its share of the time
limit: a size that cannot finish in it is cut short and its row says so, nothing hangs.

    nice python -m bench.scale [--quick | --full] [--tasks 100,1000] [--starts 10,100] …
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from bench import bench_logs
from bench.bench_sleep import asleep, forked_after
from bench.common import Context, Row, bench_env, cell, cpu_ns, figure, fmt, not_measured, row
from bench.lab import TEAM, TEAMCTL, Lab, carries
from teamd import actions, board, files
from teamd.files import Json
from teamd.layout import Workspace
from tests.harness import running_teamd, wait_until

NAME = "scale"
TITLE = "scale curves (bench/scale.py)"
#: tasks per dependency chain in a written board: 1 ← 2 ← 3, 4 ← 5 ← 6, …
CHAIN = 3


def write_board(ws: Workspace, team: str, n: int, *, done: int = 0, first: int = 1) -> None:
    """Tasks `first`..n of an existing team's board, written directly as `board.create`
    would leave them (CONTRACT §5), and `.highwatermark` = n. Tasks form chains of CHAIN
    (each blocked by the one before it in its chain, both ways); tasks 1..done are
    completed, owned by `bench`. To grow a board of m tasks, pass first=m: task m's chain
    goes on. Not fsynced: a benchmark's scratch board, fast to build."""
    folder = ws.store.paths.tasks_dir(team)
    now = time.time()
    for i in range(first, n + 1):
        completed = i <= done
        task = {"schema": 1, "id": i, "subject": f"task {i}", "description": "",
                "status": "completed" if completed else "pending",
                "owner": "bench" if completed else None,
                "blocked_by": [i - 1] if (i - 1) % CHAIN else [],
                "blocks": [i + 1] if i % CHAIN and i < n else [],
                "created_by": "lead", "created_at": now, "updated_at": now,
                "claimed_at": now if completed else None,
                "completed_at": now if completed else None, "commits": []}
        fd = os.open(folder / f"{i}.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(files.dumps_doc(task))
    files.atomic_write_bytes(ws.store.paths.highwatermark(team), f"{n}\n".encode())


# -- sizes -------------------------------------------------------------------------------
@dataclass
class Sizes:
    """What to measure at which size. Every phase is also bounded in time (see `Phase`)."""

    tasks: list[int]          # one claim, one `teamctl task add`
    team_tasks: list[int]     # a `task add` with 10 idle members; teamd with 10 asleep
    members: int              # the team of the two rows above
    starts: list[int]         # start all members
    idle: list[int]           # CPU of N awake idle members (sizes also in `starts`)
    sleepers: int             # N sleeping members: teamd CPU, reconcile, a sleeper woken
    logs_mb: int              # `teamctl logs -n 100` on a journal this big
    window: float             # seconds of each CPU window
    runs: int                 # runs per figure where one run is cheap enough


DEFAULT = Sizes(tasks=[100, 1_000, 10_000, 100_000], team_tasks=[1_000, 100_000], members=10,
                starts=[10, 100, 300], idle=[10, 300], sleepers=1_000, logs_mb=60,
                window=20.0, runs=3)
FULL = replace(DEFAULT, starts=[10, 100, 300, 1_000], window=30.0)
QUICK = Sizes(tasks=[30, 300], team_tasks=[60], members=2, starts=[2], idle=[2], sleepers=2,
              logs_mb=1, window=1.0, runs=2)


class Phase:
    """A share of the benchmark's time: loops stop early past it, waits are cut to it."""

    def __init__(self, ctx: Context, seconds: float) -> None:
        self.deadline = time.monotonic() + max(1.0, min(seconds, ctx.left()))

    def left(self) -> float:
        return max(0.5, self.deadline - time.monotonic())

    def over(self) -> bool:
        return time.monotonic() >= self.deadline


def ms(seconds: float) -> float:
    return seconds * 1000


def sub(ctx: Context, name: str) -> Context:
    """A context whose scratch folder is a fresh sub-folder (a Lab per experiment)."""
    folder = ctx.workdir / name
    folder.mkdir(parents=True)
    return replace(ctx, workdir=folder)


def cpu_of(pids: list[int]) -> int:
    return sum(cpu_ns(p) for p in pids)


def settle(pids: list[int], phase: Phase, quiet: float = 0.25, most: float = 15.0) -> None:
    """Until the processes stop using CPU (under 1 ms in `quiet` s twice, or 20 µs each for
    many), at most `most` s: processes that poll never settle."""
    calm, last = 0, cpu_of(pids)
    until = min(phase.deadline, time.monotonic() + most)
    while calm < 2 and time.monotonic() < until:
        time.sleep(quiet)
        now = cpu_of(pids)
        calm = calm + 1 if now - last < max(1_000_000, 20_000 * len(pids)) else 0
        last = now


def cpu_percent(pids: list[int], seconds: float, slices: int) -> list[float]:
    """% of one core the processes used, per slice of a `seconds` window."""
    out = []
    for _ in range(slices):
        before, t0 = cpu_of(pids), time.monotonic()
        time.sleep(seconds / slices)  # the measurement window itself
        out.append((cpu_of(pids) - before) / 1e9 / (time.monotonic() - t0) * 100)
    return out


def teamctl(root: Path, *args: str, timeout: float = 120) -> tuple[float, str]:
    """Run the console script; (wall seconds, stdout)."""
    t0 = time.monotonic()
    done = subprocess.run([str(TEAMCTL), "--root", str(root), *args], capture_output=True,
                          text=True, timeout=timeout, check=False)
    wall = time.monotonic() - t0
    if done.returncode != 0:
        raise RuntimeError(f"teamctl {' '.join(args)}: {done.stderr.strip()}")
    return wall, done.stdout


def count(n: int) -> str:
    return f"{n:,}"


# -- the board alone ---------------------------------------------------------------------
def board_rows(ctx: Context, sizes: Sizes) -> list[Row]:
    """One claim (in-process) and one `teamctl task add` as the board grows."""
    phase = Phase(ctx, 0.25 * ctx.left())
    ws = Workspace.at(sub(ctx, "board").workdir / "ws")
    ws.root.mkdir()
    actions.create_team(ws, TEAM)
    rows, written = [], 0
    for n in sizes.tasks:
        if phase.over():
            rows.append(not_measured(f"scale_claim_{n}", f"one claim at {count(n)} tasks",
                                     "skipped: the board phase ran out of time"))
            continue
        ctx.progress(f"writing a board of {count(n)} tasks")
        write_board(ws, TEAM, n, first=max(1, written))  # the old last task's chain goes on
        written = n
        # pending chain heads (unblocked), from the top half, never the last task
        heads = [i for i in range(n // 2, n) if i % CHAIN == 1][: sizes.runs]
        given = []
        for tid in heads:
            t0 = time.perf_counter()
            got = board.claim(ws, TEAM, "bench", task_id=tid)
            given.append(ms(time.perf_counter() - t0))
            assert got is not None and got["id"] == tid, (tid, got)
        rows.append(row(
            f"scale_claim_{n}", f"one claim at {count(n)} tasks",
            f"`board.claim` in-process, board lock taken, of a given claimable task (what "
            f"the supervisor's assignment calls) on a board of {count(n)} task files.",
            figure("claim(task_id)", "ms", given)))
        adds = []
        for i in range(sizes.runs):
            wall, _ = teamctl(ws.root, "task", "add", TEAM, f"added {i}")
            adds.append(ms(wall))
            if phase.over():
                break
        rows.append(row(
            f"scale_add_{n}", f"one `teamctl task add` at {count(n)} tasks",
            f"The whole command as a subprocess (interpreter start included) on a board of "
            f"{count(n)} tasks, no teamd running.", figure("teamctl task add", "ms", adds)))
    shutil.rmtree(ws.root, ignore_errors=True)
    return rows


# -- a team on a big board ---------------------------------------------------------------
def team_board_rows(ctx: Context, sizes: Sizes) -> list[Row]:
    rows: list[Row] = []
    for k, n in enumerate(sizes.team_tasks):
        left = len(sizes.team_tasks) - k
        phase = Phase(ctx, 0.35 * ctx.left() / left)
        if k and phase.left() < 30 and not ctx.quick:
            rows.append(not_measured(f"scale_team_add_{n}", f"`task add` with "
                                     f"{sizes.members} idle members at {count(n)} tasks",
                                     "skipped: no time left for this size"))
            continue
        rows += team_board(sub(ctx, f"team-{n}"), sizes, n, phase)
    return rows


def owned(ws: Workspace, task_id: int) -> Json | None:
    task = board.get(ws, TEAM, task_id)
    return task if task["owner"] else None


def team_board(ctx: Context, sizes: Sizes, n: int, phase: Phase) -> list[Row]:
    """A `task add` with idle members (until claimed, their CPU), then teamd's CPU with
    them asleep, on a board of `n` completed tasks."""
    names = [f"m{i:02d}" for i in range(sizes.members)]
    claimed: list[float] = []
    cpu: list[float] = []
    teamd_cpu: list[float] = []
    notes = []
    with Lab(ctx, teamd=False) as lab:
        ctx.progress(f"team board: {count(n)} completed tasks, {len(names)} members")
        write_board(lab.ws, TEAM, n, done=n)  # nothing claimable until a task is added
        with running_teamd(lab.ws, lab.server.url, idle_timeout=3600) as daemon:
            lab.daemon = daemon
            wait_until(lab.supervisor_started, 60, "teamd", interval=0.05)
            for name in names:
                lab.spawn(name)
            try:
                lab.wait_idle(names, phase.left() * 0.4)
            except AssertionError:
                notes.append(f"not all {len(names)} members idle in time")
            pids = [lab.pid(m) for m in names]
            settle(pids, phase)
            for i in range(sizes.runs):
                if i and phase.over():
                    break
                before, t0 = cpu_of(pids), time.time()
                _, out = teamctl(lab.ws.root, "task", "add", TEAM, f"probe {i}", "--json")
                tid = int(json.loads(out)["id"])
                try:
                    task = wait_until(partial(owned, lab.ws, tid), phase.left(),
                                      f"task #{tid} claimed", interval=0.005)
                except AssertionError:
                    notes.append(f"task #{tid} not claimed within the phase's time")
                    break
                assert task is not None
                claimed.append(ms(float(task["claimed_at"]) - t0))
                settle(pids, phase)
                cpu.append((cpu_of(pids) - before) / 1e6)
                board.update(lab.ws, TEAM, tid, status="completed")  # not counted
                settle(pids, phase)
        ctx.progress(f"team board {count(n)}: {len(claimed)} adds; now asleep")
        with running_teamd(lab.ws, lab.server.url, idle_timeout=1) as daemon:
            lab.daemon = daemon
            try:
                wait_until(partial(asleep, lab, names), phase.left(), "members asleep",
                           interval=0.1)
                settle([daemon.pid], phase)
                teamd_cpu = cpu_percent([daemon.pid], sizes.window, max(2, int(sizes.window
                                                                               // 5)))
            except AssertionError:
                notes.append("the members were not all asleep within the phase's time")
    note = ("; ".join(notes) + ".") if notes else ""
    m = sizes.members
    return [
        row(f"scale_team_add_{n}", f"`task add` with {m} idle members at {count(n)} tasks: "
            "until claimed", f"`teamctl task add` (subprocess) while {m} forked teammates idle "
            f"on a board of {count(n)} completed tasks; from just before the command to the "
            "task's `claimed_at`.", figure("until claimed", "ms", claimed), note=note),
        row(f"scale_team_cpu_{n}", f"`task add` with {m} idle members at {count(n)} tasks: "
            "members' CPU", f"CPU time of the {m} member processes summed (schedstat deltas) "
            "from before the command until they are quiet again; includes the claimer's "
            "own turn (one model call to the scripted server).",
            figure("members' CPU", "ms", cpu), note=note),
        row(f"scale_teamd_asleep_{n}", f"teamd CPU, {m} sleeping members, {count(n)} tasks",
            f"% of one core used by `teamd run` over {sizes.window:g} s (in slices) with its "
            f"{m} members asleep (exit 75) on a board of {count(n)} tasks.",
            figure("teamd", "% of a core", teamd_cpu), note=note),
    ]


# -- many members ------------------------------------------------------------------------
def first_requests(lab: Lab, names: list[str], since: int) -> dict[str, float]:
    """Each member's first model request's arrival (epoch), for those that made one."""
    wanted, seen = set(names), {}
    for rec in lab.server.requests[since:]:
        agent = rec["agent"]
        if agent in wanted and agent not in seen:
            seen[agent] = float(rec["received_at"])
    return seen


def all_asked(lab: Lab, names: list[str], since: int) -> bool:
    return len(first_requests(lab, names, since)) == len(names)


def polling_members(lab: Lab, names: list[str]) -> tuple[int, int]:
    """(wake_fallback events in the journal, members whose log says they poll)."""
    fallbacks = sum(1 for r in lab.ws.store.read_journal(TEAM)
                    if r.get("event") == "wake_fallback")
    polling = 0
    for name in names:
        path = lab.ws.member_log(TEAM, name)
        if path.exists() and "polling" in path.read_text(errors="replace"):
            polling += 1
    return fallbacks, polling


def start_rows(ctx: Context, sizes: Sizes) -> list[Row]:
    rows: list[Row] = []
    for k, n in enumerate(sizes.starts):
        left = len(sizes.starts) - k
        if k and ctx.left() < 30:
            rows.append(not_measured(f"scale_start_{n}", f"start {count(n)} members",
                                     "skipped: no time left for this size"))
            continue
        phase = Phase(ctx, 0.5 * ctx.left() / left if left > 1 else 0.6 * ctx.left())
        runs = sizes.runs if n <= 10 else 1
        starts: list[float] = []
        spread: list[float] = []
        idle_cpu: list[float] = []
        fallback = ""
        done = 0
        for r in range(runs):
            if r and phase.over():
                break
            with Lab(sub(ctx, f"start-{n}-{r}")) as lab:
                names = [f"w{i:04d}" for i in range(n)]
                ctx.progress(f"starting {n} members (run {r + 1})")
                since, t0 = len(lab.server.requests), time.time()
                for name in names:
                    lab.spawn(name)
                try:
                    wait_until(partial(all_asked, lab, names, since), phase.left(),
                               f"{n} first requests", interval=0.1)
                except AssertionError:
                    pass
                firsts = first_requests(lab, names, since)
                done = len(firsts)
                if done == n:
                    starts.append(max(firsts.values()) - t0)
                    spread.append(statistics.median(firsts.values()) - t0)
                if n in sizes.idle and r == 0 and done == n:
                    idle_cpu, fallback = idle_window(ctx, lab, names, sizes, phase)
            if done < n:
                break
        note = "" if done == n else (f"only {done} of {n} members had made their first "
                                     "request within the time allowed; not measured")
        detail = (f"median member's first request {fmt(statistics.median(spread))} s"
                  if spread else "")
        rows.append(row(
            f"scale_start_{n}", f"start {count(n)} members (every first request)",
            f"From the first `spawn` of {count(n)} members (added one after the other through "
            "the library while teamd runs) to the last member's first request at the "
            f"scripted server.", figure("all first requests", "s", starts, detail=detail),
            note=note))
        if n in sizes.idle:
            rows.append(row(
                f"scale_idle_{n}", f"idle CPU of {count(n)} awake members",
                f"% of one core used by teamd and {count(n)} idle teammates together over "
                f"{sizes.window:g} s (in slices), after a start as above. {fallback}",
                figure("teamd + members", "% of a core", idle_cpu),
                note="" if idle_cpu else "not measured: the start did not finish in time"))
    return rows


def idle_window(ctx: Context, lab: Lab, names: list[str], sizes: Sizes, phase: Phase
                ) -> tuple[list[float], str]:
    """CPU of teamd + the awake idle members, and whether any fell back to polling."""
    try:
        lab.wait_idle(names, phase.left())
    except AssertionError:
        return [], ""
    assert lab.daemon is not None
    pids = [lab.daemon.pid, *(lab.pid(n) for n in names)]
    settle(pids, phase)
    ctx.progress(f"idle CPU of {len(names)} members over {sizes.window:g} s")
    cpu = cpu_percent(pids, sizes.window, max(2, int(sizes.window // 5)))
    fallbacks, polling = polling_members(lab, names)
    return cpu, (f"Fallen back to polling: {polling} member log(s) say so; "
                 f"{fallbacks} `wake_fallback` event(s) in the journal.")


def sleeper_rows(ctx: Context, sizes: Sizes) -> list[Row]:
    """N sleeping members: teamd's CPU, how soon it acts on a roster change, a wake."""
    n = sizes.sleepers
    if ctx.left() < (5 if ctx.quick else 30):
        return [not_measured(f"scale_sleep_{n}", f"{count(n)} sleeping members",
                             "skipped: no time left for it")]
    phase = Phase(ctx, 0.8 * ctx.left())
    names = [f"s{i:04d}" for i in range(n)]
    cpu: list[float] = []
    acted: list[float] = []
    woken: list[float] = []
    note = ""
    with Lab(sub(ctx, "sleepers"), idle_timeout=1.0) as lab:
        ctx.progress(f"{n} members going to sleep")
        for name in names:
            lab.spawn(name)
        try:
            wait_until(partial(asleep, lab, names), phase.left() * 0.6, f"{n} asleep",
                       interval=0.25)
        except AssertionError:
            note = f"not all {n} members were asleep within the time allowed; not measured"
        if not note:
            assert lab.daemon is not None
            settle([lab.daemon.pid], phase)
            cpu = cpu_percent([lab.daemon.pid], sizes.window, max(2, int(sizes.window // 5)))
            for i in range(sizes.runs):
                if i and phase.over():
                    break
                probe, t0 = f"probe{i}", time.time()
                lab.spawn(probe)  # a roster change: teamd acts by forking it
                ts = wait_until(partial(forked_after, lab, probe, t0), phase.left(),
                                f"{probe} forked", interval=0.005)
                assert ts is not None
                acted.append(ms(ts - t0))
            for i, name in enumerate(names[: sizes.runs]):
                if i and phase.over():
                    break
                text = f"wake-{i}-{uuid.uuid4().hex}"
                since = len(lab.server.requests)
                _, landed = lab.send(name, text)
                rec = lab.server.wait_for(partial(carries, text=text), phase.left(),
                                          since=since)
                woken.append(ms(rec["received_at"] - landed))
    return [
        row(f"scale_sleep_cpu_{n}", f"teamd CPU, {count(n)} sleeping members",
            f"% of one core used by `teamd run` over {sizes.window:g} s (in slices) with "
            f"{count(n)} members asleep (idle_timeout 1 s, exit 75).",
            figure("teamd", "% of a core", cpu), note=note),
        row(f"scale_sleep_act_{n}", f"roster change → teamd acts, {count(n)} sleeping",
            "From `spawn` of one more member (a roster change) to teamd's `spawned` journal "
            "line for it: reconcile seen from outside.", figure("spawn → forked", "ms", acted),
            note=note),
        row(f"scale_sleep_wake_{n}", f"a sleeper woken, {count(n)} sleeping",
            "From a line landing in a sleeper's inbox (fsynced) to the request carrying it "
            "at the scripted server.", figure("inbox → request", "ms", woken), note=note),
    ]


# -- the journal -------------------------------------------------------------------------
def logs_rows(ctx: Context, sizes: Sizes) -> list[Row]:
    """`teamctl logs -n 100` on a big journal (bench/bench_logs.py's fill and measure)."""
    ws = Workspace.at(sub(ctx, "logs").workdir / "ws")
    ws.root.mkdir()
    actions.create_team(ws, bench_logs.TEAM)
    size = bench_logs.fill(ws, sizes.logs_mb)
    walls, peaks = [], []
    for _ in range(sizes.runs):
        wall, peak = bench_logs.measure(ws, "-n", "100")
        walls.append(ms(wall))
        peaks.append(peak)
    shutil.rmtree(ws.root, ignore_errors=True)
    what = (f"`teamctl logs -n 100` (subprocess) on a {size / 1e6:.0f} MB journal; peak RSS "
            "is the child's own ru_maxrss.")
    return [row("scale_logs_time", f"`logs -n 100`, {size / 1e6:.0f} MB journal: time", what,
                figure("teamctl logs -n 100", "ms", walls)),
            row("scale_logs_rss", f"`logs -n 100`, {size / 1e6:.0f} MB journal: peak RSS", what,
                figure("teamctl logs -n 100", "MB", peaks))]


# -- the whole table ---------------------------------------------------------------------
def measure(ctx: Context, sizes: Sizes) -> list[Row]:
    bench_env()
    rows: list[Row] = []
    for part in (board_rows, logs_rows, team_board_rows, start_rows, sleeper_rows):
        done = [tidy(r) for r in part(ctx, sizes)]
        for r in done:  # as it goes: a run cut short still shows what it measured
            ctx.progress(f"{r['title']}: " + (cell(r["ours"]).replace("<br>", "; ")
                                              if r["ours"] else f"{r['note']}: {r['what']}"))
        rows += done
    return rows


def tidy(r: Row) -> Row:
    """A figure cut short before its first run is no figure: the row says why instead."""
    if r.get("baseline") is not None and not r["baseline"]["runs"]:
        r = {**r, "baseline": None, "ratio": None}
    if r.get("ours") is not None and not r["ours"]["runs"]:
        return not_measured(r["key"], r["title"], r["note"] or "no run finished within the "
                            "time allowed", note="not measured")
    return r


def run(ctx: Context) -> list[Row]:
    """`python -m bench`'s entry: the default sizes, or the tiny ones with --quick."""
    return measure(ctx, QUICK if ctx.quick else DEFAULT)


def main(argv: list[str] | None = None) -> int:
    from bench import bench_scale
    from bench.suite import assemble, default_workdir, render

    ap = argparse.ArgumentParser(
        description="Issue 10's scale table for this code, each figure with its spread.",
        epilog="example: nice python -m bench.scale --tasks 100,1000 --starts 10,100",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="tiny sizes (smoke mode)")
    mode.add_argument("--full", action="store_true", help="also 1,000 members")
    ap.add_argument("--tasks", help="board sizes, e.g. 100,1000,10000,100000")
    ap.add_argument("--team-tasks", help="board sizes with a team, e.g. 1000,100000")
    ap.add_argument("--starts", help="members to start, e.g. 10,100,300")
    ap.add_argument("--idle", help="awake idle members measured (among --starts)")
    ap.add_argument("--sleepers", type=int, help="sleeping members")
    ap.add_argument("--logs-mb", type=int, help="journal size for `logs -n 100`")
    ap.add_argument("--window", type=float, help="seconds of each CPU window")
    ap.add_argument("--limit", type=float, help="seconds in all (default: bench_scale's)")
    ap.add_argument("--dir", type=Path, default=None, help="where the scratch workspaces go")
    opts = ap.parse_args(argv)
    sizes = QUICK if opts.quick else FULL if opts.full else DEFAULT

    def ints(text: str) -> list[int]:
        return [int(x) for x in text.split(",") if x.strip()]

    for key in ("tasks", "team_tasks", "starts", "idle"):
        if getattr(opts, key):
            given: dict[str, Any] = {key: ints(getattr(opts, key))}
            sizes = replace(sizes, **given)
    for key in ("sleepers", "logs_mb", "window"):
        if getattr(opts, key) is not None:
            given = {key: getattr(opts, key)}
            sizes = replace(sizes, **given)
    limit = opts.limit or bench_scale.LIMIT[1 if opts.quick else 0]
    workdir = (opts.dir or default_workdir()).resolve()
    scratch = Path(tempfile.mkdtemp(prefix="teamd-scale-", dir=workdir))
    ctx = Context(quick=opts.quick, workdir=scratch, deadline=time.monotonic() + limit,
                  name="scale")
    started = time.monotonic()
    try:
        rows = measure(ctx, sizes)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(render(assemble(opts.quick, workdir, [
        {"name": NAME, "title": TITLE, "status": "ok", "error": "",
         "seconds": round(time.monotonic() - started, 1), "limit": limit, "rows": rows}],
        started)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
