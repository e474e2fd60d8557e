"""Deleting a team: `state=deleting` and the shutdown asks (one roster lock), then the
team removed by the store — archived (or purged) — once nobody is live (CONTRACT §9)."""

from __future__ import annotations

import time
from pathlib import Path

from teamd import (
    events,
    inbox,
    pidfile,
    roster,
    worktrees,
)
from teamd.actions.members import open_shutdown, stops_without_handshake
from teamd.actions.teams import require_team
from teamd.errors import BadInput, TeamdError
from teamd.files import Json
from teamd.layout import Workspace
from teamd.records import Request


def live_members(config: Json) -> list[Json]:
    return [m for m in config["members"] if roster.is_live(m)]


def begin_delete(ws: Workspace, team: str, *, force: bool = False, purge: bool = False,
                 sender: str | None = None) -> list[Request]:
    """Start deleting a team: `state=deleting`, then a shutdown request to every live member
    (with `force`, or for a lead or the sender itself: `desired=stopped`, which the
    supervisor carries out). `sender` (who asks, and hears the answers) defaults to the
    person: `lead`, or `user` beside an LLM lead (CONTRACT §2). Returns the shutdown
    requests opened.

    All of it under one roster lock: the supervisor removes a team only under that lock,
    so it cannot take the folders away half-way (CONTRACT §9, `delete`)."""
    require_team(ws, team)
    opened: list[Request] = []
    with roster.locked(ws, team) as config:
        sender = sender or roster.person(config)
        if config.get("state") != "deleting":
            config["state"] = "deleting"
            events.emit(ws, team, "team_deleting")
        if purge:
            config["purge"] = True  # whoever removes the folders keeps no archive
        for member in live_members(config):
            if stops_without_handshake(member, force, sender):
                member["desired"] = "stopped"
            elif member["desired"] == "running" and member["status"] != "stopping":
                record, msg = open_shutdown(ws, team, member["name"],
                                             f"team {team} is being deleted", sender)
                inbox.deliver(ws, team, [msg])
                opened.append(record)
    return opened


def team_gone(ws: Workspace, team: str) -> bool:
    return not ws.store.team_exists(team)


def finish_delete(ws: Workspace, team: str) -> bool:
    """True once the team's folders are gone. With no live member and no supervisor to do
    it, removes them here; a supervisor (or another teamctl) removing them meanwhile is
    fine: the team is gone either way."""
    try:
        config = roster.load(ws, team)
    except (BadInput, TeamdError, OSError):
        return team_gone(ws, team)
    if live_members(config) or pidfile.supervised(ws):
        return False
    remove_team(ws, team)
    return True


def delete_team(ws: Workspace, team: str, *, force: bool = False, purge: bool = False,
                sender: str | None = None) -> Json:
    """`teamctl delete` and the TeamDelete tool: `begin_delete`, then the folders removed at
    once if nobody is live and no supervisor runs (`finish_delete`); else whoever removes
    them later (the supervisor, `finish_delete` again) does. Returns {"requests": the
    shutdown requests opened, "deleted": whether the team is gone already}."""
    opened = begin_delete(ws, team, force=force, purge=purge, sender=sender)
    return {"requests": opened, "deleted": finish_delete(ws, team)}


def asked_to_shut_down(opened: list[Json]) -> str | None:
    """"asked alice, bob to shut down" for the shutdown requests `opened`; None for none."""
    if not opened:
        return None
    return f"asked {', '.join(r['recipient'] for r in opened)} to shut down"


def remove_team(ws: Workspace, team: str) -> Path | None:
    """Remove the team; keep its journal (rotated files too), sessions, transcripts, logs,
    roster and board in an archive (`.teams/.archive/{team}-{ts}/`) unless the deletion
    asked for `purge`. Returns the archive, or None (purged, or already removed by someone
    else). Worktrees are released first, with no lock held (git runs): clean and merged
    ones removed, any other kept, and said so in the journal that is archived.

    Under the roster lock, the store's `delete_team`: `team_deleted` is appended as the
    journal's last line, the board goes, and the team goes in one step, so nobody sees half
    a team and nothing is journalled after it. Two removers racing: one wins, the other
    finds the team gone and returns None."""
    try:
        config = roster.load(ws, team)
    except BadInput:
        if team_gone(ws, team):
            return None
        raise
    if not live_members(config):
        worktrees.release_all(ws, team, config["members"])
    try:
        with roster.locked(ws, team) as config:
            if live_members(config):
                raise TeamdError(f"team {team!r} still has live members")
            kept = ws.store.delete_team(team, {"ts": time.time(), "event": "team_deleted"},
                                        purge=bool(config.get("purge")))
    except (BadInput, FileNotFoundError):
        if team_gone(ws, team):
            return None  # someone else removed it first
        raise
    except TeamdError:
        if team_gone(ws, team):
            return None  # its folder went while we took the lock
        raise
    return None if kept is None else Path(kept)
