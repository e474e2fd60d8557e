"""Members: spawning one, the shutdown handshake (or a stop instead of it), stop,
restart, `up`/`down` for the whole team, and taking a member out of the roster for good
(CONTRACT §4, §6)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from teamd import (
    board,
    budget,
    events,
    inbox,
    once,
    pidfile,
    placement,
    policy,
    requests,
    roster,
    runtimes,
    settings,
    workdirs,
    worktrees,
)
from teamd.actions import on_behalf
from teamd.actions.answers import check_answerer
from teamd.actions.teams import require_team
from teamd.errors import BadInput, TeamdError
from teamd.files import Json
from teamd.layout import LEAD, Workspace, validate_member_name
from teamd.names import stamp
from teamd.records import Member, Message, Request, Worktree
from teamd.states import Desired, Status, Writer, transition


def _already_in(team: str, name: str, existing: Mapping[str, Any]) -> BadInput:
    return BadInput(f"{name!r} is already in team {team!r} (status {existing['status']}); "
                    f"use `teamctl restart {team} {name}`")


def spawn(ws: Workspace, team: str, name: str, prompt: str, *, role: str = "",
          model: str | None = None, plan_mode: bool = False, cwd: str | None = None,
          lead: bool = False, worktree: bool | None = None, base: str | None = None,
          budget_usd: float | None = None, effort: str = "",
          runtime: str | None = None, host: str | None = None) -> Member:
    """Add a member with `desired=running`; the supervisor forks it. With a worktree
    (`worktree`, default: the team's `worktrees` for a teammate) it works in its own git
    worktree, made first and taken back if it cannot be added (§13). `budget_usd` caps its
    spend (§12); `effort` is its `output_config.effort` ("": the setting's, §6); `runtime`
    its agent (None: the team's, else the setting's; `teamd.runtimes`, §14). `host` pins
    it to a host of a PostgreSQL store (§15); a worktree or claude-code member is pinned
    to this machine's host whatever it says: its state is local."""
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
    conf = settings.load_or_keep(ws, settings.Settings())
    runtime = runtimes.choose(runtime, config.get("runtime"), conf)
    runtimes.check_spawn(runtime, conf)
    use_worktree = worktree if worktree is not None else bool(config.get("worktrees")) and not lead
    if lead and use_worktree:
        raise BadInput("the lead works in the repository itself: --worktree is for teammates")
    if base is not None and not use_worktree:
        raise BadInput("--base applies only to a member with a worktree (--worktree)")
    existing = roster.find(config, name)
    if existing is not None:
        raise _already_in(team, name, existing)
    pin = placement.pin_for(ws, host, local_state=use_worktree or runtime != runtimes.TEAMD)
    workdir = workdirs.for_spawn(ws, cwd, Path(config["repo"]) if lead and config.get(
        "repo") else ws.root, pin)
    record: Json | None = None
    if use_worktree:
        # git runs before the roster lock is taken (no git command under a lock), and
        # before the first write of the Task tool's step (`Store.apart`)
        with ws.store.apart():
            record = worktrees.add(ws, team, name,
                                   worktrees.repo_for_spawn(ws, config, workdir), base)
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
        member["runtime"] = runtime
        if pin is not None:
            member["pinned_host"] = pin
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
    if shut_down(member):
        raise on_behalf.already_shut_down(ws, team, name)
    with roster.held(ws, team) as config:
        member = roster.get(config, name)
        if shut_down(member):
            # re-checked under the lock: a racing shutdown may have answered it meanwhile
            raise BadInput(f"{name!r} is already shut down")
        if roster.is_live(member):
            # a request a crashed `shutdown` left (delivered or not) is the one asked again
            record = on_behalf.pending(ws, team, name) or open_shutdown(
                ws, team, name, reason, sender)[0]
            msg = on_behalf.asked(record)
            once.deliver(ws, team, [msg])
            return {"request": record, "message": msg, "answered": False}
        # No process to ask: answer on its behalf, under the roster lock (CONTRACT §6): the
        # roster first, then the record (a pending one answered, or one written answered:
        # never left `pending`), then its journal lines; a re-run finishes what a crash left
        member["desired"] = Desired.STOPPED
        transition(member, Status.SHUTDOWN, Writer.CONTROL)
        roster.save(ws, team, config)
        record = on_behalf.settle(ws, team, name) or open_shutdown(
            ws, team, name, reason, sender, answered=on_behalf.NOT_RUNNING)[0]
        msg = on_behalf.asked(record)
        on_behalf.journal(ws, team, record)
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


def shut_down(member: Mapping[str, Any]) -> bool:
    """Already shut down: not to run, and exited (a shutdown asked now is refused)."""
    return bool(member["desired"] == "stopped" and member["status"] == "shutdown")


def stops_without_handshake(member: Mapping[str, Any], force: bool,
                            sender: str | None = None) -> bool:
    """Whether a member that must go is stopped (desired=stopped) rather than asked: with
    `force`, and always for a lead (it answers no shutdown request) or the one asking."""
    return force or member["kind"] == "lead" or member["name"] in (LEAD, sender)


def open_shutdown(ws: Workspace, team: str, name: str, reason: str, sender: str,
                  answered: str | None = None) -> tuple[Request, Message]:
    """The request record and its `shutdown_request` message (not yet delivered);
    `answered`: the record is written approved, with that reason (`open_request`)."""
    record = requests.open_request(ws, team, "shutdown", sender, name, reason=reason,
                                   answered=answered)
    return record, on_behalf.asked(record)


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
    check_answerer(record, "shutdown", name, None, name)
    msg = inbox.make("shutdown_response", name, record["sender"],
                     content or f"{name} is shutting down", id=once.answer_id(request_id),
                     request_id=request_id, approve=True, reason=reason, summary=summary)
    # lock order: roster → member status → request → inbox → events
    with roster.held(ws, team) as config, roster.status_lock(ws, team, name):
        member = roster.find(config, name)

        def stop_first(_: Json) -> None:
            if member is None or (pid is not None and member.get("pid") != pid):
                return
            wanted = member["desired"] != "stopped"
            member["desired"] = Desired.STOPPED
            if transition(member, Status.STOPPING, Writer.MEMBER) is not None or wanted:
                roster.save(ws, team, config)  # and journals the move

        requests.answer(ws, team, request_id, True, reason=reason, expect_kind="shutdown",
                        before_write=stop_first)
        inbox.deliver(ws, team, [msg])
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
        if not roster.is_live(member) and not pidfile.supervised(ws):
            transition(member, Status.SHUTDOWN, Writer.CONTROL)
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
        _request_start(ws, team, member, pidfile.supervised(ws))
        return dict(member)


def _request_start(ws: Workspace, team: str, member: Member | Json, supervised: bool
                   ) -> None:
    """desired=running and a restart request (under the caller's roster lock)."""
    member["desired"] = "running"
    member["restart_requested_at"] = time.time()
    # with a supervisor running the status is its to write (it forks the member now)
    if not roster.is_live(member) and not supervised \
            and member["status"] in (*policy.GONE, "backoff"):
        transition(member, Status.PENDING, Writer.CONTROL)


def restart_all(ws: Workspace, team: str, *, only_stopped: bool = False) -> list[str]:
    """`restart TEAM` (every member) or `up TEAM` (`only_stopped`: every member that is
    not to run — desired=stopped — or that failed). One roster update. Returns the names."""
    require_team(ws, team, accepting=True)
    supervised = pidfile.supervised(ws)
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
        if shut_down(m):
            continue
        if stops_without_handshake(m, force, sender):
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
    with `worktree_report` (from `worktrees.release`) when it had a worktree.

    The roster's write comes last, its `member_removed` line under the same lock: a run
    killed before it is done again whole by the next `remove`, one killed after it has
    its line journaled by the next (`journal_gaps.mend_removal`)."""
    validate_member_name(name)
    _not_live(roster.get(require_team(ws, team), name), team)
    board.release(ws, team, name)
    _shut_down_on_its_behalf(ws, team, name)
    _close_requests_of(ws, team, name)
    _set_aside(ws, team, name)
    report = worktrees.release(ws, team, name)  # no lock held: git runs
    with roster.held(ws, team) as config:
        member = roster.get(config, name)
        _not_live(member, team)  # started again meanwhile
        config["members"] = [m for m in config["members"] if m["name"] != name]
        roster.save(ws, team, config)  # config.json, then the status file removed
        events.emit(ws, team, "member_removed", member=name, kind=member["kind"],
                    role=member.get("role", ""))
    return {**member, "worktree_report": report} if report else cast(Json, member)


def _not_live(member: Member, team: str) -> None:
    if roster.is_live(member):
        name = member["name"]
        raise TeamdError(f"{name} is still running; shut it down first "
                         f"(`teamctl remove {team} {name}` does, or add --force)")


def _shut_down_on_its_behalf(ws: Workspace, team: str, name: str) -> None:
    """A shutdown asked of it that it died before answering (`remove`'s own, say) is
    answered on its behalf, with its message, not rejected; one answered so by a removal
    killed before its lines has them journaled now, once."""
    on_behalf.settle(ws, team, name)
    for record in requests.list_requests(ws, team):
        if record["kind"] == "shutdown" and record["recipient"] == name \
                and record.get("answer_reason") == on_behalf.NOT_RUNNING:
            once.answered(ws, team, record)
            on_behalf.journal(ws, team, record, opened=True)


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
    kept = ws.store.keep_removed(team, name, stamp(time.time()))
    return None if kept is None else Path(kept)
