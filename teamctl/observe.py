"""Live facts about member processes for `teamctl status`: liveness, CPU and memory.

CPU % needs two samples of a process's CPU time; one short window is shared by all
members so `status` costs ~0.1 s however many there are, and nothing when none is live.
"""

from __future__ import annotations

import time
from typing import Any

import psutil

from teamd import roster
from teamd.files import Json

WINDOW = 0.1


def sample(members: list[Json]) -> list[dict[str, Any]]:
    out = []
    procs: dict[str, psutil.Process] = {}
    for m in members:
        proc = roster.process_of(m)
        if proc is not None:
            procs[m["name"]] = proc
            try:
                proc.cpu_percent(None)
            except psutil.Error:
                pass
    if procs:
        time.sleep(WINDOW)
    for m in members:
        row: dict[str, Any] = dict(m)
        proc = procs.get(m["name"])
        row["live"] = proc is not None
        row["cpu_percent"] = row["rss"] = None
        if proc is not None:
            try:
                with proc.oneshot():
                    row["cpu_percent"] = proc.cpu_percent(None)
                    row["rss"] = proc.memory_info().rss
            except psutil.Error:
                row["live"] = False
        out.append(row)
    return out
