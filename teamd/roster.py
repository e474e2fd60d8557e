"""The roster (CONTRACT.md section 4): what each member should be, `.teams/{team}/config.json`,
and what each is, `.teams/{team}/members/{name}.json`.

Readers get the two merged (`load`), one dict per member as schema 1 kept them in one file.
A person's or a lead's change is a read-modify-write of the merged roster under the roster
lock (`update`, `locked`, `held`) that writes back only what changed: `config.json` for spec
fields, and each member's status file, under that member's lock, for live fields. A status
write (`update_status`, the hot path) takes one member's lock and rewrites one small file,
whatever the size of the team. A schema-1 roster is migrated by whoever reads it first.
Liveness is decided here, once: a member is live when its `pid` runs with the recorded start
time.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar, cast

import psutil

from teamd import budget, hostname, prices, states
from teamd.errors import BadInput, TeamdError
from teamd.files import Json
from teamd.layout import LEAD, USER, Workspace
from teamd.proc import live_process
from teamd.records import Member, MemberSpec, MemberStatus, Usage, check_shape
from teamd.states import LIVE, Status
from teamd.suggest import did_you_mean, listing

COLORS = ("cyan", "yellow", "magenta", "green", "blue")
STATUSES: tuple[str, ...] = tuple(Status)
#: statuses the supervisor treats as "has (or should have) a process"
RUNNING_STATUSES: tuple[str, ...] = tuple(s for s in Status if s in LIVE)

T = TypeVar("T")

log = logging.getLogger(__name__)


def unknown_team(ws: Workspace, team: str) -> BadInput:
    """The one error for a team that does not exist: which root was searched, the teams
    there, and the closest name."""
    teams = ws.store.team_names()
    return BadInput(f"unknown team {team!r} in {ws.root} ({listing('teams', teams)})"
                    f"{did_you_mean(team, teams)}")


def unknown_member(config: Json, name: str, what: str = "member") -> BadInput:
    """The one error for a name that is not in the team's roster."""
    members = names(config)
    return BadInput(f"unknown {what} {name!r} in team {config['name']!r} "
                    f"({listing('members', members)}){did_you_mean(name, members)}")


#: the roster's schema: 2 is spec (`config.json`) and status (`members/{name}.json`) apart
SCHEMA = 2

#: a member's live fields: what it *is* (CONTRACT §4: `members/{name}.json`); the rest of a
#: member entry is what it should be (`config.json`)
STATUS_FIELDS = ("status", "pid", "pid_create_time", "started_at", "restart_at", "restarts",
                 "last_exit", "last_error", "current_task", "usage", "host")


def fresh_status() -> MemberStatus:
    """The live fields of a member that has never run (also what a member listed in
    `config.json` without a status file reads as)."""
    return {"status": "pending", "pid": None, "pid_create_time": None, "restarts": 0,
            "last_exit": None, "last_error": None, "current_task": None,
            "usage": cast(Usage, {**dict.fromkeys(prices.TOKEN_KEYS, 0), "cost_usd": 0.0})}


def status_of(member: Mapping[str, Any]) -> MemberStatus:
    """The live fields of a (merged) member entry."""
    return cast(MemberStatus, {k: member[k] for k in STATUS_FIELDS if k in member})


def spec_of(config: Json) -> Json:
    """`config.json` as it is written: the team's fields and each member's spec fields."""
    spec = {k: v for k, v in config.items() if k != "members"}
    spec["schema"] = SCHEMA
    spec["members"] = [{k: v for k, v in m.items() if k not in STATUS_FIELDS}
                       for m in config["members"]]
    return spec


def merge(spec_member: Mapping[str, Any], status: Mapping[str, Any] | None) -> Member:
    """One member as readers see it: its spec with its live fields over it (those of a
    member that never ran when it has no status file)."""
    return cast(Member, {**spec_member, **status_of(fresh_status() if status is None else status)})


# -- units -----------------------------------------------------------------------------
@contextmanager
def roster_lock(ws: Workspace, team: str) -> Iterator[None]:
    """The roster's unit (CONTRACT §2: first in the lock order); BadInput if the team
    does not exist. Entered again without waiting by a process that holds it."""
    with ws.store.roster_unit(team) as held_lock:
        if not held_lock:
            raise unknown_team(ws, team)
        yield


@contextmanager
def status_lock(ws: Workspace, team: str, name: str) -> Iterator[None]:
    """Hold member `name`'s unit (after the roster's: CONTRACT §2) for a step that must
    take it before a later lock of the order — e.g. approving a shutdown writes the
    status under the request's lock; what this process writes meanwhile (`save`) goes on
    under it."""
    with ws.store.member_unit(team, name) as held_lock:
        if not held_lock:
            raise TeamdError(f"team {team!r} is gone")
        yield


# -- reading ------------------------------------------------------------------------------
def read_spec(ws: Workspace, team: str) -> Json:
    """`config.json` (schema 2, migrated first if need be): the team's fields and each
    member's spec, no live field. BadInput if the team does not exist."""
    with roster_lock(ws, team):
        return _read_spec(ws, team)


def read_status(ws: Workspace, team: str, name: str) -> MemberStatus | None:
    """Member `name`'s live fields from `members/{name}.json`, or None without that file."""
    doc = ws.store.read_state(team, name)
    return None if doc is None else status_of(doc)


def load(ws: Workspace, team: str, only: str | None = None) -> Json:
    """The roster as readers see it: `config.json` with each member's live fields merged
    in (what schema 1 held in one file). With `only`, the team as that member sees itself:
    the team's fields and that one member (none if it is not in the team), reading one
    status file instead of every one. BadInput if the team does not exist.

    The whole roster is read under the roster lock (held for the reading only): a step that
    writes both files (`config.json` first, CONTRACT §4) holds it throughout, so no reader
    sees half of it — e.g. a member approving its shutdown with `desired=stopped` but not
    yet `stopping`, which teamd would take for a stop to carry out. A member's view of
    itself (`only`) takes no lock: a member reads its budgets and usage before every model
    call, also while it holds a call slot, which is held with no other lock (§12); its own
    live fields are its and teamd's to write, never half of a two-file step."""
    if only is not None:
        config = ws.store.read_spec(team)
        if config is None:
            raise unknown_team(ws, team)
        check_shape(ws.store.describe_spec(team), config)
        if config.get("schema", 1) != SCHEMA:
            config = read_spec(ws, team)  # migrated first, under the lock
        return _merged(ws, team, config, only)
    with roster_lock(ws, team):
        return _merged(ws, team, _read_spec(ws, team))


def _merged(ws: Workspace, team: str, config: Json, only: str | None = None) -> Json:
    members = [m for m in config["members"] if only is None or m["name"] == only]
    config["members"] = [merge(m, read_status(ws, team, m["name"])) for m in members]
    return config


def _read_spec(ws: Workspace, team: str) -> Json:
    """`config.json`, under the roster lock; a schema-1 roster is migrated first."""
    config = ws.store.read_spec(team)
    path = ws.store.describe_spec(team)
    if config is None:
        raise unknown_team(ws, team)
    check_shape(path, config)
    schema = config.get("schema", 1)
    if schema == SCHEMA:
        return config
    if schema != 1:
        raise TeamdError(f"{path}: roster schema {schema!r} is not one this teamd reads "
                         f"(1 or {SCHEMA})")
    return migrate(ws, team, config)


def migrate(ws: Workspace, team: str, old: Json) -> Json:
    """Schema 1 → 2 (CONTRACT §4), under the roster lock the caller holds: every member's
    status file and the team's `spend.json` first, `config.json` replaced last, so a crash
    before the end leaves schema 1 whole and the next reader migrates again. Nothing is
    dropped: each member's live fields go to its file as they were, the rest stays."""
    for member in old.get("members", []):
        with status_lock(ws, team, member["name"]):
            _write_status(ws, team, member["name"], status_of(member))
    def first_spend(doc: Json | None) -> Json:
        if doc is not None:  # the cost issue's record is already the truth
            return doc
        spent = old.get("spent_usd")
        if isinstance(spent, bool) or not isinstance(spent, int | float):
            spent = 0.0
            for m in old.get("members", []):
                spent = prices.add((m.get("usage") or {}).get("cost_usd"), spent)
        return budget.new_spend(float(spent))

    ws.store.add_spend(team, first_spend)
    config = {k: v for k, v in old.items() if k != "spent_usd"}
    config.setdefault("members", [])
    config = spec_of(config)
    save_spec(ws, team, config)
    log.info("team %s: roster migrated to schema %d (%d members)", team, SCHEMA,
             len(config["members"]))
    return config


# -- writing ------------------------------------------------------------------------------
def save_spec(ws: Workspace, team: str, config: Json) -> None:
    """Write `config.json` (atomically), spec fields only; under the roster lock."""
    ws.store.write_spec(team, spec_of(config))


def _write_status(ws: Workspace, team: str, name: str, status: Mapping[str, Any]) -> None:
    """Write `members/{name}.json` (atomically); under that member's lock."""
    ws.store.write_state(team, name, {"schema": SCHEMA, "name": name, **status_of(status)})


class _Held(dict[str, Any]):
    """The merged roster yielded by `held`, with the copy of it that is on disk, so `save`
    writes only what changed: one member's live fields are never written back over a
    change its own writer made meanwhile (under that member's lock, not the roster's)."""

    on_disk: Json


@contextmanager
def held(ws: Workspace, team: str) -> Iterator[Json]:
    """Hold the roster lock and yield the roster (merged), written back only by `save`: for
    a step that writes several files in an order of its own, the roster at a chosen point.
    The status moves made meanwhile are journaled by `save`; unsaved, they are dropped."""
    with roster_lock(ws, team), states.recording():
        config = _Held(_merged(ws, team, _read_spec(ws, team)))
        config.on_disk = copy.deepcopy(dict(config))
        yield config


def save(ws: Workspace, team: str, config: Json) -> None:
    """Write back what changed in a roster yielded by `held` (or `locked`), while holding
    its lock: a new member's status file before `config.json` lists it; `config.json` when
    a spec field changed; then each member's status file, under its own lock, with only
    the live fields that changed; last, a removed member's status file goes; then the
    status moves made on it are journaled."""
    before = config.on_disk if isinstance(config, _Held) else \
        _merged(ws, team, _read_spec(ws, team))
    old = {m["name"]: m for m in before["members"]}
    new = {m["name"]: m for m in config["members"]}
    added = [n for n in new if n not in old]
    for name in added:
        with status_lock(ws, team, name):
            _write_status(ws, team, name, {**fresh_status(), **status_of(new[name])})
    if spec_of(config) != spec_of(before):
        save_spec(ws, team, config)
    for name in new:
        if name in added:
            continue
        changed = {k: v for k, v in status_of(new[name]).items()
                   if k not in old[name] or old[name][k] != v}
        dropped = [k for k in status_of(old[name]) if k not in new[name]]
        if changed or dropped:
            _change_status(ws, team, name, changed, dropped)
    for name in old:
        if name not in new:
            with ws.store.member_unit(team, name) as held_lock:
                if held_lock:
                    ws.store.drop_state(team, name)
    if isinstance(config, _Held):
        config.on_disk = copy.deepcopy(dict(config))
    states.journal(ws, team)


def _change_status(ws: Workspace, team: str, name: str, changed: Json,
                   dropped: list[str]) -> None:
    """Set `changed` (and drop `dropped`) in member `name`'s status file, leaving the
    fields its own writer set meanwhile; under the member's lock."""
    with status_lock(ws, team, name):
        status = cast(Json, read_status(ws, team, name) or fresh_status())
        status.update(changed)
        for key in dropped:
            status.pop(key, None)
        _write_status(ws, team, name, status)


@contextmanager
def locked(ws: Workspace, team: str) -> Iterator[Json]:
    """Hold the roster lock; yield the roster (merged); write back what changed."""
    with held(ws, team) as config:
        yield config
        save(ws, team, config)


def update(ws: Workspace, team: str, change: Callable[[Json], T]) -> T:
    """Apply `change` to the roster (merged) under its lock and return what it returns."""
    with locked(ws, team) as config:
        return change(config)


def update_status(ws: Workspace, team: str, name: str, change: Callable[[Json], T]) -> T | None:
    """Apply `change` to member `name`'s live state under its own lock and return what it
    returns; None, without calling it, when `name` is not in the team. `change` may read and
    set only the fields of STATUS_FIELDS: the hot path of every status, call and exit, whose
    cost must not grow with the size of the team. It reads and writes `members/{name}.json`
    alone and never parses `config.json` (unless that file is missing: then it asks the
    roster, `update_member`)."""
    # through the existing lock file only: a member's lock file is made with its status file
    # (under the roster lock), and taking it never brings back a team folder deleted meanwhile
    with ws.store.member_unit(team, name, create=False) as held_lock:
        status = read_status(ws, team, name) if held_lock else None
        if status is not None:
            return _apply(ws, team, name, cast(Json, status), change)
    if not ws.store.team_exists(team):
        raise unknown_team(ws, team)
    # no status file: a schema-1 roster not yet migrated, or a member that is not (or no
    # longer) in the team; the roster says which (lock order: roster → member)
    return update_member(ws, team, name, lambda member, _config: change(member))


def update_member(ws: Workspace, team: str, name: str,
                  change: Callable[[Json, Json], T]) -> T | None:
    """Like `update_status`, for a decision that reads what the member should be: `change`
    gets the whole member (spec and live fields) and the team's `config.json` (its
    members carry their spec only), read under the roster lock so a person's change
    (`desired`, a delete) cannot slip in between; then the member's lock is taken and only
    its STATUS_FIELDS are written, to its status file."""
    with roster_lock(ws, team):
        config = _read_spec(ws, team)
        spec = find(config, name)
        if spec is None:
            return None
        with status_lock(ws, team, name):
            member = cast(Json, merge(spec, read_status(ws, team, name)))
            return _apply(ws, team, name, member, lambda m: change(m, config))


def _apply(ws: Workspace, team: str, name: str, member: Json,
           change: Callable[[Json], T]) -> T:
    """Run `change` on `member` and write its live fields if they changed (the caller
    holds the member's lock), then journal its status move."""
    with states.recording() as moves:
        before = copy.deepcopy(status_of(member))
        result = change(member)
        if status_of(member) != before:
            _write_status(ws, team, name, member)
            states.journal(ws, team, moves, name)
    return result


def new_roster(team: str, description: str, budget_usd: float | None = None) -> Json:
    return {"schema": SCHEMA, "name": team, "description": description,
            "created_at": time.time(), "state": "active", "budget_usd": budget_usd,
            "members": []}


def find(config: Json, name: str) -> Member | None:
    """The member called `name` in `config` (merged or spec only), or None."""
    for member in config["members"]:
        if member["name"] == name:
            return cast(Member, member)
    return None


def get(config: Json, name: str) -> Member:
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
               plan_mode_required: bool, cwd: str, budget_usd: float | None = None) -> Member:
    """A member entry (merged: spec and the live fields of one that never ran)."""
    color = COLORS[len(config["members"]) % len(COLORS)]
    spec: MemberSpec = {
        "name": name, "agent_id": f"{name}@{config['name']}", "kind": kind, "role": role,
        "prompt": prompt, "model": model, "plan_mode_required": plan_mode_required,
        "cwd": cwd, "color": color, "desired": "running", "joined_at": time.time(),
        "budget_usd": budget_usd,
    }
    return {**spec, **fresh_status()}


def process_of(member: Mapping[str, Any]) -> psutil.Process | None:
    """The member's process if it is live (pid runs and its start time matches), else None.
    None for a member placed on another host (CONTRACT §15): its pid is not this machine's."""
    if elsewhere(member):
        return None
    return live_process(member.get("pid"), member.get("pid_create_time"))


def elsewhere(member: Mapping[str, Any]) -> bool:
    """Is `member` placed on a host other than this machine's?"""
    host = member.get("host")
    return bool(host) and host != hostname.here()


def is_live(member: Mapping[str, Any]) -> bool:
    """Live (CONTRACT §4): its process runs with the recorded start time. A member of
    another host is taken at its status' word: that host's `teamd` keeps it true, and a
    dead host's members are moved by the leader (CONTRACT §15)."""
    if elsewhere(member):
        return member.get("status") in LIVE
    return process_of(member) is not None
