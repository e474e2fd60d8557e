#!/usr/bin/env python3
"""The web view: first load of a big team's page, a change on disk to the page showing it,
and `teamctl web`'s memory with five pages open on a busy team.

Everything real: the installed `teamctl web` as a subprocess, Debian's Chromium driven by
Playwright (headless), `teamd run` with members on the scripted model (bench/lab.py).

1. A team of 20 members and 1,000 tasks (`Lab`'s team, each task with its blockers):
   a fresh browser context opens `/t/bench`; the time from the navigation to the board's
   cards visible (the page's script has fetched and drawn its JSON).
2. On that open page: a task added (`actions.add_task`, on disk when it returns) until its
   card is visible, again and again: p50 / p99.
3. Four of the members awake and answering a message every 0.2 s each (a busy team), five
   pages open (the team twice, three members' conversations): `teamctl web`'s PSS before
   any page, and its largest while they follow the team for a while.

Without Chromium or Playwright the rows say why they were not measured.

    python -m bench.bench_web [--quick]
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import psutil

from bench.common import MB, Context, Row, figure, not_measured, row
from bench.lab import TEAM, Lab
from teamd import actions, board
from tests.web.webkit import Web, chromium, open_page, why_no_browser

NAME = "web"
TITLE = "teamctl web: first load (20 members, 1,000 tasks), change → visible, memory"
LIMIT = (600.0, 120.0)
MEMBERS, TASKS, BUSY = 20, 1000, 4
TITLES = {"load": "team page first load, 20 members / 1,000 tasks: board visible",
          "change": "a change on disk → visible in the open page, p50 / p99",
          "memory": "`teamctl web` PSS with 5 pages open on a busy team"}


def pss(pid: int) -> float:
    return float(psutil.Process(pid).memory_full_info().pss)


def fill(lab: Lab, tasks: int) -> None:
    for i in range(MEMBERS):
        actions.spawn(lab.ws, TEAM, f"m{i:02d}", "Answer briefly.",
                      cwd=str(lab.ctx.workdir))
    for i in range(1, tasks + 1):
        board.create(lab.ws, TEAM, f"task {i}: something to do",
                     blocked_by=[i - 1] if i > 1 and i % 10 else [])


def first_loads(browser: Any, web: Web, runs: int, ctx: Context) -> list[float]:
    times = []
    for _ in range(runs):
        if ctx.expired():
            break
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        page = context.new_page()
        page.goto(web.url)  # the token: the cookie set, then the teams page
        start = time.perf_counter()
        page.goto(f"{web.base}/t/{TEAM}")
        page.wait_for_selector('[data-column="pending"] [data-task]')
        times.append((time.perf_counter() - start) * 1000)
        context.close()
    return times


def changes(browser: Any, web: Web, lab: Lab, runs: int, ctx: Context) -> list[float]:
    page = open_page(browser, web, f"/t/{TEAM}").page
    page.wait_for_selector("#live >> text=live")
    times = []
    for i in range(runs):
        if ctx.expired():
            break
        task = actions.add_task(lab.ws, TEAM, f"bench change {i}")
        landed = time.perf_counter()
        page.wait_for_selector(f'[data-task="{task["id"]}"]', timeout=30_000)
        times.append((time.perf_counter() - landed) * 1000)
        if (i + 1) % 20 == 0:
            ctx.progress(f"change → visible {i + 1}/{runs}")
    page.close()
    return times


def busy_memory(browser: Any, web: Web, lab: Lab, seconds: float) -> tuple[float, float]:
    names = [f"m{i:02d}" for i in range(BUSY)]
    lab.wait_idle(names, 120)
    before = pss(web.proc.pid)
    stop = threading.Event()

    def chatter() -> None:
        n = 0
        while not stop.is_set():
            for name in names:
                lab.send(name, f"ping {n}")
            n += 1
            stop.wait(0.2)

    feeder = threading.Thread(target=chatter, daemon=True)
    feeder.start()
    try:
        pages = [open_page(browser, web, f"/t/{TEAM}"), open_page(browser, web, f"/t/{TEAM}"),
                 *(open_page(browser, web, f"/t/{TEAM}/m/{n}") for n in names[:3])]
        peak, end = before, time.monotonic() + seconds
        while time.monotonic() < end:
            peak = max(peak, pss(web.proc.pid))
            time.sleep(0.25)  # the sampling interval of the measurement
        for watched in pages:
            watched.page.close()
    finally:
        stop.set()
        feeder.join(5)
    return before, peak


def run(ctx: Context) -> list[Row]:
    reason = why_no_browser()
    if reason:
        return [not_measured(key, title, reason, "not measured") for key, title in
                TITLES.items()]
    with Lab(ctx, idle_timeout=3600) as lab:
        fill(lab, ctx.n(TASKS, 100))
        web = Web(lab.ws, log=ctx.workdir / "web.log")
        try:
            with chromium() as browser:
                ctx.progress("first loads")
                loads = first_loads(browser, web, ctx.n(10, 2), ctx)
                changed = changes(browser, web, lab, ctx.n(100, 5), ctx)
                ctx.progress("five pages on a busy team")
                before, peak = busy_memory(browser, web, lab, ctx.seconds(20.0, 3.0))
        finally:
            web.stop()
    tasks = ctx.n(TASKS, 100)
    return [
        row("web_load", TITLES["load"], f"A fresh browser context per run opens /t/{TEAM} "
            f"({MEMBERS} members, {tasks} tasks, teamd running): navigation until the "
            "board's cards are visible.", figure("first load", "ms", loads)),
        row("web_change", TITLES["change"], "`actions.add_task` returns (the task on disk) "
            "→ its card visible in the open team page (inotify → server-sent event → "
            f"the page refetches its JSON and draws it), {MEMBERS} members, {tasks}+ tasks.",
            figure("change → visible", "ms", changed, p99=True)),
        row("web_memory", TITLES["memory"], f"{BUSY} members answering a message each every "
            "0.2 s; 5 pages following it (the team twice, 3 members); the largest PSS "
            "sampled every 0.25 s, beside the PSS before any page.",
            figure("5 pages, busy", "MB", [peak / MB]),
            figure("no page", "MB", [before / MB]), compare=False),
    ]


if __name__ == "__main__":
    from bench.suite import standalone

    sys.exit(standalone(sys.modules[__name__]))
