"""teamctl: the control CLI. A thin typer layer over the `teamd` library.

It acts only by writing the workspace's files (CONTRACT.md section 9); `teamd run` and the
teammates react. It must start fast, so it never imports `anthropic` (nor anything that
does): the supervisor and the agent live behind `teamd run`.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Annotated, Any

import typer

from teamctl import output
from teamd import actions, board, events, files, inbox, pidfile, requests, roster, settings
from teamd.errors import BadInput, TeamdError
from teamd.files import Json
from teamd.layout import LEAD, ROOT_ENV, USER, Workspace

app = typer.Typer(
    name="teamctl",
    help="Control a team of Claude agents supervised by `teamd run`.\n\n"
    "Every command acts by writing files under the workspace root (.teams/ and .tasks/); "
    "the supervisor and the teammates react. Exit codes: 0 ok, 2 bad input or unknown "
    "team/member/task/request, 1 anything else.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
task_app = typer.Typer(help="The shared task board.", no_args_is_help=True,
                       rich_markup_mode=None)
app.add_typer(task_app, name="task")

_state: dict[str, Workspace] = {}

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts and jq.")]
TeamArg = Annotated[str, typer.Argument(help="Team name.", show_default=False)]
NameArg = Annotated[str, typer.Argument(help="Member name.", show_default=False)]


def ws() -> Workspace:
    return _state.get("ws") or Workspace.at()


@app.callback()
def main_options(
    root: Annotated[str | None, typer.Option(
        "--root", metavar="DIR",
        help="Workspace root (default: $TEAMD_ROOT, else the current directory).")] = None,
) -> None:
    _state["ws"] = Workspace.at(root)


# -- setup -------------------------------------------------------------------------------
@app.command()
def init(force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")
                                              ] = False,
         ) -> None:
    """Write teamd.toml with every setting at its default."""
    path = settings.write_defaults(ws(), force=force)
    print(f"wrote {path}")


@app.command()
def create(team: TeamArg,
           description: Annotated[str, typer.Option(help="What the team is for.")] = "",
           as_json: JsonOpt = False) -> None:
    """Create a team: its roster, inbox folder and task board."""
    config = actions.create_team(ws(), team, description)
    if as_json:
        output.emit_json(config)
    else:
        print(f"created team {team} in {ws().team_dir(team)}")


@app.command()
def spawn(
    team: TeamArg, name: NameArg,
    prompt: Annotated[str, typer.Option(help="The member's instructions.", show_default=False)],
    role: Annotated[str, typer.Option(help="A short role, e.g. 'backend engineer'.")] = "",
    model: Annotated[str | None, typer.Option(help="Model (default: teamd.toml's).")] = None,
    plan_mode: Annotated[bool, typer.Option(
        "--plan-mode", help="Read-only until the lead approves a plan.")] = False,
    cwd: Annotated[str | None, typer.Option(
        help="Working directory its tools are confined to (default: the root).")] = None,
    lead: Annotated[bool, typer.Option("--lead", help="An LLM lead (NAME must be lead).")
                    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Add a member with desired=running; the supervisor forks its process."""
    member = actions.spawn(ws(), team, name, prompt, role=role, model=model,
                           plan_mode=plan_mode, cwd=cwd, lead=lead)
    if as_json:
        output.emit_json(member)
        return
    print(f"spawned {member['agent_id']} (status {member['status']})")
    if pidfile.running(ws()) is None:
        print("note: no supervisor is running for this root; start one with `teamd run`",
              file=sys.stderr)


# -- messages ----------------------------------------------------------------------------
def _read_content(content: str) -> str:
    if content != "-":
        return content
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput("content on standard input is not valid UTF-8") from None


@app.command()
def send(
    team: TeamArg, name: Annotated[str, typer.Argument(help="Recipient.", show_default=False)],
    content: Annotated[str, typer.Argument(help="Text, or - to read standard input.",
                                           show_default=False)],
    type_: Annotated[str, typer.Option("--type", help="message, broadcast, shutdown_request, "
                                       "shutdown_response, plan_approval_response, …")
                     ] = "message",
    request_id: Annotated[str | None, typer.Option(help="For a *_response.")] = None,
    approve: Annotated[bool | None, typer.Option("--approve/--reject",
                                                 help="For a *_response.")] = None,
    sender: Annotated[str | None, typer.Option(
        help="Who sends it (default: the person: lead, or user beside an LLM lead).",
        show_default=False)] = None,
    reason: Annotated[str | None, typer.Option(help="For shutdown messages.")] = None,
    feedback: Annotated[str | None, typer.Option(help="For plan responses.")] = None,
    summary: Annotated[str | None, typer.Option(help="One line for listings.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Append a message to a member's inbox (or the lead's).

    In a team with an LLM lead you are `user`: `teamctl send TEAM lead "focus on the login
    page"` reaches the lead's model as a message from user, and its answers land in your
    inbox (`teamctl inbox TEAM`)."""
    msg = actions.send(ws(), team, name, _read_content(content), type_=type_, sender=sender,
                       request_id=request_id, approve=approve, reason=reason,
                       feedback=feedback, summary=summary)
    if as_json:
        output.emit_json(msg)
    else:
        print(f"sent {msg['type']} {msg['id']} to {msg['recipient']}")


@app.command()
def broadcast(team: TeamArg,
              content: Annotated[str, typer.Argument(help="Text, or - for standard input.",
                                                     show_default=False)],
              sender: Annotated[str | None, typer.Option(
                  help="Who sends it (default: the person: lead, or user beside an LLM "
                  "lead).", show_default=False)] = None,
              as_json: JsonOpt = False) -> None:
    """Send one message to every running member and the lead, except the sender."""
    copies = actions.broadcast(ws(), team, _read_content(content), sender=sender)
    if as_json:
        output.emit_json(copies)
    else:
        names = ", ".join(c["recipient"] for c in copies)
        print(f"broadcast {copies[0]['id']} to {names}")


def _print_messages(msgs: list[Json], as_json: bool) -> None:
    if as_json:
        for m in msgs:
            print(files.dumps_line(m).decode(), end="")
        return
    for m in msgs:
        kind = "" if m["type"] == "message" else f" [{m['type']}]"
        extra = f" (request {m['request_id']})" if m.get("request_id") else ""
        print(f"{output.when(m.get('timestamp'))} {m['sender']} → {m['recipient']}{kind}{extra}:"
              f" {m['content']}")


def _show_now(msgs: list[Json], as_json: bool) -> None:
    _print_messages(msgs, as_json)
    sys.stdout.flush()


@app.command("inbox")
def inbox_cmd(
    team: TeamArg,
    name: Annotated[str | None, typer.Argument(
        help="Whose inbox (default: the person's: lead's, or user's beside an LLM lead).",
        show_default=False)] = None,
    peek: Annotated[bool, typer.Option("--peek", help="Show without taking.")] = False,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep showing new ones.")
                      ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON message per line.")
                       ] = False,
) -> None:
    """Show an inbox. The person's is drained (printed, then cleared; history stays in
    events.jsonl): lead_inbox.jsonl, or user_inbox.jsonl in a team with an LLM lead. Any
    other inbox (a teammate's, an LLM lead's) is only peeked at."""
    w = ws()
    config = actions.require_team(w, team)
    me = roster.person(config)
    name = name or me
    if name == USER and me != USER:
        raise BadInput(f"unknown member {USER!r} in team {team!r}: 'user' is the person "
                       "beside an LLM lead, and this team has none")
    if name not in (LEAD, USER):
        roster.get(config, name)
    drain = name == me and not peek
    if not drain and not peek:
        why = "an LLM lead reads it" if name == LEAD else "it belongs to a teammate"
        print(f"note: only peeking: {why}", file=sys.stderr)
    from teamd.watch import Watcher

    seen: set[str] = set()
    with Watcher([w.team_dir(team)]) as watcher:
        while True:
            if drain:
                # print, then clear: a message leaves the inbox only once it is shown
                msgs = inbox.drain(w, team, name, lambda batch: _show_now(batch, as_json))
            else:
                msgs = [m for m in inbox.peek(w, team, name) if m["id"] not in seen]
                seen.update(m["id"] for m in msgs)
                _show_now(msgs, as_json)
            if not follow:
                if not msgs and not as_json:
                    print(f"{name}'s inbox is empty", file=sys.stderr)
                return
            watcher.wait(None)


# -- protocols ---------------------------------------------------------------------------
def _wait(w: Workspace, team: str, timeout: float, done: Any) -> Any:
    """Wait until `done()` is truthy: woken by inotify on the team's files, re-checked
    at least twice a second since a process exit touches no file."""
    from teamd.watch import wait_for

    return wait_for([w.team_dir(team), w.requests_dir(team)], done, timeout)


@app.command()
def shutdown(
    team: TeamArg, name: NameArg,
    reason: Annotated[str, typer.Option(help="Why; the member sees it.")] = "",
    wait: Annotated[bool, typer.Option("--wait", help="Wait for the answer and the exit.")
                    ] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait with --wait.")] = 60.0,
) -> None:
    """Ask a member to shut down (the handshake). A member with no process is answered for
    at once. With --wait: exit 0 when approved and gone, 1 when rejected or timed out."""
    w = ws()
    result = actions.shutdown(w, team, name, reason=reason)
    rid = result["request"]["request_id"]
    if result["answered"]:
        print(f"{name} was not running: shut down (request {rid})")
        return
    print(f"asked {name} to shut down (request {rid})")
    if not wait:
        return
    def settled() -> Json | None:
        record = requests.get(w, team, rid)
        if record["status"] == "rejected":
            return record
        if record["status"] == "approved":
            member = roster.get(roster.load(w, team), name)
            return None if roster.is_live(member) else record
        return None

    record = _wait(w, team, timeout, settled)
    if record is None:
        raise TeamdError(f"timed out after {timeout:g}s waiting for {name} to shut down")
    if record["status"] == "rejected":
        raise TeamdError(f"{name} rejected the shutdown: {record.get('reason') or 'no reason'}")
    print(f"{name} shut down")


@app.command()
def stop(team: TeamArg, name: NameArg,
         force: Annotated[bool, typer.Option("--force", help="Required: skip the handshake.")
                          ] = False,
         timeout: Annotated[float | None, typer.Option(
             help="Seconds to wait (default: stop_timeout + 5).")] = None) -> None:
    """Stop a member for good without asking it: desired=stopped, then SIGTERM and, after
    stop_timeout, SIGKILL (sent by the supervisor). Waits until it is gone."""
    if not force:
        raise BadInput("stop needs --force (to ask the member nicely, use `teamctl shutdown`)")
    w = ws()
    member = actions.stop(w, team, name)
    if member["status"] == "shutdown":
        print(f"{name} stopped")
        return
    wait_for = timeout if timeout is not None else settings.load(w).stop_timeout + 5
    gone = _wait(w, team, wait_for,
                 lambda: not roster.is_live(roster.get(roster.load(w, team), name)))
    if not gone:
        raise TeamdError(f"{name} is still running after {wait_for:g}s")
    print(f"{name} stopped")


@app.command()
def restart(team: TeamArg, name: NameArg) -> None:
    """Stop the member if running, clear failed/backoff, and start it again."""
    actions.restart(ws(), team, name)
    print(f"restart of {name} requested")
    if pidfile.running(ws()) is None:
        print("note: no supervisor is running; it will start with `teamd run`", file=sys.stderr)


@app.command()
def approve(team: TeamArg,
            request_id: Annotated[str, typer.Argument(help="The plan request id.")],
            feedback: Annotated[str | None, typer.Option(help="Notes for the member.")] = None,
            ) -> None:
    """Approve a member's plan: its write tools open."""
    actions.answer_plan(ws(), team, request_id, True, feedback)
    print(f"approved {request_id}")


@app.command()
def reject(team: TeamArg,
           request_id: Annotated[str, typer.Argument(help="The plan request id.")],
           feedback: Annotated[str, typer.Option(help="What to change (required).",
                                                 show_default=False)] = "",
           ) -> None:
    """Reject a member's plan with feedback; it revises and submits again."""
    actions.answer_plan(ws(), team, request_id, False, feedback)
    print(f"rejected {request_id}")


@app.command("requests")
def requests_cmd(team: TeamArg,
                 pending: Annotated[bool, typer.Option("--pending", help="Only unanswered.")
                                    ] = False,
                 as_json: JsonOpt = False) -> None:
    """List shutdown and plan-approval requests."""
    actions.require_team(ws(), team)
    records = requests.list_requests(ws(), team, pending_only=pending)
    if as_json:
        output.emit_json(records)
        return
    rows = [(r["request_id"], r["kind"], r["sender"], r["recipient"], r["status"],
             output.ago(r["created_at"]),
             output.short(r.get("plan") or r.get("feedback") or r.get("reason") or "", 50))
            for r in records]
    print(output.table(["REQUEST", "KIND", "FROM", "TO", "STATUS", "OPENED", "DETAIL"], rows)
          if rows else "no requests")


# -- tasks -------------------------------------------------------------------------------
def _ids(text: str | None) -> list[int]:
    if not text:
        return []
    try:
        return [int(p) for p in text.replace(" ", "").split(",") if p]
    except ValueError:
        raise BadInput(f"--blocked-by takes task ids like 1,2 (got {text!r})") from None


@task_app.command("add")
def task_add(team: TeamArg,
             subject: Annotated[str, typer.Argument(help="One line.", show_default=False)],
             description: Annotated[str, typer.Option(help="Details.")] = "",
             blocked_by: Annotated[str | None, typer.Option(
                 help="Ids this task waits on, e.g. 1,2.")] = None,
             as_json: JsonOpt = False) -> None:
    """Add a task to the board."""
    actions.require_team(ws(), team, accepting=True)
    inbox.check_content(subject)
    inbox.check_content(description)
    task = board.create(ws(), team, subject, description, _ids(blocked_by))
    if as_json:
        output.emit_json(task)
    else:
        print(f"created task #{task['id']}: {task['subject']}")


@task_app.command("list")
def task_list(team: TeamArg, as_json: JsonOpt = False) -> None:
    """List the board."""
    tasks = board.list_tasks(ws(), team)
    if as_json:
        output.emit_json(tasks)
        return
    rows = [(f"#{t['id']}", t["status"], t["owner"] or "-",
             ",".join(map(str, t["blocked_by"])) or "-", output.short(t["subject"], 60))
            for t in tasks]
    print(output.table(["ID", "STATUS", "OWNER", "BLOCKED BY", "SUBJECT"], rows)
          if rows else "no tasks")


@task_app.command("show")
def task_show(team: TeamArg, task_id: Annotated[int, typer.Argument(help="Task id.")],
              as_json: JsonOpt = False) -> None:
    """Show one task."""
    task = board.get(ws(), team, task_id)
    if as_json:
        output.emit_json(task)
        return
    for key in ("id", "subject", "status", "owner", "blocked_by", "blocks", "created_by"):
        print(f"{key + ':':12} {task[key]}")
    for key in ("created_at", "claimed_at", "completed_at"):
        print(f"{key + ':':12} {output.when(task[key])}")
    if task["description"]:
        print(f"\n{task['description']}")


@task_app.command("update")
def task_update(
    team: TeamArg, task_id: Annotated[int, typer.Argument(help="Task id.")],
    status: Annotated[str | None, typer.Option(help="pending, in_progress or completed.")
                      ] = None,
    owner: Annotated[str | None, typer.Option(help="A member name; '' clears it.")] = None,
    blocked_by: Annotated[str | None, typer.Option(help="Add ids this task waits on.")
                          ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Change a task's status, owner or dependencies."""
    config = actions.require_team(ws(), team)
    new_owner: Any = board.UNSET
    if owner is not None:
        new_owner = owner or None
        if new_owner is not None:
            roster.get(config, new_owner)
    task = board.update(ws(), team, task_id, status=status, owner=new_owner,
                        add_blocked_by=_ids(blocked_by))
    if as_json:
        output.emit_json(task)
    else:
        print(f"task #{task_id}: {task['status']}, owner {task['owner'] or '-'}")


# -- looking -----------------------------------------------------------------------------
def _status_doc(w: Workspace, teams: list[str]) -> Json:
    from teamctl.observe import status_doc

    rows = []
    for team in teams:
        config = actions.require_team(w, team)
        tasks = board.list_tasks(w, team)
        rows.append((config, {s: sum(t["status"] == s for t in tasks)
                              for s in board.STATUSES}))
    return status_doc(str(w.root), pidfile.running(w), rows)


def _render_status(doc: Json) -> str:
    sup = doc["supervisor"]
    lines = [f"supervisor: pid {sup['pid']}, up since {output.when(sup['started_at'])}, "
             f"CPU {sup['cpu_percent'] or 0:.1f}%, memory {output.human_bytes(sup['rss'])}"
             if sup else f"supervisor: none running for {doc['root']} (start one with "
             "`teamd run`); statuses below may be stale"]
    for t in doc["teams"]:
        c = t["tasks"]
        lines.append("")
        lines.append(f"team {t['name']} ({t['state']}) tasks: {c['pending']} pending, "
                     f"{c['in_progress']} in progress, {c['completed']} completed")
        rows = []
        for m in t["members"]:
            u = m["usage"]
            status = m["status"] if m["live"] or m["status"] not in roster.RUNNING_STATUSES else \
                f"{m['status']}?"
            rows.append((output.paint(m["name"], m.get("color")), m["kind"], status,
                         m["pid"] if m["live"] else "-",
                         f"#{m['current_task']}" if m.get("current_task") else "-",
                         f"{m['cpu_percent']:.1f}" if m.get("cpu_percent") is not None else "-",
                         output.human_bytes(m.get("rss")),
                         f"{u['input_tokens'] + u.get('cache_read_input_tokens', 0)}"
                         f"/{u['output_tokens']}",
                         m.get("restarts", 0), output.short(m.get("last_error") or "", 40)))
        if rows:
            lines.append(output.table(["NAME", "KIND", "STATUS", "PID", "TASK", "CPU%", "MEM",
                                       "TOKENS IN/OUT", "RESTARTS", "LAST ERROR"], rows))
        else:
            lines.append("  no members")
    if not doc["teams"]:
        lines.append("no teams (create one with `teamctl create TEAM`)")
    return "\n".join(lines)


@app.command()
def status(team: Annotated[str | None, typer.Argument(help="One team (default: all).")
                           ] = None,
           watch: Annotated[bool, typer.Option("--watch", "-w", help="Refresh every second.")
                            ] = False,
           as_json: JsonOpt = False) -> None:
    """The roster with pid, status, task, CPU, memory and tokens; and the supervisor.

    A status ending in '?' claims a process that is not running (stale)."""
    w = ws()
    teams = [team] if team else w.team_names()
    if not watch:
        doc = _status_doc(w, teams)
        if as_json:
            output.emit_json(doc)
        else:
            print(_render_status(doc))
        return
    from rich.live import Live
    from rich.text import Text

    with Live(Text(_render_status(_status_doc(w, teams))), auto_refresh=False) as live:
        try:
            while True:
                time.sleep(1.0)
                live.update(Text(_render_status(_status_doc(w, [team] if team else
                                                            w.team_names()))), refresh=True)
        except KeyboardInterrupt:
            pass


@app.command()
def logs(team: TeamArg,
         name: Annotated[str | None, typer.Argument(help="Only events about this member.")
                         ] = None,
         follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing.")] = False,
         as_json: Annotated[bool, typer.Option("--json", help="One JSON event per line.")
                            ] = False) -> None:
    """The team's event journal (events.jsonl), oldest first. A process's own stderr is
    in .teams/TEAM/logs/NAME.log."""
    w = ws()
    config = actions.require_team(w, team)
    if name is not None and name != LEAD:
        roster.get(config, name)

    def show(rec: Json) -> None:
        if as_json:
            print(files.dumps_line(rec).decode(), end="")
        else:
            who = rec.get("member") or "-"
            print(f"{output.when(rec.get('ts'))} {who:12} {output.describe_event(rec)}")

    if not follow:
        for rec in events.read(w, team, name):
            show(rec)
        return
    try:
        # one reader from the journal's start on: no event slips between history and new
        for rec in events.follow(w, team, name, from_start=True):
            show(rec)
            sys.stdout.flush()
    except KeyboardInterrupt:
        pass


@app.command()
def delete(team: TeamArg,
           force: Annotated[bool, typer.Option("--force", help="No handshake: stop everyone.")
                            ] = False,
           timeout: Annotated[float, typer.Option(help="Seconds to wait for members.")
                              ] = 120.0) -> None:
    """Shut every member down (handshake, or --force), then remove the team's folders."""
    w = ws()
    actions.require_team(w, team)
    config = actions.mark_deleting(w, team)
    for member in actions.live_members(config):
        if force or member["name"] == LEAD:
            # an LLM lead takes no shutdown request: it is stopped by the supervisor
            actions.stop(w, team, member["name"])
        elif member["desired"] == "running" and member["status"] != "stopping":
            actions.shutdown(w, team, member["name"], reason=f"team {team} is being deleted")
    def finished() -> bool:
        if not w.config(team).exists():
            return True  # the supervisor removed it
        if actions.live_members(roster.load(w, team)):
            return False
        if pidfile.running(w) is None:
            actions.remove_team(w, team)
            return True
        return False

    if not _wait(w, team, timeout, finished):
        raise TeamdError(f"team {team} still has live members after {timeout:g}s "
                         "(try --force)")
    print(f"deleted team {team}")


@app.command()
def demo(ctx: typer.Context,
         lead: Annotated[bool, typer.Option(
             "--lead", help="The seeds' story with an LLM lead: it plans the board, spawns "
             "the team, reviews a plan and shuts the team down; you are `user`.")] = False,
         root: Annotated[str | None, typer.Option(
             "--root", metavar="DIR", hidden=True,
             help="The same as the global --root.")] = None,
         timeout: Annotated[float, typer.Option(help="Seconds to let the team work.")
                            ] = 600.0) -> None:
    """A whole team at work: the REST → GraphQL migration of the design notes, four chained
    tasks worked by analyst, backend and frontend under a real supervisor, live, then shut
    down. Uses Claude with ANTHROPIC_API_KEY; offline, the built-in scripted model.

    The workspace is the global --root or $TEAMD_ROOT, else a new ./teamd-demo folder.
    Example: teamctl --root /tmp/demo demo --lead"""
    from pathlib import Path

    from teamctl import demo as demo_mod

    chosen = root or ctx.find_root().params.get("root") or os.environ.get(ROOT_ENV) or None
    demo_mod.run(Path(chosen).expanduser().absolute() if chosen else None, timeout, lead)


def main() -> None:
    """Console entry point: one clear line on stderr and the contract's exit code."""
    try:
        app(standalone_mode=False)
    except TeamdError as exc:
        print(f"teamctl: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        # `teamctl … | head` closed the pipe: not an error worth a traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    except SystemExit:
        raise
    except Exception as exc:  # click's usage errors carry their own exit code
        import click

        if isinstance(exc, click.exceptions.NoArgsIsHelpError):
            exc.show()  # bare `teamctl` or `teamctl task`: the help, not an error line
            sys.exit(exc.exit_code)
        if isinstance(exc, click.exceptions.ClickException):
            # one line, like every other error (click's own show() prints three)
            hint = ""
            ctx = getattr(exc, "ctx", None)
            if ctx is not None:
                hint = f" (see `{ctx.command_path} --help`)"
            # typer already folds click's "Did you mean" into a NoSuchCommand's message
            text = exc.message if isinstance(exc, click.exceptions.NoSuchCommand) else \
                exc.format_message()
            message = " ".join(text.split())
            print(f"teamctl: error: {message}{hint}", file=sys.stderr)
            sys.exit(exc.exit_code)
        if isinstance(exc, click.exceptions.Abort):
            sys.exit(130)
        raise


if __name__ == "__main__":
    main()
