#!/usr/bin/env python3
"""What idle teammates cost: CPU of teamd + 50 idle teammates, memory of 100.

Ours (forked by a real `teamd run`, each waiting on its wake pipe, teamd the one inotify
watcher) and the baseline (seed teammates,
fresh interpreters polling inbox and board every second) run side by side, so both windows
see the same machine; each process's CPU is its own (/proc/PID/task/*/schedstat, exact to
the nanosecond), so one set does not count against the other. The board holds 20 completed
tasks, which the seed teammates scan on every poll (as the seeds' idle loop does).

1. 50 of each, all idle: CPU over a 30 s window, cut in 5 s slices (the spread).
2. 50 more of each: memory of 100 idle teammates — PSS and USS of each, and the PSS of all
   of them together (ours: plus teamd itself).

    python -m bench.bench_idle [--quick]
"""

from __future__ import annotations

import sys
import time
from functools import partial

import psutil

from bench.common import MB, Context, Row, cpu_ns, figure, row
from bench.lab import TEAM, Lab, is_from
from teamd import board

NAME = "idle"
TITLE = "idle teammates: CPU over 30 s, memory of 100 (forked vs fresh, wake pipe vs polling)"
LIMIT = (420.0, 60.0)
TASKS = 20


def start(lab: Lab, ctx: Context, first: int, count: int, until: float
          ) -> tuple[list[str], list[str]]:
    """Start `count` more teammates of each kind and return those ready by `until`
    (monotonic): ours idle, seed teammates past their first request (then polling). On a
    machine too busy to start them all in time, the rest are ended and the rows say how
    many were measured."""
    ours = [f"m{i:03d}" for i in range(first, first + count)]
    seeds = [f"seed{i:03d}" for i in range(first, first + count)]
    since = len(lab.server.requests)
    for name in ours:
        lab.spawn(name)
    for name in seeds:
        lab.start_seed(name, tasks=lab.ws.store.paths.tasks_dir(TEAM))
    try:
        lab.wait_idle(ours, max(1.0, until - time.monotonic()))
    except AssertionError:
        ours = [n for n in ours if lab.is_idle(n)]
    ready = []
    for name in seeds:
        try:
            lab.server.wait_for(partial(is_from, name), max(0.1, until - time.monotonic()),
                                since=since)
            ready.append(name)
        except TimeoutError:
            lab.stop_seed(name)  # still importing: not measured, and not left to load the CPU
    return ours, ready


def cpu_window(pids: dict[str, list[int]], seconds: float, slices: int
               ) -> dict[str, list[float]]:
    """% of one core used by each group of processes, per slice of the window."""
    out: dict[str, list[float]] = {k: [] for k in pids}
    for _ in range(slices):
        before = {k: sum(cpu_ns(p) for p in v) for k, v in pids.items()}
        t0 = time.monotonic()
        time.sleep(seconds / slices)  # the measurement window itself
        wall = time.monotonic() - t0
        for k, v in pids.items():
            out[k].append((sum(cpu_ns(p) for p in v) - before[k]) / 1e9 / wall * 100)
    return out


def memory(pids: list[int]) -> tuple[list[float], list[float]]:
    pss, uss = [], []
    for pid in pids:
        info = psutil.Process(pid).memory_full_info()
        pss.append(info.pss / MB)
        uss.append(info.uss / MB)
    return pss, uss


def run(ctx: Context) -> list[Row]:
    half = ctx.n(50, 1)
    window = ctx.seconds(30.0, 0.6)
    slices = ctx.n(6, 2)
    with Lab(ctx) as lab:
        for i in range(TASKS):
            task = board.create(lab.ws, TEAM, f"done task {i}")
            board.update(lab.ws, TEAM, task["id"], status="completed")
        ctx.progress(f"starting {half} forked and {half} fresh teammates")
        # the first half may take 40 % of the time left; the window; then the rest
        ours, seeds = start(lab, ctx, 0, half, time.monotonic() + 0.4 * ctx.left())
        time.sleep(min(2.0, window / 4))  # let the last roster writes and first polls settle
        cpu_ours, cpu_seeds = len(ours), len(seeds)
        ctx.progress(f"CPU window {window:g} s: {cpu_ours} forked, {cpu_seeds} fresh")
        assert lab.daemon is not None
        cpu = cpu_window({"teamd": [lab.daemon.pid],
                          "ours": [lab.pid(n) for n in ours],
                          "seeds": [lab.seed_process(n).pid for n in seeds]}, window, slices)
        ctx.progress(f"starting {half} more of each")
        more_ours, more_seeds = start(lab, ctx, half, half, ctx.deadline)
        ours += more_ours
        seeds += more_seeds
        time.sleep(min(2.0, window / 4))
        ctx.progress(f"memory of {len(ours)} + {len(seeds)} idle teammates")
        pss, uss = memory([lab.pid(n) for n in ours])
        teamd_pss, teamd_uss = memory([lab.daemon.pid])
        seed_pss, seed_uss = memory([lab.seed_process(n).pid for n in seeds])
        still = sum(lab.is_idle(n) for n in ours)
    together = [o + t for o, t in zip(cpu["ours"], cpu["teamd"], strict=True)]
    n, m = len(ours), len(seeds)
    short = "" if m == 2 * half else f" ({2 * half - m} fresh ones had not started in time)"
    return [
        row("pss", "memory per idle teammate, PSS", f"Proportional set size of each of {n} "
            "idle teammates (shared pages divided among the processes sharing them), all "
            f"running at once ({still}/{n} of ours idle at the end). Baseline: {m} fresh "
            f"seed-design interpreters, each polling{short}.",
            figure("forked", "MB", pss), figure("fresh process", "MB", seed_pss)),
        row("uss", "memory per idle teammate, USS", "Unique set size (pages no other "
            "process shares: what ending it gives back), same processes.",
            figure("forked", "MB", uss), figure("fresh process", "MB", seed_uss)),
        row("memory_total", f"{2 * half} idle teammates in all, PSS", "Sum of the PSS of "
            "every idle teammate; ours includes teamd itself "
            f"({teamd_pss[0]:.1f} MB PSS, {teamd_uss[0]:.1f} MB USS){short}.",
            figure(f"{n} forked + teamd", "MB", [sum(pss) + teamd_pss[0]]),
            figure(f"{m} fresh processes", "MB", [sum(seed_pss)]),
            compare=n == m == 2 * half),
        row("cpu", f"CPU of teamd + {half} idle teammates over {window:g} s",
            f"% of one core, per {window / slices:g} s slice, from each process's own "
            "schedstat while both sets idled side by side. Ours: teamd "
            f"(median {sorted(cpu['teamd'])[len(cpu['teamd']) // 2]:.3f} %) + {cpu_ours} "
            f"teammates blocked on their wake pipes. Baseline: {cpu_seeds} seed teammates polling "
            f"inbox and a {TASKS}-task board every 1 s (no supervisor process).",
            figure("wake pipe", "% of a core", together),
            figure("1 s polling", "% of a core", cpu["seeds"]),
            compare=cpu_ours == cpu_seeds),
    ]

if __name__ == "__main__":
    from bench.suite import standalone

    sys.exit(standalone(sys.modules[__name__]))
