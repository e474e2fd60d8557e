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

from teamd import board, events, files, inbox, pidfile, requests, roster
from teamd.errors import BadInput, TeamdError
from teamd.files import Json
from teamd.layout import LEAD, SUPERVISOR, USER, Workspace, validate_member_name, validate_name

#: message types that still land while a team is being deleted (its winding-down)
WINDING_DOWN = ("shutdown_response", "idle_notification", "member_failed")


# -- teams -------------------------------------------------------------------------------
def create_team(ws: Workspace, team: str, description: str = "") -> Json:
    validate_name(team, "team name")
    if ws.team_exists(team):
        raise BadInput(f"team {team!r} already exists")
    for folder in (ws.teams_dir, ws.tasks_root, ws.team_dir(team), ws.requests_dir(team),
                   ws.sessions_dir(team), ws.transcripts_dir(team), ws.logs_dir(team),
                   ws.tasks_dir(team)):
        files.ensure_dir(folder)
    config = roster.new_roster(team, description)
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


def spawn(ws: Workspace, team: str, name: str, prompt: str, *, role: str = "",
          model: str | None = None, plan_mode: bool = False, cwd: str | None = None,
          lead: bool = False) -> Json:
    """Add a member with `desired=running`; the supervisor forks it."""
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
    require_team(ws, team, accepting=True)

    def add(config: Json) -> Json:
        if config.get("state") == "deleting":
            raise BadInput(f"team {team!r} is being deleted")
        existing = roster.find(config, name)
        if existing is not None:
            raise BadInput(f"{name!r} is already in team {team!r} (status "
                           f"{existing['status']}); use `teamctl restart {team} {name}`")
        member = roster.new_member(config, name, kind="lead" if lead else "teammate",
                                   role=role, prompt=prompt, model=model,
                                   plan_mode_required=plan_mode, cwd=str(workdir.resolve()))
        config["members"].append(member)
        return member

    member = roster.update(ws, team, add)
    events.emit(ws, team, "member_added", member=name, kind=member["kind"], role=role)
    return member


# -- messages ----------------------------------------------------------------------------
def _check_party(config: Json, name: str, what: str) -> None:
    if name == USER:
        if not roster.has_llm_lead(config):
            raise BadInput(f"unknown {what} {name!r} in team {config['name']!r}: 'user' is "
                           "the person beside an LLM lead, and this team has none")
        return
    if name in (LEAD, SUPERVISOR) and what == "sender":
        return
    if name == LEAD:
        return
    validate_member_name(name)
    if roster.find(config, name) is None:
        raise BadInput(f"unknown {what} {name!r} in team {config['name']!r}")


def send(ws: Workspace, team: str, recipient: str, content: str, *, type_: str = "message",
         sender: str | None = None, request_id: str | None = None,
         approve: bool | None = None, reason: str | None = None,
         feedback: str | None = None, summary: str | None = None) -> Json:
    """Send one message; protocol types also open or answer their request record.
    `sender` defaults to the person (`lead`, or `user` beside an LLM lead)."""
    if sender is not None:
        validate_name(sender, "sender")
    validate_name(recipient, "recipient")
    if type_ == "broadcast":
        return broadcast(ws, team, content, sender=sender, summary=summary)[0]
    config = require_team(ws, team, accepting=type_ not in WINDING_DOWN)
    me = roster.person(config)
    sender = sender or me
    _check_party(config, sender, "sender")
    _check_party(config, recipient, "recipient")
    if sender == recipient:
        raise BadInput("sending a message to oneself is refused")
    inbox.check_content(content)
    if type_ == "shutdown_request":
        if sender not in (LEAD, me):
            raise BadInput(f"only the lead or the person ({me}) sends shutdown_request")
        return shutdown(ws, team, recipient, reason=reason or content,
                        sender=sender)["message"]
    if type_ in ("shutdown_response", "plan_approval_response"):
        if not request_id:
            raise BadInput(f"{type_} needs --request-id")
        if approve is None:
            raise BadInput(f"{type_} needs --approve or --reject")
        kind = "shutdown" if type_ == "shutdown_response" else "plan_approval"
        record = requests.get(ws, team, request_id)
        if record["kind"] != kind:
            raise BadInput(f"request {request_id!r} is a {record['kind']} request")
        # a plan goes to the lead, and the person may answer it too (CONTRACT §3)
        answerers = {record["recipient"], *((me,) if kind == "plan_approval" else ())}
        if sender not in answerers or recipient != record["sender"]:
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


def broadcast(ws: Workspace, team: str, content: str, *, sender: str | None = None,
              summary: str | None = None) -> list[Json]:
    """One copy per running member and the lead, except the sender; same id on each.
    `sender` defaults to the person."""
    if sender is not None:
        validate_name(sender, "sender")
    config = require_team(ws, team, accepting=True)
    sender = sender or roster.person(config)
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
             sender: str | None = None) -> Json:
    """Ask a member to shut down. A member with no live process is answered for at once.
    `sender` (who hears the answer) defaults to the person.

    Returns {"request": record, "message": request message, "answered": bool}.
    """
    validate_member_name(name)
    inbox.check_content(reason)
    if name == LEAD:
        raise BadInput("the lead is not shut down with a request; use `teamctl stop --force`")
    config = require_team(ws, team)
    sender = sender or roster.person(config)
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


def approve_shutdown(ws: Workspace, team: str, name: str, request_id: str, *, reason: str,
                     content: str | None = None, summary: str | None = None,
                     pid: int | None = None) -> Json:
    """Member `name` approves a shutdown request made to it, in one roster-locked step:
    `desired=stopped` and `status=stopping` written first, then the record answered, then
    the `shutdown_response` appended to the inbox of whoever asked. A crash at any point
    leaves no asker told "approved" while the roster still wants the member running
    (`desired=stopped` alone is carried out by teamd). The roster is written only while
    `pid` is the member's recorded process (a stale process leaves it alone; CONTRACT §4).
    Returns the response message."""
    record = requests.get(ws, team, request_id)
    if record["kind"] != "shutdown":
        raise BadInput(f"request {request_id!r} is a {record['kind']} request")
    if record["recipient"] != name:
        raise BadInput(f"request {request_id!r} was sent to {record['recipient']}; "
                       "only they answer it")
    msg = inbox.make("shutdown_response", name, record["sender"],
                     content or f"{name} is shutting down", request_id=request_id,
                     approve=True, reason=reason, summary=summary)
    moved: list[tuple[str, str] | None] = [None]
    with roster.held(ws, team) as config:  # lock order: roster → request → inbox → events
        member = roster.find(config, name)

        def stop_first(_: Json) -> None:
            if member is None or (pid is not None and member.get("pid") != pid):
                return
            wanted = member["desired"] != "stopped"
            member["desired"] = "stopped"
            moved[0] = roster.set_status(member, "stopping")
            if wanted or moved[0] is not None:
                roster.save(ws, team, config)

        requests.answer(ws, team, request_id, True, reason=reason, expect_kind="shutdown",
                        before_write=stop_first)
        inbox.deliver(ws, team, [msg])
    events.status_changed(ws, team, name, moved[0])
    return msg


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
                feedback: str | None = None, sender: str | None = None) -> Json:
    """Approve or reject a plan request; the member learns it from its inbox. `sender`
    (who answers) defaults to the person: `lead`, or `user` beside an LLM lead."""
    config = require_team(ws, team)
    sender = sender or roster.person(config)
    record = requests.get(ws, team, request_id)
    if record["kind"] != "plan_approval":
        raise BadInput(f"request {request_id!r} is a {record['kind']} request; "
                       "only plans are approved or rejected here")
    if not approve and not (feedback and feedback.strip()):
        raise BadInput("a rejection needs --feedback saying what to change")
    text = feedback or ("Plan approved." if approve else "Plan rejected.")
    inbox.check_content(text)
    requests.answer(ws, team, request_id, approve, feedback=feedback)
    msg = inbox.make("plan_approval_response", sender, record["sender"], text,
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
    stamp = f"{os.getpid()}-{time.time_ns()}"
    graveyard: list[Path] = []
    for folder in (ws.team_dir(team), ws.tasks_dir(team)):
        if folder.exists():
            target = folder.with_name(f".deleted-{folder.name}-{stamp}")
            os.replace(folder, target)
            graveyard.append(target)
    for target in graveyard:
        shutil.rmtree(target, ignore_errors=True)
