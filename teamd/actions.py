"""What a person (through `teamctl`) or a lead (through its tools) can do to a team.

Each action validates everything first (BadInput, nothing touched), then writes the files
in the contract's lock order: roster → board → request → inbox → events. The supervisor and
the teammates react to those files; nothing here signals a process.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from teamd import (
    board,
    budget,
    events,
    files,
    inbox,
    permissions,
    pidfile,
    requests,
    roster,
    settings,
    worktrees,
)
from teamd.errors import BadInput, TeamdError
from teamd.files import Json
from teamd.layout import LEAD, SUPERVISOR, USER, Workspace, validate_member_name, validate_name
from teamd.records import Member, Message, Request, Task, Worktree
from teamd.states import Desired, Move, Status, Writer, journal, transition

#: message types that still land while a team is being deleted (its winding-down)
WINDING_DOWN = ("shutdown_response", "idle_notification", "member_failed")


# -- teams -------------------------------------------------------------------------------
def create_team(ws: Workspace, team: str, description: str = "", *, repo: str | None = None,
                worktrees_on: bool = False, budget_usd: float | None = None) -> Json:
    """A new team. `repo` (a folder inside a git work tree) is the team's repository;
    `worktrees_on` gives each teammate its own worktree of it (CONTRACT §13) — without
    `repo`, of the repository holding the root. `budget_usd` caps its spend (§12)."""
    validate_name(team, "team name")
    budget_usd = None if budget_usd is None else budget.parse_usd(budget_usd, "--budget")
    if ws.team_exists(team):
        raise BadInput(f"team {team!r} already exists")
    top: Path | None = None
    if repo is not None:
        top = worktrees.require_repo(Path(repo).expanduser(), "--repo")
    elif worktrees_on:
        top = worktrees.require_repo(ws.root, "the root (give --repo DIR)")
    if top is not None:
        worktrees.exclude_workspace(ws, top)
    for folder in (ws.teams_dir, ws.tasks_root, ws.team_dir(team), ws.members_dir(team),
                   ws.requests_dir(team), ws.sessions_dir(team), ws.transcripts_dir(team),
                   ws.logs_dir(team), ws.tasks_dir(team)):
        files.ensure_dir(folder)
    config = roster.new_roster(team, description, budget_usd)
    config.setdefault("repo", str(top) if top is not None else None)
    config.setdefault("worktrees", bool(worktrees_on))
    with files.lock(ws.config(team)):
        if ws.team_exists(team):
            raise BadInput(f"team {team!r} already exists")
        with files.lock(ws.spend(team)):  # before the roster: a team always has its spend
            budget.start(ws, team)
        files.write_json(ws.config(team), config)
    events.emit(ws, team, "team_created", description=description)
    return config


def require_team(ws: Workspace, team: str, *, accepting: bool = False) -> Json:
    """The roster of an existing team; with `accepting`, refuse a team being deleted."""
    config = roster.load(ws, validate_name(team, "team name"))
    if accepting and config.get("state") == "deleting":
        raise BadInput(f"team {team!r} is being deleted")
    return config


def _already_in(team: str, name: str, existing: Mapping[str, Any]) -> BadInput:
    return BadInput(f"{name!r} is already in team {team!r} (status {existing['status']}); "
                    f"use `teamctl restart {team} {name}`")


def spawn(ws: Workspace, team: str, name: str, prompt: str, *, role: str = "",
          model: str | None = None, plan_mode: bool = False, cwd: str | None = None,
          lead: bool = False, worktree: bool | None = None, base: str | None = None,
          budget_usd: float | None = None, effort: str = "") -> Member:
    """Add a member with `desired=running`; the supervisor forks it. With a worktree
    (`worktree`, default: the team's `worktrees` for a teammate) it works in its own git
    worktree, made first and taken back if it cannot be added (§13). `budget_usd` caps its
    spend (§12); `effort` is its `output_config.effort` ("": the setting's, §6)."""
    validate_member_name(name)
    effort = settings.check("effort", effort, "--effort")
    budget_usd = None if budget_usd is None else budget.parse_usd(budget_usd, "--budget")
    if lead and name != LEAD:
        raise BadInput("--lead requires the member name 'lead'")
    if lead and plan_mode:
        raise BadInput("--plan-mode does not apply to the lead (it approves plans)")
    if name == LEAD and not lead:
        raise BadInput("'lead' is the lead's name: use --lead to spawn an LLM lead")
    if not prompt or not prompt.strip():
        raise BadInput("a member needs a --prompt")
    inbox.check_content(prompt)
    config = require_team(ws, team, accepting=True)  # the LLM lead works in the repository
    workdir = Path(cwd).expanduser() if cwd else Path(config["repo"]) if lead and config.get(
        "repo") else ws.root
    if not workdir.is_dir():
        raise BadInput(f"--cwd {str(workdir)!r} is not a directory")
    use_worktree = worktree if worktree is not None else bool(config.get("worktrees")) and not lead
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

    def add(config: Json) -> Member:
        if config.get("state") == "deleting":
            raise BadInput(f"team {team!r} is being deleted")
        existing = roster.find(config, name)
        if existing is not None:
            raise _already_in(team, name, existing)
        member = roster.new_member(config, name, kind="lead" if lead else "teammate",
                                   role=role, prompt=prompt, model=model,
                                   plan_mode_required=plan_mode, cwd=str(workdir.resolve()),
                                   budget_usd=budget_usd)
        member["worktree"], member["effort"] = cast(Worktree | None, record), effort
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


# -- messages ----------------------------------------------------------------------------
#: the message types that answer a request (CONTRACT §3, §6)
ANSWERS = ("shutdown_response", "plan_approval_response", "permission_response")


@dataclass(frozen=True)
class Spelling:
    """How a caller names a response's fields in its refusals: `teamctl`'s flags, or the
    SendMessage tool's inputs (`TOOL_INPUTS`). The rules and the sentences are the same."""

    request_id: str = "--request-id"
    approve: str = "--approve or --reject"
    approve_or: str = "--approve/--reject"
    feedback: str = "--feedback"
    reason: str = "--reason"


FLAGS = Spelling()
TOOL_INPUTS = Spelling(request_id="request_id", approve="approve (true or false)",
                       approve_or="approve", feedback="feedback", reason="a reason")


def check_answer_fields(type_: str, request_id: str | None, approve: bool | None, *,
                        words: Spelling = FLAGS) -> None:
    """A response names the request it answers and says yes or no; no other message
    carries either (BadInput otherwise)."""
    if type_ in ANSWERS:
        missing = [w for w, absent in ((words.request_id, not request_id),
                                       (words.approve, approve is None)) if absent]
        if missing:
            raise BadInput(f"{type_} needs {' and '.join(missing)}")
    elif request_id or approve is not None:
        raise BadInput(f"{words.request_id} and {words.approve_or} do not apply to {type_}; "
                       f"they only apply to {', '.join(ANSWERS)}")


def _check_answerer(record: Json, expected: str, sender: str, recipient: str | None,
                    me: str) -> None:
    """A request is answered only as what it is (`expected` kind), by the member it was
    sent to (a plan or permission request also by the person, `me`: CONTRACT §3), and to
    whoever asked (`recipient`; None: to them, whoever they are)."""
    rid = record["request_id"]
    if record["kind"] != expected:
        raise BadInput(f"request {rid!r} is a {record['kind']} request, not {expected}")
    answerers = {record["recipient"], *((me,) if expected != "shutdown" else ())}
    if sender not in answerers or recipient not in (None, record["sender"]):
        raise BadInput(f"request {rid!r} was sent by {record['sender']} to "
                       f"{record['recipient']}; only {record['recipient']} answers it, "
                       f"to {record['sender']}")


def check_shutdown_refusal(approve: bool, reason: str | None, content: str, *,
                           words: Spelling = FLAGS) -> None:
    """A member refusing a shutdown says why it must go on (CONTRACT §6)."""
    if not approve and not (reason or content.strip()):
        raise BadInput(f"refusing a shutdown needs {words.reason} (why it must go on)")


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
        raise roster.unknown_member(config, name, what)


def send(ws: Workspace, team: str, recipient: str, content: str, *, type_: str = "message",
         sender: str | None = None, request_id: str | None = None,
         approve: bool | None = None, reason: str | None = None,
         feedback: str | None = None, summary: str | None = None) -> Message:
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
    if type_ == "permission_request":
        raise BadInput("permission_request is sent by the harness, for a tool call that "
                       "waits; answer one with permission_response")
    check_answer_fields(type_, request_id, approve)
    if type_ in ("permission_response", "plan_approval_response"):
        assert request_id is not None and approve is not None  # check_answer_fields
        if type_ == "permission_response":
            return answer_request(ws, team, request_id, approve, feedback or reason,
                                  only="permission", sender=sender, recipient=recipient)
        return answer_request(ws, team, request_id, approve, feedback,
                              only="plan_approval", sender=sender, recipient=recipient,
                              content=content)
    if type_ == "shutdown_request":
        if sender not in (LEAD, me):
            raise BadInput(f"only the lead or the person ({me}) sends shutdown_request")
        return cast(Message, shutdown(ws, team, recipient, reason=reason or content,
                                      sender=sender)["message"])
    if type_ == "shutdown_response":
        assert request_id is not None and approve is not None
        _check_answerer(requests.get(ws, team, request_id), "shutdown", sender, recipient, me)
        check_shutdown_refusal(approve, reason, content)
        requests.answer(ws, team, request_id, approve, reason=reason, feedback=feedback)
    elif type_ == "plan_approval_request":
        if recipient != LEAD:
            raise BadInput("plan_approval_request goes to the lead")
        request_id = requests.open_request(ws, team, "plan_approval", sender, recipient,
                                           plan=content)["request_id"]
    elif type_ == "member_failed" and sender != SUPERVISOR:
        raise BadInput("member_failed is sent by teamd only")
    extra: dict[str, Any] = {"summary": summary, "request_id": request_id}
    if type_ == "shutdown_response":
        extra["approve"] = approve
        extra["reason"] = reason
    if type_ == "plan_approval_request":
        extra["plan"] = content
    if type_ == "idle_notification":
        extra["reason"] = reason
    msg = inbox.make(type_, sender, recipient, content, **extra)
    inbox.deliver(ws, team, [msg])
    return msg


def inbox_owner(config: Json, name: str | None) -> tuple[str, bool]:
    """Whose inbox `teamctl inbox` shows (`name`, default: the person's), and whether the
    person drains it: only the person's own (`lead_inbox.jsonl`, or `user_inbox.jsonl`
    beside an LLM lead). Any other belongs to a member's process, which drains it itself:
    the person only peeks (CONTRACT §3, Delivery)."""
    me = roster.person(config)
    name = name or me
    if name == USER and me != USER:
        raise BadInput(f"unknown member {USER!r} in team {config['name']!r}: 'user' is the "
                       "person beside an LLM lead, and this team has none")
    if name not in (LEAD, USER):
        roster.get(config, name)
    return name, name == me


def broadcast(ws: Workspace, team: str, content: str, *, sender: str | None = None,
              summary: str | None = None) -> list[Message]:
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
    copies: list[Message] = [{**first, "recipient": t} for t in targets]
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
        record, msg = _open_shutdown(ws, team, name, reason, sender)
        rid = record["request_id"]
        if live:
            inbox.deliver(ws, team, [msg])
            return {"request": record, "message": msg, "answered": False}
        # No process to ask: answer on its behalf, under the roster lock (CONTRACT §6).
        record = cast(Request, requests.answer(ws, team, rid, True, reason="not running"))
        member["desired"] = Desired.STOPPED
        change = transition(member, Status.SHUTDOWN, Writer.CONTROL)
        answer = inbox.make("shutdown_response", name, sender, "not running",
                            request_id=rid, approve=True, reason="not running")
        events.emit_many(ws, team, [
            {"ts": time.time(), "event": "message", "member": sender, "message": msg},
            {"ts": time.time(), "event": "message", "member": name, "message": answer}])
        journal(ws, team, name, change)
    release_tasks(ws, team, name)
    return {"request": record, "message": msg, "answered": True}


def release_tasks(ws: Workspace, team: str, name: str) -> list[int]:
    """A member left for good (shutdown, failed): its unfinished tasks go back to the
    board, and its `current_task` is cleared with them, so `status` shows no task it no
    longer owns. Two writes in the contract's lock order (board, then roster), never
    nested; a team removed meanwhile has nothing left to clear."""
    released = board.release(ws, team, name)

    def clear(member: Json) -> None:
        if member.get("current_task") is not None:
            member["current_task"] = None

    try:
        roster.update_status(ws, team, name, clear)
    except BadInput:
        pass  # the team is gone: no roster to correct
    return released


def _open_shutdown(ws: Workspace, team: str, name: str, reason: str, sender: str
                   ) -> tuple[Request, Message]:
    """The request record and its `shutdown_request` message (not yet delivered)."""
    record = requests.open_request(ws, team, "shutdown", sender, name, reason=reason)
    msg = inbox.make("shutdown_request", sender, name, reason or "Please shut down.",
                     request_id=record["request_id"], reason=reason)
    return record, msg


def approve_shutdown(ws: Workspace, team: str, name: str, request_id: str, *, reason: str,
                     content: str | None = None, summary: str | None = None,
                     pid: int | None = None) -> Message:
    """Member `name` approves a shutdown request made to it, in one roster-locked step:
    `desired=stopped` and `status=stopping` written first, then the record answered, then
    the `shutdown_response` appended to the inbox of whoever asked. A crash at any point
    leaves no asker told "approved" while the roster still wants the member running
    (`desired=stopped` alone is carried out by teamd). The roster is written only while
    `pid` is the member's recorded process (a stale process leaves it alone; CONTRACT §4).
    Returns the response message."""
    record = requests.get(ws, team, request_id)
    _check_answerer(record, "shutdown", name, None, name)
    msg = inbox.make("shutdown_response", name, record["sender"],
                     content or f"{name} is shutting down", request_id=request_id,
                     approve=True, reason=reason, summary=summary)
    moved: list[Move | None] = [None]
    # lock order: roster → member status → request → inbox → events
    with roster.held(ws, team) as config, roster.status_lock(ws, team, name):
        member = roster.find(config, name)

        def stop_first(_: Json) -> None:
            if member is None or (pid is not None and member.get("pid") != pid):
                return
            wanted = member["desired"] != "stopped"
            member["desired"] = Desired.STOPPED
            moved[0] = transition(member, Status.STOPPING, Writer.MEMBER)
            if wanted or moved[0] is not None:
                roster.save(ws, team, config)

        requests.answer(ws, team, request_id, True, reason=reason, expect_kind="shutdown",
                        before_write=stop_first)
        inbox.deliver(ws, team, [msg])
    journal(ws, team, name, moved[0])
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
        member["desired"] = Desired.STOPPED
        change = None
        if not roster.is_live(member) and pidfile.running(ws) is None:
            change = transition(member, Status.SHUTDOWN, Writer.CONTROL)
        journal(ws, team, name, change)
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
        _request_start(ws, team, member, pidfile.running(ws) is not None)
        return dict(member)


def _request_start(ws: Workspace, team: str, member: Member | Json, supervised: bool
                   ) -> None:
    """desired=running and a restart request (under the caller's roster lock)."""
    member["desired"] = "running"
    member["restart_requested_at"] = time.time()
    # with a supervisor running the status is its to write (it forks the member now)
    if not roster.is_live(member) and not supervised \
            and member["status"] in ("failed", "shutdown", "backoff"):
        journal(ws, team, member["name"], transition(member, Status.PENDING, Writer.CONTROL))


# -- the whole team at once (like docker compose) ---------------------------------------
def restart_all(ws: Workspace, team: str, *, only_stopped: bool = False) -> list[str]:
    """`restart TEAM` (every member) or `up TEAM` (`only_stopped`: every member that is
    not to run — desired=stopped — or that failed). One roster update. Returns the names."""
    require_team(ws, team, accepting=True)
    supervised = pidfile.running(ws) is not None
    with roster.locked(ws, team) as config:
        chosen = [m for m in config["members"] if not only_stopped
                  or m["desired"] != "running" or m["status"] == "failed"]
        for member in chosen:
            _request_start(ws, team, member, supervised)
        return [m["name"] for m in chosen]


def down(ws: Workspace, team: str, *, force: bool = False, sender: str | None = None) -> Json:
    """`down TEAM`: the shutdown handshake for every member still meant to run (`force`, or
    an LLM lead: desired=stopped instead); the team stays. `sender` (who asks, and hears the
    answers) defaults to the person: `lead`, or `user` beside an LLM lead (CONTRACT §2).
    Returns {"requests": records opened and still to be answered, "answered": names shut
    down at once (no process), "stopped": names given desired=stopped}."""
    config = require_team(ws, team)
    sender = sender or roster.person(config)
    out: Json = {"requests": [], "answered": [], "stopped": []}
    for m in config["members"]:
        name = m["name"]
        if m["desired"] == "stopped" and m["status"] == "shutdown":
            continue
        if force or m["kind"] == "lead" or name == LEAD:
            stop(ws, team, name)
            out["stopped"].append(name)
            continue
        if m["desired"] == "stopped" or m["status"] == "stopping":
            continue  # already on its way out
        try:
            result = shutdown(ws, team, name, reason=f"team {team} is going down",
                              sender=sender)
        except BadInput:
            if roster.get(roster.load(ws, team), name)["status"] == "shutdown":
                continue  # shut down meanwhile
            raise
        if result["answered"]:
            out["answered"].append(name)
        else:
            out["requests"].append(result["request"])
    return out


def still_up(ws: Workspace, team: str, names: list[str] | None = None) -> list[str]:
    """Which of `names` (default: every member) still have a live process."""
    config = require_team(ws, team)
    return [m["name"] for m in config["members"]
            if (names is None or m["name"] in names) and roster.is_live(m)]


def remove_member(ws: Workspace, team: str, name: str) -> Json:
    """Take a member with no live process out of the roster for good: its unfinished tasks
    go back to pending, its status file goes, its pending requests are rejected (`removed`),
    its session and inbox are moved to `removed/{name}-{ts}/` (a member spawned again by
    that name starts afresh), and its git worktree is removed if that loses
    nothing (else kept and said so: `worktree_kept`). Returns the roster entry removed,
    with `worktree_report` (from `worktrees.release`) when it had a worktree."""
    validate_member_name(name)
    require_team(ws, team)
    with roster.locked(ws, team) as config:
        member = roster.get(config, name)
        if roster.is_live(member):
            raise TeamdError(f"{name} is still running; shut it down first "
                             f"(`teamctl remove {team} {name}` does, or add --force)")
        # written back as the lock is let go: config.json, then the status file removed
        config["members"] = [m for m in config["members"] if m["name"] != name]
    board.release(ws, team, name)
    _close_requests_of(ws, team, name)
    _set_aside(ws, team, name)
    events.emit(ws, team, "member_removed", member=name, kind=member["kind"],
                role=member.get("role", ""))
    report = worktrees.release(ws, team, member)  # no lock held: git runs
    return {**member, "worktree_report": report} if report else cast(Json, member)


def _close_requests_of(ws: Workspace, team: str, name: str) -> None:
    """A member removed for good leaves no request open: what it sent or was sent and is
    still pending is answered `rejected`, reason `removed` (compare-and-set: one answered
    meanwhile keeps its answer), so a plan of it never blocks a new member of that name."""
    for record in requests.list_requests(ws, team, pending_only=True):
        if name in (record.get("sender"), record.get("recipient")):
            try:
                requests.answer(ws, team, record["request_id"], False, reason="removed")
            except BadInput:
                pass  # answered meanwhile


def _set_aside(ws: Workspace, team: str, name: str) -> Path | None:
    """Move a removed member's session and inbox to `removed/{name}-{ts}/` (for a person to
    read), so a member spawned again by that name starts with its own prompt and nothing
    of the old one's history (CONTRACT §6). Each file moved under its own lock, in the
    contract's order (inbox, then session). Returns the folder, or None if nothing moved."""
    moves = [(ws.inbox(team, name), "inbox.jsonl"), (ws.session(team, name), "session.jsonl")]
    if not any(path.exists() for path, _ in moves):
        return None
    folder = files.ensure_dir(ws.removed_dir(team) / f"{name}-{_stamp(time.time())}")
    for path, kept in moves:
        if path.parent.is_dir():
            with files.lock(path):
                if path.exists():
                    os.replace(path, folder / kept)
    return folder


def _stamp(now: float) -> str:
    """YYYYmmddTHHMMSS.ffffff, local time: the stamp of archive and removed folders."""
    return time.strftime("%Y%m%dT%H%M%S", time.localtime(now)) + f".{int(now % 1 * 1e6):06d}"


def add_task(ws: Workspace, team: str, subject: str, description: str = "",
             blocked_by: list[int] | None = None, owner: str | None = None,
             created_by: str = LEAD,
             before_write: Callable[[Json], None] | None = None) -> Task:
    """`task add` and the TaskCreate tool: a new task, given to `owner` from the start when
    named (so nobody else can claim it in between). `before_write` (a member's
    `task_created` hook) sees the task once its input is found good, and may refuse it by
    raising: nothing is written then."""
    config = require_team(ws, team, accepting=True)
    inbox.check_content(subject)
    inbox.check_content(description)
    if owner is not None:
        validate_member_name(owner)
        roster.get(config, owner)
    if before_write is not None:
        before_write({"subject": subject, "description": description,
                      "blocked_by": blocked_by or [], "created_by": created_by})
    return board.create(ws, team, subject, description, blocked_by or [],
                        created_by=created_by, owner=owner)


def task_owner(config: Json, owner: Any) -> Any:
    """An owner as `task update --owner` or TaskUpdate gives it: `board.UNSET` (leave it
    alone), "" or None (nobody), or the name of a member of the team (else BadInput)."""
    if owner is board.UNSET:
        return owner
    owner = owner or None  # "" means "nobody", like null
    if owner is not None:
        roster.get(config, owner)
    return owner


def update_task(ws: Workspace, team: str, task_id: int, *, status: str | None = None,
                owner: Any = board.UNSET, add_blocked_by: Iterable[int] = (),
                add_blocks: Iterable[int] = (), actor: str = LEAD,
                add_commits: Iterable[str] = (), holder: str | None = None) -> Task:
    """`task update` and the TaskUpdate tool's write: a task's status, owner (see
    `task_owner`) or dependencies. `holder`: a teammate, who changes only its own or an
    unowned task (`board.NotHolder` otherwise, nothing changed)."""
    config = require_team(ws, team)
    return board.update(ws, team, task_id, status=status, owner=task_owner(config, owner),
                        add_blocked_by=add_blocked_by, add_blocks=add_blocks, actor=actor,
                        add_commits=add_commits, holder=holder)


# -- plans and permissions ---------------------------------------------------------------
def answer_plan(ws: Workspace, team: str, request_id: str, approve: bool,
                feedback: str | None = None, sender: str | None = None) -> Message:
    """Approve or reject a plan request; the member learns it from its inbox."""
    return answer_request(ws, team, request_id, approve, feedback, only="plan_approval",
                          sender=sender)


def answer_request(ws: Workspace, team: str, request_id: str, approve: bool,
                   feedback: str | None = None, *, always: bool = False,
                   only: str | None = None, sender: str | None = None,
                   recipient: str | None = None, content: str | None = None,
                   words: Spelling = FLAGS) -> Message:
    """Approve or reject a plan or permission request (`teamctl approve`/`reject`, `teamctl
    send --type …_response`, the lead's SendMessage): compare-and-set on the record, then
    the response into the member's inbox. `always` (permissions only) also allows the exact
    call from now on. `sender` (who answers) defaults to the person: `lead`, or `user`
    beside an LLM lead; any other must be the member the request was sent to. `recipient`,
    when named, must be who asked. `content` (a plan's answer only) is the message's text
    instead of the feedback. `words` spells the fields in a refusal. Returns the response
    message."""
    config = require_team(ws, team)
    me = roster.person(config)
    sender = sender or me
    record = requests.get(ws, team, request_id)
    kind = record["kind"]
    if only is not None:
        _check_answerer(record, only, sender, recipient, me)
    if kind not in ("plan_approval", "permission"):
        raise BadInput(f"request {request_id!r} is a {kind} request; only plan and "
                       "permission requests are approved or rejected here")
    if always and kind != "permission":
        raise BadInput(f"--always applies to permission requests; {request_id!r} is a "
                       f"{kind} request")
    if not approve and not (feedback and feedback.strip()):
        raise BadInput(f"a rejection needs {words.feedback} saying "
                       + ("what to change" if kind == "plan_approval" else "why"))
    if kind == "plan_approval":
        type_ = "plan_approval_response"
        text = content or feedback or ("Plan approved." if approve else "Plan rejected.")
    else:  # the feedback travels in its own field (and reaches the model as "Feedback:")
        type_ = "permission_response"
        text = f"{'Approved' if approve else 'Refused'}: {permissions.describe(record)}"
    inbox.check_content(text)
    if feedback:
        inbox.check_content(feedback)
    # the "always" rule is checked before anything is written (a bad one: exit 2, nothing
    # changed), and added only once the answer is in the member's inbox: the response is
    # what wakes it, so no failure after the answer may leave it waiting
    rule = permissions.always_rule(record["tool"], record.get("argument") or "") \
        if always and approve else None
    record = requests.answer(ws, team, request_id, approve, feedback=feedback)
    msg = inbox.make(type_, sender, record["sender"], text,
                     request_id=request_id, approve=approve, feedback=feedback)
    inbox.deliver(ws, team, [msg])
    if rule is not None:
        permissions.add_always(ws, team, rule)
    return msg


# -- deletion ----------------------------------------------------------------------------
def mark_deleting(ws: Workspace, team: str) -> Json:
    def mark(config: Json) -> Json:
        if config.get("state") != "deleting":
            config["state"] = "deleting"
            # journalled before the roster says so: once it does, the supervisor may remove
            # the team (and its journal) the moment the roster lock is free
            events.emit(ws, team, "team_deleting")
        return config

    return roster.update(ws, team, mark)


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
            if force or member["kind"] == "lead" or member["name"] in (LEAD, sender):
                member["desired"] = "stopped"
            elif member["desired"] == "running" and member["status"] != "stopping":
                record, msg = _open_shutdown(ws, team, member["name"],
                                             f"team {team} is being deleted", sender)
                inbox.deliver(ws, team, [msg])
                opened.append(record)
    return opened


def team_gone(ws: Workspace, team: str) -> bool:
    return not ws.config(team).is_file()


def finish_delete(ws: Workspace, team: str) -> bool:
    """True once the team's folders are gone. With no live member and no supervisor to do
    it, removes them here; a supervisor (or another teamctl) removing them meanwhile is
    fine: the team is gone either way."""
    try:
        config = roster.load(ws, team)
    except (BadInput, TeamdError, OSError):
        return team_gone(ws, team)
    if live_members(config) or pidfile.running(ws) is not None:
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
    """Remove the team's folders; keep its journal (rotated files too), sessions,
    transcripts, logs, roster and board in `.teams/.archive/{team}-{ts}/` unless the
    deletion asked for `purge`. Returns the archive, or None (purged, or already removed
    by someone else). Worktrees are released first, with no lock held (git runs): clean
    and merged ones removed, any other kept, and said so in the journal that is archived.

    Under the roster lock (then the journal's): `team_deleted` is appended as the
    journal's last line and the team folder renamed away in one step, so nobody sees half a
    team and nothing is journalled after it. Two removers racing: one wins, the other finds
    the team gone and returns None."""
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
            now = time.time()
            stamp = _stamp(now)
            purge = bool(config.get("purge"))
            if purge:
                target = ws.teams_dir / f".deleted-{team}-{stamp}-{os.getpid()}"
            else:
                target = files.ensure_dir(ws.archive_dir) / f"{team}-{stamp}"
            with files.lock(ws.events(team)):
                files.append_jsonl(ws.events(team), [{"ts": now, "event": "team_deleted"}],
                                   locked=True)
                os.replace(ws.team_dir(team), target)
    except (BadInput, FileNotFoundError):
        if team_gone(ws, team):
            return None  # someone else removed it first
        raise
    except TeamdError:
        if team_gone(ws, team):
            return None  # its folder went while we took the lock
        raise
    if ws.tasks_dir(team).is_dir():
        board_dir = target / "tasks" if not purge else target.with_name(target.name + "-tasks")
        try:
            os.replace(ws.tasks_dir(team), board_dir)
        except FileNotFoundError:
            pass
        if purge:
            shutil.rmtree(board_dir, ignore_errors=True)
    if purge:
        shutil.rmtree(target, ignore_errors=True)
        return None
    _prune_archive(target)
    return target


#: what an archive keeps of a team folder; inboxes, requests and locks are dropped
ARCHIVED = ("config.json", "members", "sessions", "transcripts", "logs", "tasks", "removed")


def _prune_archive(folder: Path) -> None:
    for path in folder.iterdir():
        keep = path.name in ARCHIVED or (path.name.startswith("events")
                                         and path.name.endswith(".jsonl"))
        if keep:
            if path.is_dir():  # the members' status files stay, not their locks
                for lock in path.glob("*.lock"):
                    lock.unlink(missing_ok=True)
            continue
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
