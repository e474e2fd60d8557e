"""The roster: `.teams/{team}/config.json` (CONTRACT.md section 4).

Every change is a read-modify-write under the roster lock (`update`). Liveness is decided
here, once: a member is live when its `pid` runs with the recorded start time.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import psutil

from teamd import files
from teamd.errors import BadInput
from teamd.files import Json
from teamd.layout import LEAD, USER, Workspace
from teamd.proc import live_process

COLORS = ("cyan", "yellow", "magenta", "green", "blue")
STATUSES = ("pending", "starting", "active", "idle", "waiting", "paused", "sleeping",
            "stopping", "shutdown", "backoff", "failed")
#: statuses the supervisor treats as "has (or should have) a process"
RUNNING_STATUSES = ("starting", "active", "idle", "waiting", "paused", "stopping")

T = TypeVar("T")


def did_you_mean(name: str, choices: list[str]) -> str:
    """"; did you mean 'x'?" for the closest of `choices`, or "" when none is close."""
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _listing(what: str, names: list[str], most: int = 10) -> str:
    if not names:
        return f"no {what}"
    shown = ", ".join(names[:most])
    return f"{what}: {shown}{', …' if len(names) > most else ''}"


def unknown_team(ws: Workspace, team: str) -> BadInput:
    """The one error for a team that does not exist: which root was searched, the teams
    there, and the closest name."""
    teams = ws.team_names()
    return BadInput(f"unknown team {team!r} in {ws.root} ({_listing('teams', teams)})"
                    f"{did_you_mean(team, teams)}")


def unknown_member(config: Json, name: str, what: str = "member") -> BadInput:
    """The one error for a name that is not in the team's roster."""
    members = names(config)
    return BadInput(f"unknown {what} {name!r} in team {config['name']!r} "
                    f"({_listing('members', members)}){did_you_mean(name, members)}")


def load(ws: Workspace, team: str) -> Json:
    """The roster as it is on disk; BadInput if the team does not exist."""
    config = files.read_json(ws.config(team))
    if config is None:
        raise unknown_team(ws, team)
    return config


@contextmanager
def held(ws: Workspace, team: str) -> Iterator[Json]:
    """Hold the roster lock and yield the roster, written back only by `save`: for a step
    that writes several files in an order of its own, the roster at a chosen point."""
    path = ws.config(team)
    if not path.parent.is_dir():
        raise unknown_team(ws, team)
    with files.lock(path):
        yield load(ws, team)


def save(ws: Workspace, team: str, config: Json) -> None:
    """Write the roster (atomically); only while holding its lock (`held`, `locked`)."""
    files.atomic_write_bytes(ws.config(team), files.dumps_doc(config))


@contextmanager
def locked(ws: Workspace, team: str) -> Iterator[Json]:
    """Hold the roster lock; yield the roster; write it back (atomically) if it changed."""
    with held(ws, team) as config:
        before = files.dumps_doc(config)
        yield config
        if files.dumps_doc(config) != before:
            save(ws, team, config)


def update(ws: Workspace, team: str, change: Callable[[Json], T]) -> T:
    """Apply `change` to the roster under its lock and return what it returns."""
    with locked(ws, team) as config:
        return change(config)


#: a member's live fields: what it *is* (CONTRACT §4: `members/{name}.json`); the rest of a
#: member entry is what it should be (`config.json`)
STATUS_FIELDS = ("status", "pid", "pid_create_time", "started_at", "restart_at", "restarts",
                 "last_exit", "last_error", "current_task", "usage")


def update_status(ws: Workspace, team: str, name: str, change: Callable[[Json], T]) -> T | None:
    """Apply `change` to member `name`'s live state under its own lock and return what it
    returns; None, without calling it, when `name` is not in the team. `change` may read and
    set only the fields of STATUS_FIELDS: the hot path of every status, call and exit, whose
    cost must not grow with the size of the team."""
    def apply(config: Json) -> T | None:
        member = find(config, name)
        return None if member is None else change(member)

    return update(ws, team, apply)


def update_member(ws: Workspace, team: str, name: str,
                  change: Callable[[Json, Json], T]) -> T | None:
    """Like `update_status`, for a decision that reads what the member should be: `change`
    gets the whole member (spec and live fields) and the team's roster, both read under the
    roster lock so a person's change (`desired`, a delete) cannot slip in between; only the
    member's STATUS_FIELDS are written."""
    def apply(config: Json) -> T | None:
        member = find(config, name)
        return None if member is None else change(member, config)

    return update(ws, team, apply)


def new_roster(team: str, description: str, budget_usd: float | None = None) -> Json:
    return {"schema": 1, "name": team, "description": description,
            "created_at": time.time(), "state": "active", "budget_usd": budget_usd,
            "members": []}


def find(config: Json, name: str) -> Json | None:
    for member in config["members"]:
        if member["name"] == name:
            return member
    return None


def get(config: Json, name: str) -> Json:
    """The member called `name`, or BadInput naming the team."""
    member = find(config, name)
    if member is None:
        raise unknown_member(config, name)
    return member


def has_llm_lead(config: Json) -> bool:
    """Is an LLM lead (a member of kind `lead`) in the team? Then the person is `user`."""
    lead = find(config, LEAD)
    return lead is not None and lead.get("kind") == "lead"


def person(config: Json) -> str:
    """Who the person at `teamctl` is in this team (CONTRACT §2): `lead`, or `user` beside
    an LLM lead. `teamctl` sends as the person and drains the person's inbox."""
    return USER if has_llm_lead(config) else LEAD


def names(config: Json) -> list[str]:
    return [m["name"] for m in config["members"]]


def new_member(config: Json, name: str, *, kind: str, role: str, prompt: str, model: str | None,
               plan_mode_required: bool, cwd: str, budget_usd: float | None = None) -> Json:
    color = COLORS[len(config["members"]) % len(COLORS)]
    return {
        "name": name, "agent_id": f"{name}@{config['name']}", "kind": kind, "role": role,
        "prompt": prompt, "model": model, "plan_mode_required": plan_mode_required,
        "cwd": cwd, "color": color, "desired": "running", "status": "pending",
        "pid": None, "pid_create_time": None, "joined_at": time.time(), "restarts": 0,
        "last_exit": None, "last_error": None, "current_task": None, "budget_usd": budget_usd,
        "usage": {"input_tokens": 0, "output_tokens": 0,
                  "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0,
                  "cost_usd": 0.0},
    }


def process_of(member: Json) -> psutil.Process | None:
    """The member's process if it is live (pid runs and its start time matches), else None."""
    return live_process(member.get("pid"), member.get("pid_create_time"))


def is_live(member: Json) -> bool:
    return process_of(member) is not None


def set_status(member: Json, status: str) -> tuple[str, str] | None:
    """Set `status`; return (from, to) if it changed, for the `status` event."""
    before = member.get("status")
    if before == status:
        return None
    member["status"] = status
    return (str(before), status)
