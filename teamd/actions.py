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

from teamd import board, events, files, inbox, permissions, pidfile, requests, roster
from teamd.errors import BadInput, TeamdError
from teamd.files import Json
from teamd.layout import LEAD, SUPERVISOR, Workspace, validate_member_name, validate_name

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
    if name in (LEAD, SUPERVISOR) and what == "sender":
        return
    if name == LEAD:
        return
    validate_member_name(name)
    if roster.find(config, name) is None:
        raise roster.unknown_member(config, name, what)


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
    if type_ == "permission_request":
        raise BadInput("permission_request is sent by the harness, for a tool call that "
                       "waits; answer one with permission_response")
    if type_ == "permission_response":
        if not request_id or approve is None:
            raise BadInput("permission_response needs --request-id and --approve or --reject")
        record = requests.get(ws, team, request_id)
        if (record["kind"], record["recipient"], record["sender"]) != \
                ("permission", sender, recipient):
            raise BadInput(f"request {request_id!r} is not a permission request from "
                           f"{recipient} to {sender}")
        return answer_request(ws, team, request_id, approve, feedback or reason)
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
    release_tasks(ws, team, name)
    return {"request": record, "message": msg, "answered": True}


def release_tasks(ws: Workspace, team: str, name: str) -> list[int]:
    """A member left for good (shutdown, failed): its unfinished tasks go back to the
    board, and its `current_task` is cleared with them, so `status` shows no task it no
    longer owns. Two writes in the contract's lock order (board, then roster), never
    nested; a team removed meanwhile has nothing left to clear."""
    released = board.release(ws, team, name)

    def clear(config: Json) -> None:
        member = roster.find(config, name)
        if member is not None and member.get("current_task") is not None:
            member["current_task"] = None

    try:
        roster.update(ws, team, clear)
    except BadInput:
        pass  # the team is gone: no roster to correct
    return released


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
        release_tasks(ws, team, name)
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


# -- plans and permissions ---------------------------------------------------------------
def answer_plan(ws: Workspace, team: str, request_id: str, approve: bool,
                feedback: str | None = None) -> Json:
    """Approve or reject a plan request; the member learns it from its inbox."""
    return answer_request(ws, team, request_id, approve, feedback, only="plan_approval")


def answer_request(ws: Workspace, team: str, request_id: str, approve: bool,
                   feedback: str | None = None, *, always: bool = False,
                   only: str | None = None) -> Json:
    """Approve or reject a plan or permission request (`teamctl approve`/`reject`, the
    lead's SendMessage): compare-and-set on the record, then the response into the
    member's inbox. `always` (permissions only) also allows the exact call from now on.
    Returns the response message."""
    require_team(ws, team)
    record = requests.get(ws, team, request_id)
    kind = record["kind"]
    if only is not None and kind != only:
        raise BadInput(f"request {request_id!r} is a {kind} request, not {only}")
    if kind not in ("plan_approval", "permission"):
        raise BadInput(f"request {request_id!r} is a {kind} request; only plan and "
                       "permission requests are approved or rejected here")
    if always and kind != "permission":
        raise BadInput(f"--always applies to permission requests; {request_id!r} is a "
                       f"{kind} request")
    if not approve and not (feedback and feedback.strip()):
        raise BadInput("a rejection needs --feedback saying "
                       + ("what to change" if kind == "plan_approval" else "why"))
    if kind == "plan_approval":
        type_ = "plan_approval_response"
        text = feedback or ("Plan approved." if approve else "Plan rejected.")
    else:  # the feedback travels in its own field (and reaches the model as "Feedback:")
        type_ = "permission_response"
        text = f"{'Approved' if approve else 'Refused'}: {permissions.describe(record)}"
    inbox.check_content(text)
    if feedback:
        inbox.check_content(feedback)
    record = requests.answer(ws, team, request_id, approve, feedback=feedback)
    if always and approve:
        permissions.add_always(ws, team, record["tool"], record.get("argument") or "")
    msg = inbox.make(type_, record["recipient"], record["sender"], text,
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
