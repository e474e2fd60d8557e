"""What a person (through `teamctl`) or a lead (through its tools) can do to a team.

Each action validates everything first (BadInput, nothing touched), then writes the files
in the contract's lock order: roster → board → request → inbox → events. The supervisor and
the teammates react to those files; nothing here signals a process.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

from teamd import board, events, files, inbox, pidfile, requests, roster, worktrees
from teamd.errors import BadInput, TeamdError
from teamd.files import Json
from teamd.layout import LEAD, SUPERVISOR, Workspace, validate_member_name, validate_name

#: message types that still land while a team is being deleted (its winding-down)
WINDING_DOWN = ("shutdown_response", "idle_notification", "member_failed")


# -- teams -------------------------------------------------------------------------------
def create_team(ws: Workspace, team: str, description: str = "", *, repo: str | None = None,
                worktrees_on: bool = False) -> Json:
    """A new team. `repo` (a folder inside a git work tree) is the team's repository;
    `worktrees_on` gives each teammate its own worktree of it (CONTRACT §13) — without
    `repo`, of the repository holding the root."""
    validate_name(team, "team name")
    if ws.team_exists(team):
        raise BadInput(f"team {team!r} already exists")
    top: Path | None = None
    if repo is not None:
        top = worktrees.require_repo(Path(repo).expanduser(), "--repo")
    elif worktrees_on:
        top = worktrees.require_repo(ws.root, "the root (give --repo DIR)")
    if top is not None:
        worktrees.exclude_workspace(ws, top)
    for folder in (ws.teams_dir, ws.tasks_root, ws.team_dir(team), ws.requests_dir(team),
                   ws.sessions_dir(team), ws.transcripts_dir(team), ws.logs_dir(team),
                   ws.tasks_dir(team)):
        files.ensure_dir(folder)
    config = roster.new_roster(team, description)
    config.setdefault("repo", str(top) if top is not None else None)
    config.setdefault("worktrees", bool(worktrees_on))
    with files.lock(ws.config(team)):
        if ws.team_exists(team):
            raise BadInput(f"team {team!r} already exists")
        files.write_json(ws.config(team), config)
    events.emit(ws, team, "team_created", description=description)
    return config


def require_team(ws: Workspace, team: str, *, accepting: bool = False) -> Json:
    """The roster of an existing team; with `accepting`, refuse a team being deleted."""
    config = roster.load(ws, validate_name(team, "team name"))
    if accepting and config.get("state") == "deleting":
        raise BadInput(f"team {team!r} is being deleted")
    return config


def _already_in(team: str, name: str, existing: Json) -> BadInput:
    return BadInput(f"{name!r} is already in team {team!r} (status {existing['status']}); "
                    f"use `teamctl restart {team} {name}`")


def spawn(ws: Workspace, team: str, name: str, prompt: str, *, role: str = "",
          model: str | None = None, plan_mode: bool = False, cwd: str | None = None,
          lead: bool = False, worktree: bool | None = None, base: str | None = None) -> Json:
    """Add a member with `desired=running`; the supervisor forks it.

    With a worktree (`worktree`, default: the team's `worktrees` for a teammate) its git
    worktree and branch are made first, and the member works in it (CONTRACT §13); if
    the member cannot then be added, they are taken back."""
    validate_member_name(name)
    if lead and name != LEAD:
        raise BadInput("--lead requires the member name 'lead'")
    if lead and plan_mode:
        raise BadInput("--plan-mode does not apply to the lead (it approves plans)")
    if name == LEAD and not lead:
        raise BadInput("'lead' is the lead's name: use --lead to spawn an LLM lead")
    if not prompt or not prompt.strip():
        raise BadInput("a member needs a --prompt")
    inbox.check_content(prompt)
    workdir = Path(cwd).expanduser() if cwd else ws.root
    if not workdir.is_dir():
        raise BadInput(f"--cwd {str(workdir)!r} is not a directory")
    config = require_team(ws, team, accepting=True)
    use_worktree = worktree if worktree is not None else \
        bool(config.get("worktrees")) and not lead
    if lead and use_worktree:
        raise BadInput("the lead works in the repository itself: --worktree is for teammates")
    if base is not None and not use_worktree:
        raise BadInput("--base applies only to a member with a worktree (--worktree)")
    existing = roster.find(config, name)
    if existing is not None:
        raise _already_in(team, name, existing)
    record: Json | None = None
    if use_worktree:
        # git runs before the roster lock is taken (no git command under a lock)
        record = worktrees.add(ws, team, name, worktrees.repo_for_spawn(ws, config, workdir),
                               base)
        workdir = Path(record["path"])

    def add(config: Json) -> Json:
        if config.get("state") == "deleting":
            raise BadInput(f"team {team!r} is being deleted")
        existing = roster.find(config, name)
        if existing is not None:
            raise _already_in(team, name, existing)
        member = roster.new_member(config, name, kind="lead" if lead else "teammate",
                                   role=role, prompt=prompt, model=model,
                                   plan_mode_required=plan_mode, cwd=str(workdir.resolve()))
        member["worktree"] = record
        config["members"].append(member)
        return member

    try:
        member = roster.update(ws, team, add)
    except BaseException:
        if record is not None:
            worktrees.undo_add(record)  # "adds nothing": nor a worktree for nobody
        raise
    if record is not None:
        events.emit(ws, team, "worktree_created", member=name, path=record["path"],
                    branch=record["branch"], base=record["base"])
    events.emit(ws, team, "member_added", member=name, kind=member["kind"], role=role)
    return member


# -- messages ----------------------------------------------------------------------------
def _check_party(config: Json, name: str, what: str) -> None:
    if name in (LEAD, SUPERVISOR) and what == "sender":
        return
    if name == LEAD:
        return
    validate_member_name(name)
    if roster.find(config, name) is None:
        raise BadInput(f"unknown {what} {name!r} in team {config['name']!r}")


def send(ws: Workspace, team: str, recipient: str, content: str, *, type_: str = "message",
         sender: str = LEAD, request_id: str | None = None, approve: bool | None = None,
         reason: str | None = None, feedback: str | None = None,
         summary: str | None = None) -> Json:
    """Send one message; protocol types also open or answer their request record."""
    validate_name(sender, "sender")
    validate_name(recipient, "recipient")
    if type_ == "broadcast":
        return broadcast(ws, team, content, sender=sender, summary=summary)[0]
    config = require_team(ws, team, accepting=type_ not in WINDING_DOWN)
    _check_party(config, sender, "sender")
    _check_party(config, recipient, "recipient")
    if sender == recipient:
        raise BadInput("sending a message to oneself is refused")
    inbox.check_content(content)
    if type_ == "shutdown_request":
        if sender != LEAD:
            raise BadInput("only the lead sends shutdown_request")
        return shutdown(ws, team, recipient, reason=reason or content)["message"]
    if type_ in ("shutdown_response", "plan_approval_response"):
        if not request_id:
            raise BadInput(f"{type_} needs --request-id")
        if approve is None:
            raise BadInput(f"{type_} needs --approve or --reject")
        kind = "shutdown" if type_ == "shutdown_response" else "plan_approval"
        record = requests.get(ws, team, request_id)
        if record["kind"] != kind:
            raise BadInput(f"request {request_id!r} is a {record['kind']} request")
        if (record["recipient"], record["sender"]) != (sender, recipient):
            raise BadInput(f"request {request_id!r} was sent by {record['sender']} to "
                           f"{record['recipient']}; only {record['recipient']} answers it, "
                           f"to {record['sender']}")
        requests.answer(ws, team, request_id, approve, reason=reason, feedback=feedback)
    elif type_ == "plan_approval_request":
        if recipient != LEAD:
            raise BadInput("plan_approval_request goes to the lead")
        request_id = requests.open_request(ws, team, "plan_approval", sender, recipient,
                                           plan=content)["request_id"]
    elif type_ == "member_failed" and sender != SUPERVISOR:
        raise BadInput("member_failed is sent by teamd only")
    elif request_id or approve is not None:
        raise BadInput(f"--request-id and --approve/--reject do not apply to {type_}")
    extra: dict[str, Any] = {"summary": summary, "request_id": request_id}
    if type_ in ("shutdown_response", "plan_approval_response"):
        extra["approve"] = approve
    if type_ == "shutdown_response":
        extra["reason"] = reason
    if type_ == "plan_approval_response":
        extra["feedback"] = feedback
    if type_ == "plan_approval_request":
        extra["plan"] = content
    if type_ == "idle_notification":
        extra["reason"] = reason
    msg = inbox.make(type_, sender, recipient, content, **extra)
    inbox.deliver(ws, team, [msg])
    return msg


def broadcast(ws: Workspace, team: str, content: str, *, sender: str = LEAD,
              summary: str | None = None) -> list[Json]:
    """One copy per running member and the lead, except the sender; same id on each."""
    validate_name(sender, "sender")
    config = require_team(ws, team, accepting=True)
    _check_party(config, sender, "sender")
    inbox.check_content(content)
    targets = [m["name"] for m in config["members"] if m.get("desired") == "running"]
    if LEAD not in targets:
        targets.append(LEAD)
    targets = [t for t in targets if t != sender]
    if not targets:
        raise BadInput(f"team {team!r} has nobody to broadcast to")
    first = inbox.make("broadcast", sender, targets[0], content, summary=summary)
    copies = [{**first, "recipient": t} for t in targets]
    inbox.deliver(ws, team, copies)
    return copies


# -- shutdown, stop, restart -------------------------------------------------------------
def shutdown(ws: Workspace, team: str, name: str, *, reason: str = "",
             sender: str = LEAD) -> Json:
    """Ask a member to shut down. A member with no live process is answered for at once.

    Returns {"request": record, "message": request message, "answered": bool}.
    """
    validate_member_name(name)
    inbox.check_content(reason)
    if name == LEAD:
        raise BadInput("the lead is not shut down with a request; use `teamctl stop --force`")
    config = require_team(ws, team)
    member = roster.get(config, name)
    if member["desired"] == "stopped" and member["status"] == "shutdown":
        raise BadInput(f"{name!r} is already shut down")
    with roster.locked(ws, team) as config:
        member = roster.get(config, name)
        if member["desired"] == "stopped" and member["status"] == "shutdown":
            # re-checked under the lock: a racing shutdown may have answered it meanwhile
            raise BadInput(f"{name!r} is already shut down")
        live = roster.is_live(member)
        record = requests.open_request(ws, team, "shutdown", sender, name, reason=reason)
        rid = record["request_id"]
        msg = inbox.make("shutdown_request", sender, name, reason or "Please shut down.",
                         request_id=rid, reason=reason)
        if live:
            inbox.deliver(ws, team, [msg])
            return {"request": record, "message": msg, "answered": False}
        # No process to ask: answer on its behalf, under the roster lock (CONTRACT §6).
        record = requests.answer(ws, team, rid, True, reason="not running")
        member["desired"] = "stopped"
        change = roster.set_status(member, "shutdown")
        answer = inbox.make("shutdown_response", name, sender, "not running",
                            request_id=rid, approve=True, reason="not running")
        events.emit_many(ws, team, [
            {"ts": time.time(), "event": "message", "member": sender, "message": msg},
            {"ts": time.time(), "event": "message", "member": name, "message": answer}])
        events.status_changed(ws, team, name, change)
    board.release(ws, team, name)
    return {"request": record, "message": msg, "answered": True}


def stop(ws: Workspace, team: str, name: str) -> Json:
    """`stop --force`: desired=stopped; the supervisor SIGTERMs, then SIGKILLs.

    With no live process and no supervisor there is nobody to signal, nor anyone else to
    write the status: the member is marked shut down here. Otherwise the status is teamd's.
    """
    validate_member_name(name)
    require_team(ws, team)
    with roster.locked(ws, team) as config:
        member = roster.get(config, name)
        member["desired"] = "stopped"
        change = None
        if not roster.is_live(member) and pidfile.running(ws) is None:
            change = roster.set_status(member, "shutdown")
        events.status_changed(ws, team, name, change)
        result = dict(member)
    if result["status"] == "shutdown":
        board.release(ws, team, name)
    return result


def restart(ws: Workspace, team: str, name: str) -> Json:
    """desired=running and a restart request the supervisor acts on (clears failed/backoff)."""
    validate_member_name(name)
    require_team(ws, team, accepting=True)
    with roster.locked(ws, team) as config:
        member = roster.get(config, name)
        member["desired"] = "running"
        member["restart_requested_at"] = time.time()
        # with a supervisor running the status is its to write (it forks the member now)
        if not roster.is_live(member) and pidfile.running(ws) is None \
                and member["status"] in ("failed", "shutdown", "backoff"):
            change = roster.set_status(member, "pending")
            events.status_changed(ws, team, name, change)
        return dict(member)


# -- plans -------------------------------------------------------------------------------
def answer_plan(ws: Workspace, team: str, request_id: str, approve: bool,
                feedback: str | None = None) -> Json:
    """Approve or reject a plan request; the member learns it from its inbox."""
    require_team(ws, team)
    record = requests.get(ws, team, request_id)
    if record["kind"] != "plan_approval":
        raise BadInput(f"request {request_id!r} is a {record['kind']} request; "
                       "only plans are approved or rejected here")
    if not approve and not (feedback and feedback.strip()):
        raise BadInput("a rejection needs --feedback saying what to change")
    text = feedback or ("Plan approved." if approve else "Plan rejected.")
    inbox.check_content(text)
    requests.answer(ws, team, request_id, approve, feedback=feedback)
    msg = inbox.make("plan_approval_response", record["recipient"], record["sender"], text,
                     request_id=request_id, approve=approve, feedback=feedback)
    inbox.deliver(ws, team, [msg])
    return msg


# -- deletion ----------------------------------------------------------------------------
def mark_deleting(ws: Workspace, team: str) -> Json:
    def mark(config: Json) -> Json:
        if config.get("state") != "deleting":
            config["state"] = "deleting"
        return config

    config = roster.update(ws, team, mark)
    events.emit(ws, team, "team_deleting")
    return config


def live_members(config: Json) -> list[Json]:
    return [m for m in config["members"] if roster.is_live(m)]


def remove_team(ws: Workspace, team: str) -> None:
    """Remove the team's folders: rename first (so nobody sees half a team), then delete."""
    config = require_team(ws, team)
    if live_members(config):
        raise TeamdError(f"team {team!r} still has live members")
    # before the folders go: worktree_removed / worktree_kept land in the team's journal
    worktrees.release_all(ws, team, config["members"])
    stamp = f"{os.getpid()}-{time.time_ns()}"
    graveyard: list[Path] = []
    for folder in (ws.team_dir(team), ws.tasks_dir(team)):
        if folder.exists():
            target = folder.with_name(f".deleted-{folder.name}-{stamp}")
            os.replace(folder, target)
            graveyard.append(target)
    for target in graveyard:
        shutil.rmtree(target, ignore_errors=True)
