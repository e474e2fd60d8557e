"""Live facts about processes for `teamctl status`: liveness, CPU and memory.

CPU % needs two samples of a process's CPU time; one short window is shared by every
process shown (the supervisor and all members of all teams), so `status` costs ~0.1 s
however many there are, and nothing when none is live.
"""

from __future__ import annotations

import time
from typing import Any

import psutil

from teamd import roster, worktrees
from teamd.files import Json

WINDOW = 0.1


def measure(procs: dict[str, psutil.Process]) -> dict[str, tuple[float, int]]:
    """(cpu %, rss bytes) per key, for the processes still alive after the window."""
    for proc in procs.values():
        try:
            proc.cpu_percent(None)
        except psutil.Error:
            pass
    if procs:
        time.sleep(WINDOW)
    out = {}
    for key, proc in procs.items():
        try:
            with proc.oneshot():
                out[key] = (proc.cpu_percent(None), proc.memory_info().rss)
        except psutil.Error:
            continue
    return out


def branch_facts(member: Json) -> dict[str, Any]:
    """A worktree member's `branch` and commits `ahead` of its base (both None without one)."""
    record = member.get("worktree")
    if not record:
        return {"branch": None, "ahead": None}
    try:
        return {"branch": record["branch"], "ahead": worktrees.ahead(record)}
    except worktrees.GitError:
        return {"branch": record["branch"], "ahead": None}


def status_doc(root: str, supervisor: Json | None,
               teams: list[tuple[Json, dict[str, int]]]) -> Json:
    """The `status` document: every member row gains live, cpu_percent and rss, and
    branch and ahead (a worktree member's)."""
    procs: dict[str, psutil.Process] = {}
    if supervisor is not None:
        try:
            procs["@teamd"] = psutil.Process(int(supervisor["pid"]))
        except psutil.Error:
            pass
    for config, _ in teams:
        for m in config["members"]:
            proc = roster.process_of(m)
            if proc is not None:
                procs[f"{config['name']}/{m['name']}"] = proc
    facts = measure(procs)
    doc: Json = {"root": root, "supervisor": None, "teams": []}
    if supervisor is not None:
        cpu, rss = facts.get("@teamd", (None, None))
        doc["supervisor"] = {**supervisor, "cpu_percent": cpu, "rss": rss}
    for config, counts in teams:
        rows: list[dict[str, Any]] = []
        for m in config["members"]:
            fact = facts.get(f"{config['name']}/{m['name']}")
            rows.append({**m, "live": fact is not None,
                         "cpu_percent": fact[0] if fact else None,
                         "rss": fact[1] if fact else None, **branch_facts(m)})
        doc["teams"].append({"name": config["name"], "state": config["state"],
                             "description": config["description"], "tasks": counts,
                             "members": rows})
    return doc
