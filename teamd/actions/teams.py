"""Teams: creating one, finding one (and refusing new work while it is being deleted),
its budget and its members' budgets, and the stamp of archive folders (CONTRACT §4, §12)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from teamd import (
    budget,
    events,
    journal_gaps,
    roster,
    settings,
    worktrees,
)
from teamd.errors import BadInput
from teamd.files import Json
from teamd.layout import Workspace, validate_member_name, validate_name

#: message types that still land while a team is being deleted (its winding-down)
WINDING_DOWN = ("shutdown_response", "idle_notification", "member_failed")


def create_team(ws: Workspace, team: str, description: str = "", *, repo: str | None = None,
                worktrees_on: bool = False, budget_usd: float | None = None,
                runtime: str | None = None) -> Json:
    """A new team. `repo` (a folder inside a git work tree) is the team's repository;
    `worktrees_on` gives each teammate its own worktree of it (CONTRACT §13) — without
    `repo`, of the repository holding the root. `budget_usd` caps its spend (§12);
    `runtime` is its members' agent unless a spawn names another (§14; None: the
    setting's, read at each spawn)."""
    validate_name(team, "team name")
    if runtime is not None:
        runtime = settings.check("runtime", runtime, "--runtime")
    budget_usd = None if budget_usd is None else budget.parse_usd(budget_usd, "--budget")
    if ws.store.team_exists(team):
        if journal_gaps.mend_creation(ws, team):  # a create killed before its line, done
            return roster.load(ws, team)
        raise BadInput(f"team {team!r} already exists")
    top: Path | None = None
    if repo is not None:
        top = worktrees.require_repo(Path(repo).expanduser(), "--repo")
    elif worktrees_on:
        top = worktrees.require_repo(ws.root, "the root (give --repo DIR)")
    if top is not None:
        worktrees.exclude_workspace(ws, top)
    config = roster.new_roster(team, description, budget_usd)
    config.setdefault("repo", str(top) if top is not None else None)
    config.setdefault("worktrees", bool(worktrees_on))
    config.setdefault("runtime", runtime)
    if not ws.store.create_team(team, config, budget.new_spend()):
        raise BadInput(f"team {team!r} already exists")
    with roster.held(ws, team):  # teamd's start may have journaled it meanwhile
        if not any(events.stream(ws, team, match=lambda r: r.get("event") == "team_created")):
            events.emit(ws, team, "team_created", description=description)
    return config


def require_team(ws: Workspace, team: str, *, accepting: bool = False) -> Json:
    """The roster of an existing team; with `accepting`, refuse a team being deleted."""
    config = roster.load(ws, validate_name(team, "team name"))
    if accepting and config.get("state") == "deleting":
        raise BadInput(f"team {team!r} is being deleted")
    return config


def set_budget(ws: Workspace, team: str, usd: Any, member: str | None = None) -> Json:
    """Set the team's budget, or a member's (`0` removes it). A member paused by a budget
    sees the roster change and goes on once no budget of its is reached (CONTRACT §12).
    Returns {"team", "member", "budget_usd", "spent_usd"}."""
    value = budget.parse_usd(usd)
    require_team(ws, team)
    if member is not None:
        validate_member_name(member)

    def change(config: Json) -> float:
        if member is None:
            config["budget_usd"] = value
            return budget.spent(ws, team)
        m = roster.find(config, member)
        if m is None:
            raise roster.unknown_member(config, member)
        m["budget_usd"] = value
        return float((m.get("usage") or {}).get("cost_usd") or 0.0)

    spent = roster.update(ws, team, change)
    return {"team": team, "member": member, "budget_usd": value, "spent_usd": spent}


