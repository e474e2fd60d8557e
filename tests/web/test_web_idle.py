"""An open page on a quiet team makes no process of the product busier (CONTRACT §16):
the CPU of `teamd` and its idle members with two pages open (the team's and a member's,
each holding its event stream) is no higher than with none, measured as the idle
benchmark measures it (`bench.common.cpu_ns`: each thread's exact time on CPU); and
`teamctl web` itself idles under 1 % of a core. Each window spans one of teamd's 5 s
safety passes, the one thing that runs on a quiet team."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench.common import cpu_ns
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import TEAM, live_pid, make_team, running_teamd, wait_status
from tests.web.webkit import Web, open_page

WINDOW = 6.0  #: seconds per measurement (more than teamd's 5 s safety pass)
NAMES = ("alice", "bob", "carol")
SLACK_NS = 20_000_000  #: 20 ms of CPU in a window: one safety pass more or less


def cpu_over(pids: list[int], seconds: float) -> int:
    before = sum(cpu_ns(p) for p in pids)
    time.sleep(seconds)  # the measurement window itself
    return sum(cpu_ns(p) for p in pids) - before


def test_an_open_page_costs_a_quiet_team_nothing(ws: Workspace, server: ScriptedServer,
                                                 workdir: Path, web: Web,
                                                 browser: Any) -> None:
    make_team(ws, workdir, *NAMES)
    with running_teamd(ws, server.url) as daemon:
        for name in NAMES:
            wait_status(ws, name, "idle")
        pids = [daemon.pid, *(int(live_pid(ws, TEAM, n) or 0) for n in NAMES)]
        assert all(pids)
        without = cpu_over(pids, WINDOW)
        pages = [open_page(browser, web, f"/t/{TEAM}"),
                 open_page(browser, web, f"/t/{TEAM}/m/alice")]
        for watched in pages:
            watched.page.wait_for_selector("#live >> text=live")  # the stream is open
        time.sleep(1.0)  # past the pages' first loads
        web_before = cpu_ns(web.proc.pid)
        with_pages = cpu_over(pids, WINDOW)
        web_share = (cpu_ns(web.proc.pid) - web_before) / 1e9 / WINDOW * 100
        print(f"teamd + {len(NAMES)} members: {without / 1e6:.1f} ms without a page, "
              f"{with_pages / 1e6:.1f} ms with two open; teamctl web {web_share:.2f} % "
              "of a core")
        assert with_pages <= without + SLACK_NS, (without, with_pages)
        assert web_share < 1.0
        assert all(not w.errors for w in pages)
