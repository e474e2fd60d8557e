"""What `teamctl status` and `teamctl board` show: the roster merged with live facts about
processes (liveness, uptime, CPU, memory), the board and the open requests.

CPU % needs two samples of a process's CPU time; one short window is shared by every
process shown (the supervisor and all members of all teams), so `status` costs ~0.1 s
however many there are, and nothing when none is live. Memory is PSS: a teammate is
forked from the supervisor and shares most of its pages with it, which RSS would count
again for every member.
"""

from __future__ import annotations

import time
from typing import Any

import psutil

from teamd import board, branches, budget, gitcmd, pidfile, requests, roster, runtimes
from teamd.errors import BadInput, TeamdError
from teamd.files import Json
from teamd.layout import Workspace
from teamd.permissions import describe
from teamd.records import Request

WINDOW = 0.1


def measure(procs: dict[str, psutil.Process]) -> dict[str, dict[str, Any]]:
    """{cpu_percent, pss, rss} per key, for the processes still alive after the window.
    `pss` is None where the kernel will not say (another user's process)."""
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
                cpu = proc.cpu_percent(None)
                try:
                    full = proc.memory_full_info()
                    pss, rss = getattr(full, "pss", None), full.rss
                except psutil.AccessDenied:
                    pss, rss = None, proc.memory_info().rss
            out[key] = {"cpu_percent": cpu, "pss": pss, "rss": rss}
        except psutil.Error:
            continue
    return out


def plan_gate(member: Json, records: list[Request]) -> str | None:
    """"closed" or "open" for a plan-mode member (CONTRACT §6), None for any other."""
    if not member.get("plan_mode_required"):
        return None
    opened = requests.gate_open(records, member["name"], member.get("joined_at"))
    return "open" if opened else "closed"


def pending_of(name: str, records: list[Request]) -> list[Json]:
    """Requests still unanswered that `name` sent (a plan, a permission) or was sent."""
    return [{k: r.get(k) for k in ("request_id", "kind", "sender", "recipient", "created_at")}
            for r in records if r.get("status") == "pending"
            and name in (r.get("sender"), r.get("recipient"))]


def waiting_for(member: Json, records: list[Request]) -> str | None:
    """What a `waiting` member waits for: its pending permission request, in one line."""
    if member.get("status") != "waiting":
        return None
    for r in records:
        if r.get("kind") == "permission" and r.get("status") == "pending" \
                and r.get("sender") == member["name"]:
            return f"permission {r['request_id']}: {describe(r)}"
    return None


def branch_facts(member: Json) -> dict[str, Any]:
    """A worktree member's `branch` and how many of its commits are not merged yet, `ahead`
    (not reachable from any other local branch: 0 once merged); both None without one."""
    record = member.get("worktree")
    if not record:
        return {"branch": None, "ahead": None}
    try:
        return {"branch": record["branch"], "ahead": branches.member_unmerged(record)}
    except gitcmd.GitError:
        return {"branch": record["branch"], "ahead": None}


def status_doc(ws: Workspace, team_names: list[str]) -> Json:
    """The `status` document (with the `root` and its `store`, shown as `files` or a URL
    without its password): each member as its roster entry, plus `live`, `uptime`,
    `cpu_percent`, `pss`, `rss`, `plan_gate`, `pending_requests`, `waiting_for`, `branch`
    and `ahead` (a worktree member's), `runtime` (`teamd` for an entry without one), `host`
    (with a store that has hosts: where it is placed, None before it is), and
    `current_task` as the board has it (the lowest in-progress task it owns: the board is
    the truth); each team with its `spent_usd`
    (spend.json), `budget_usd` and `supervisor_error` (`{"reason", "ts"}`: teamd's latest
    error for it that still holds, from teamd.json). A team whose files cannot be read (a
    hand-edited `config.json`) hides no other: it is listed in `unreadable` with the reason."""
    supervisor = pidfile.running(ws)
    teams = []
    unreadable: list[Json] = []
    for team in team_names:
        try:
            config = roster.load(ws, team)
            teams.append((config, board.list_tasks(ws, team),
                          requests.list_requests(ws, team)))
        except TeamdError as exc:
            if isinstance(exc, BadInput) and not ws.store.team_exists(team):
                continue  # deleted since the listing
            unreadable.append({"name": team, "error": str(exc)})
    procs: dict[str, psutil.Process] = {}
    if supervisor is not None:
        try:
            procs["@teamd"] = psutil.Process(int(supervisor["pid"]))
        except psutil.Error:
            pass
    for config, _, _ in teams:
        for m in config["members"]:
            proc = roster.process_of(m)
            if proc is not None:
                procs[f"{config['name']}/{m['name']}"] = proc
    facts = measure(procs)
    now = time.time()
    blank = {"cpu_percent": None, "pss": None, "rss": None}
    troubles = (supervisor or {}).get("errors") or {}  # teamd's own, while they hold
    doc: Json = {"root": str(ws.root), "store": ws.store.description, "supervisor": None,
                 "teams": [], "unreadable": unreadable}
    if supervisor is not None:
        doc["supervisor"] = {**supervisor, **facts.get("@teamd", blank),
                             "uptime": now - float(supervisor.get("started_at") or now)}
    for config, tasks, records in teams:
        rows: list[dict[str, Any]] = []
        for m in config["members"]:
            fact = facts.get(f"{config['name']}/{m['name']}")
            started = m.get("started_at")
            hosted = {"host": m.get("host")} if ws.store.supports_hosts else {}
            rows.append({**m, **(fact or blank), **hosted,
                         # another host's member: its status' word (CONTRACT §15)
                         "live": fact is not None or (roster.elsewhere(m) and roster.is_live(m)),
                         "runtime": runtimes.of(m),
                         "uptime": now - float(started) if fact and started else None,
                         "current_task": board.current_task(tasks, m["name"]),
                         "plan_gate": plan_gate(m, records),
                         "pending_requests": pending_of(m["name"], records),
                         "waiting_for": waiting_for(m, records), **branch_facts(m)})
        counts = {s: sum(t["status"] == s for t in tasks) for s in board.STATUSES}
        doc["teams"].append({"name": config["name"], "state": config["state"],
                             "description": config.get("description", ""),
                             "spent_usd": budget.spent(ws, config["name"]),
                             "supervisor_error": troubles.get(config["name"]),
                             "budget_usd": budget.budget_of(config),
                             "tasks": counts, "members": rows})
    return doc


def board_doc(ws: Workspace, team: str) -> Json:
    """The `board` document: the tasks by column, each with `waiting_on` (the blockers
    not completed yet) and `claimable`."""
    roster.load(ws, team)
    tasks = board.list_tasks(ws, team)
    by_id = {int(t["id"]): t for t in tasks}
    columns: dict[str, list[Json]] = {s: [] for s in board.STATUSES}
    for t in tasks:
        waiting = [b for b in t["blocked_by"] if by_id.get(int(b), {}).get("status")
                   != "completed"]
        columns.setdefault(t["status"], []).append(
            {**t, "waiting_on": waiting, "claimable": board.is_claimable(by_id, t)})
    return {"team": team, "columns": columns}
