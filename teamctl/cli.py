"""teamctl: the control CLI. A thin typer layer over the `teamd` library.

It acts only by writing the workspace's files (CONTRACT.md section 9); `teamd run` and the
teammates react. It must start fast, so it never imports `anthropic` (nor anything that
does): the supervisor and the agent live behind `teamd run`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import click
import typer

from teamctl import output
from teamd import (
    actions,
    board,
    events,
    files,
    inbox,
    pidfile,
    requests,
    roster,
    settings,
    worktrees,
)
from teamd.errors import BadInput, Interrupted, TeamdError
from teamd.files import Json
from teamd.layout import LEAD, ROOT_ENV, SUPERVISOR, Workspace, validate_member_name
from teamd.permissions import describe
from teamd.records import Request

HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}
app = typer.Typer(
    name="teamctl",
    help="Control a team of Claude agents supervised by `teamd run`.\n\n"
    "Every command acts by writing files under the workspace root (.teams/ and .tasks/); "
    "the supervisor and the teammates react. Exit codes: 0 ok, 2 bad input or unknown "
    "team/member/task/request, 1 anything else, 130 a wait interrupted by Ctrl-C.\n\n"
    "\b\nStart here:\n  teamctl init && teamctl create shop\n"
    "  teamctl spawn shop alice --prompt 'Handle the backend tasks'\n"
    "  teamd run &   # the supervisor\n  teamctl status",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings=HELP_OPTIONS,
)
task_app = typer.Typer(help="The shared task board.\n\n\b\nExample:\n"
                       "  teamctl task add shop 'Write the login page' --owner alice",
                       no_args_is_help=True, rich_markup_mode=None,
                       context_settings=HELP_OPTIONS)
app.add_typer(task_app, name="task")


# -- completion: names from the workspace's files ------------------------------------------
def _completion_ws(ctx: typer.Context) -> Workspace:
    root = ctx.find_root().params.get("root")
    return Workspace.at(root)


def _complete_team(ctx: typer.Context, incomplete: str) -> list[str]:
    try:
        return [t for t in _completion_ws(ctx).team_names() if t.startswith(incomplete)]
    except (OSError, TeamdError):
        return []


def _complete_member(ctx: typer.Context, incomplete: str) -> list[str]:
    try:
        config = roster.load(_completion_ws(ctx), str(ctx.params.get("team")))
    except (OSError, TeamdError, ValueError):
        return []
    done = set(ctx.params.get("names") or [])
    return [n for n in roster.names(config) if n.startswith(incomplete) and n not in done]


def _complete_task(ctx: typer.Context, incomplete: str) -> list[tuple[str, str]]:
    try:
        tasks = board.list_tasks(_completion_ws(ctx), str(ctx.params.get("team")))
    except (OSError, TeamdError, ValueError):
        return []
    return [(str(t["id"]), output.short(t["subject"], 40)) for t in tasks
            if str(t["id"]).startswith(incomplete)]


def _complete_request(ctx: typer.Context, incomplete: str) -> list[tuple[str, str]]:
    try:
        records = requests.list_requests(_completion_ws(ctx), str(ctx.params.get("team")),
                                         pending_only=True)
    except (OSError, TeamdError, ValueError):
        return []
    return [(r["request_id"], f"{r['kind']} from {r['sender']}") for r in records
            if r["request_id"].startswith(incomplete)]


JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts and jq.")]
TeamArg = Annotated[str, typer.Argument(help="Team name.", show_default=False,
                                        autocompletion=_complete_team)]
NameArg = Annotated[str, typer.Argument(help="Member name.", show_default=False,
                                        autocompletion=_complete_member)]
TimeoutOpt = Annotated[float, typer.Option("--timeout", metavar="S",
                                           help="Seconds to wait at most.")]
TaskIdArg = Annotated[int, typer.Argument(help="Task id.", autocompletion=_complete_task)]
RequestArg = Annotated[str, typer.Argument(help="The plan request id.",
                                           autocompletion=_complete_request)]
WAIT_DEFAULT = 120.0  # every wait's --timeout (CONTRACT §9)


def ws() -> Workspace:
    """The workspace this invocation acts on: the root callback keeps it on the click
    context (`ctx.obj`), so nothing outlives one command (tests run many in one process)."""
    ctx = click.get_current_context(silent=True)
    chosen = ctx.find_object(Workspace) if ctx is not None else None
    return chosen if chosen is not None else Workspace.at()


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        print(f"teamctl {version('teamd')}")
        raise typer.Exit()


@app.callback()
def main_options(
    ctx: typer.Context,
    root: Annotated[str | None, typer.Option(
        "--root", metavar="DIR",
        help="Workspace root (default: $TEAMD_ROOT, else the current directory).")] = None,
    version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_version, help="Print the version and exit.")
    ] = False,
) -> None:
    ctx.obj = Workspace.at(root)


# -- setup -------------------------------------------------------------------------------
@app.command()
def init(force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")
                                              ] = False,
         ) -> None:
    """Write teamd.toml with every setting at its default (exit 2 if it exists, unless
    --force).

    \b
    Example:
      teamctl init && $EDITOR teamd.toml
    """
    path = settings.write_defaults(ws(), force=force)
    print(f"wrote {path}")


BudgetOpt = Annotated[float | None, typer.Option(
    "--budget", metavar="USD", help="A spending cap in US dollars: at it, no more model calls "
    "until it is raised (`teamctl budget`).", show_default=False)]


@app.command()
def create(team: TeamArg,
           description: Annotated[str, typer.Option(help="What the team is for.")] = "",
           worktrees_on: Annotated[bool, typer.Option(
               "--worktrees", help="Give each teammate its own git worktree and branch.")
                                   ] = False,
           repo: Annotated[str | None, typer.Option(
               metavar="DIR", help="The team's git repository (default with --worktrees: "
               "the one holding the root).")] = None,
           budget_usd: BudgetOpt = None,
           as_json: JsonOpt = False) -> None:
    """Create a team: its roster, inbox folder and task board.

    \b
    Example:
      teamctl create shop --description 'the online shop' --budget 20
      teamctl create api --worktrees --repo ~/src/app
    """
    config = actions.create_team(ws(), team, description, repo=repo, worktrees_on=worktrees_on,
                                 budget_usd=budget_usd)
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
    worktree: Annotated[bool | None, typer.Option(
        "--worktree/--no-worktree", show_default=False,
        help="Work in its own git worktree on branch teamd/TEAM/NAME (default: the team's "
        "--worktrees).")] = None,
    base: Annotated[str | None, typer.Option(
        metavar="REF", help="Where its branch starts (default: the repository's HEAD).")
                    ] = None,
    budget_usd: BudgetOpt = None, as_json: JsonOpt = False,
    effort: Annotated[str, typer.Option(help="Thinking effort: low, medium, high, max.")] = "",
) -> None:
    """Add a member with desired=running; the supervisor forks its process.

    \b
    Example:
      teamctl spawn shop alice --prompt 'Handle the backend tasks' --role backend
    """
    member = actions.spawn(ws(), team, name, prompt, role=role, model=model,
                           plan_mode=plan_mode, cwd=cwd, lead=lead, worktree=worktree,
                           base=base, budget_usd=budget_usd, effort=effort)
    _warn_if_deprecated(member.get("model"))
    if as_json:
        output.emit_json(member)
        return
    print(f"spawned {member['agent_id']} (status {member['status']})")
    tree = member.get("worktree")
    if tree:
        print(f"worktree {tree['path']} on branch {tree['branch']}")
    if pidfile.running(ws()) is None:
        print("note: no supervisor is running for this root; start one with `teamd run`",
              file=sys.stderr)


def _warn_if_deprecated(model: str | None) -> None:
    """One line on stderr when the installed SDK lists the member's model (else the
    default) as deprecated or retired; read from its source: teamctl never imports it."""
    from teamd import deprecations

    if not model:
        try:
            model = settings.load(ws()).model
        except TeamdError:
            return  # the member is added; a broken teamd.toml is teamd's to report
    found = deprecations.lookup(model)
    if found is not None:
        print(f"warning: {found.warning()}", file=sys.stderr)


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
    inbox (`teamctl inbox TEAM`).

    \b
    Example:
      teamctl send shop alice 'Finish the login page first'
    """
    msg = actions.send(ws(), team, name, _read_content(content), type_=type_, sender=sender,
                       request_id=request_id, approve=approve, reason=reason,
                       feedback=feedback, summary=summary)
    if as_json:
        output.emit_json(msg)
    else:
        print(f"sent {msg['type']} {msg['id']} to {msg['recipient']}")
    _warn_if_stopped(team, msg["recipient"])


def _warn_if_stopped(team: str, name: str) -> None:
    """Delivered, but nobody reads it until the member runs again: say so (CONTRACT §9)."""
    member = roster.find(roster.load(ws(), team), name)
    if member is not None and member["status"] in ("shutdown", "failed") \
            and not roster.is_live(member):
        print(f"note: {name} is {member['status']}: the message waits in its inbox until it "
              f"is started again (`teamctl restart {team} {name}`)", file=sys.stderr)


@app.command()
def broadcast(team: TeamArg,
              content: Annotated[str, typer.Argument(help="Text, or - for standard input.",
                                                     show_default=False)],
              sender: Annotated[str | None, typer.Option(
                  help="Who sends it (default: the person: lead, or user beside an LLM "
                  "lead).", show_default=False)] = None,
              as_json: JsonOpt = False) -> None:
    """Send one message to every running member and the lead, except the sender.

    \b
    Example:
      teamctl broadcast shop 'Code freeze at 17:00'
    """
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
    other inbox (a teammate's, an LLM lead's) is only peeked at.

    \b
    Example:
      teamctl inbox shop --follow
    """
    w = ws()
    name, mine = actions.inbox_owner(actions.require_team(w, team), name)
    drain = mine and not peek
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
            try:
                watcher.wait(None)
            except KeyboardInterrupt:
                return  # Ctrl-C ends a follow: exit 0 (a wait would be 130)


# -- protocols ---------------------------------------------------------------------------
def _wait(w: Workspace, team: str, timeout: float, done: Callable[[], Any],
          pending: Callable[[], str], announce: str | None = None) -> Any:
    """Wait until `done()` is truthy (woken by inotify on the team's files, re-checked at
    least twice a second since a process exit touches no file); falsy at the deadline.
    Ctrl-C ends it with Interrupted (exit 130) and `pending()`: what is still to happen.
    `announce` is printed first, already under that Ctrl-C handling."""
    from teamd.watch import wait_for

    with _interruptible(pending):
        if announce:
            print(announce, flush=True)
        return wait_for([w.team_dir(team), w.requests_dir(team)], done, timeout)


@contextmanager
def _interruptible(pending: Callable[[], str]) -> Iterator[None]:
    """Turn Ctrl-C into one line saying what is still pending, and exit 130."""
    try:
        yield
    except KeyboardInterrupt:
        try:
            what = pending()
        except (OSError, TeamdError) as exc:
            what = f"could not tell what is pending ({exc})"
        raise Interrupted(f"interrupted: {what}") from None


def _request_state(w: Workspace, team: str, rid: str, name: str) -> str:
    """What a shutdown request is waiting for, in words."""
    record = requests.get(w, team, rid)
    if record["status"] == "pending":
        return f"{name} has not answered shutdown request {rid} yet (it stays pending)"
    if record["status"] == "approved":
        return f"{name} approved shutdown request {rid} but is still running"
    return f"{name} rejected shutdown request {rid}"


def _await_shutdown(w: Workspace, team: str, rid: str, name: str, timeout: float, *,
                    gone_is_enough: bool = False, announce: str | None = None) -> None:
    """Wait until `name` answers shutdown request `rid` and is gone (with `gone_is_enough`,
    until it is gone, answered or not); TeamdError when it rejects or `timeout` passes."""

    def settled() -> Json | None:
        record = requests.get(w, team, rid)
        if record["status"] == "rejected":
            return record
        if record["status"] == "approved" or gone_is_enough:
            return None if actions.still_up(w, team, [name]) else record
        return None

    record = _wait(w, team, timeout, settled, lambda: _request_state(w, team, rid, name),
                   announce=announce)
    if record is None:
        raise TeamdError(f"timed out after {timeout:g}s: "
                         f"{_request_state(w, team, rid, name)}")
    if record["status"] == "rejected":
        raise TeamdError(f"{name} rejected the shutdown: {record.get('reason') or 'no reason'}")


@app.command()
def shutdown(
    team: TeamArg, name: NameArg,
    reason: Annotated[str, typer.Option(help="Why; the member sees it.")] = "",
    wait: Annotated[bool, typer.Option("--wait", help="Wait for the answer and the exit.")
                    ] = False,
    timeout: TimeoutOpt = WAIT_DEFAULT,
) -> None:
    """Ask a member to shut down (the handshake). A member with no process is answered for
    at once. With --wait: exit 0 when approved and gone, 1 when rejected or timed out, 130
    on Ctrl-C (the request stays pending).

    \b
    Example:
      teamctl shutdown shop alice --reason 'done for today' --wait && teamctl delete shop
    """
    w = ws()
    result = actions.shutdown(w, team, name, reason=reason)
    rid = result["request"]["request_id"]
    if result["answered"]:
        print(f"{name} was not running: shut down (request {rid})")
        return
    asked = f"asked {name} to shut down (request {rid})"
    if not wait:
        print(asked)
        return
    _await_shutdown(w, team, rid, name, timeout, announce=asked)
    print(f"{name} shut down")


@app.command()
def stop(team: TeamArg, name: NameArg,
         force: Annotated[bool, typer.Option("--force", help="Required: skip the handshake.")
                          ] = False,
         timeout: TimeoutOpt = WAIT_DEFAULT) -> None:
    """Stop a member for good without asking it: desired=stopped, then SIGTERM and, after
    stop_timeout, SIGKILL (sent by the supervisor). Waits until it is gone.

    \b
    Example:
      teamctl stop shop alice --force
    """
    if not force:
        raise BadInput("stop needs --force (to ask the member nicely, use `teamctl shutdown`)")
    w = ws()
    member = actions.stop(w, team, name)
    if member["status"] == "shutdown":
        print(f"{name} stopped")
        return
    still = f"{name} is still running (desired=stopped: the supervisor stops it)"
    gone = _wait(w, team, timeout, lambda: not actions.still_up(w, team, [name]),
                 lambda: still, announce=f"stopping {name} (waiting for it to exit)")
    if not gone:
        raise TeamdError(f"{name} is still running after {timeout:g}s")
    print(f"{name} stopped")


@app.command()
def restart(team: TeamArg,
            name: Annotated[str | None, typer.Argument(
                help="Member name (default: every member).", show_default=False,
                autocompletion=_complete_member)] = None) -> None:
    """Stop the member (every member without NAME) if running, clear failed/backoff, and
    start it again.

    \b
    Example:
      teamctl restart shop alice
    """
    if name is None:
        names = actions.restart_all(ws(), team)
        print(f"restart of {', '.join(names) or 'nobody'} requested")
    else:
        actions.restart(ws(), team, name)
        print(f"restart of {name} requested")
    if pidfile.running(ws()) is None:
        print("note: no supervisor is running; it will start with `teamd run`", file=sys.stderr)


@app.command()
def up(team: TeamArg) -> None:
    """Start every member that is stopped (desired=stopped, shut down or failed), like
    `docker compose up`.

    \b
    Example:
      teamctl up shop
    """
    names = actions.restart_all(ws(), team, only_stopped=True)
    print(f"starting {', '.join(names)}" if names else "every member is already up")
    if names and pidfile.running(ws()) is None:
        print("note: no supervisor is running; they start with `teamd run`", file=sys.stderr)


def _statuses(w: Workspace, team: str, opened: list[Json]) -> list[Json]:
    """The requests as they are now; none once the team's folder is gone (deleted)."""
    try:
        return [requests.get(w, team, r["request_id"]) for r in opened]
    except (BadInput, OSError):
        if actions.team_gone(w, team):
            return []
        raise


def _still_pending(w: Workspace, team: str, opened: list[Json]) -> str:
    try:
        up_now = actions.still_up(w, team)
    except BadInput:
        if actions.team_gone(w, team):
            return f"team {team} is gone"
        raise
    waiting = [f"{r['recipient']} (request {r['request_id']} pending)"
               for r in _statuses(w, team, opened) if r["status"] == "pending"]
    parts = []
    if up_now:
        parts.append(f"still up: {', '.join(up_now)}")
    if waiting:
        parts.append(f"not answered: {', '.join(waiting)}")
    return "; ".join(parts) or "nothing (every member is down)"


def _rejections(w: Workspace, team: str, opened: list[Json]) -> list[str]:
    out = []
    for record in _statuses(w, team, opened):
        if record["status"] == "rejected":
            out.append(f"{record['recipient']} ({record.get('reason') or 'no reason'})")
    return out


@app.command()
def down(team: TeamArg,
         force: Annotated[bool, typer.Option("--force", help="No handshake: stop everyone.")
                          ] = False,
         wait: Annotated[bool, typer.Option("--wait", help="Wait until every member is down.")
                         ] = False,
         timeout: TimeoutOpt = WAIT_DEFAULT) -> None:
    """Shut every member down with the handshake (or --force), keeping the team, like
    `docker compose down` without the removal. `teamctl up` starts them again.

    \b
    Example:
      teamctl down shop --wait
    """
    w = ws()
    done = actions.down(w, team, force=force)
    opened = done["requests"]
    said = (f"asked {', '.join(r['recipient'] for r in opened) or 'nobody'} to shut down"
            + (f"; stopping {', '.join(done['stopped'])}" if done["stopped"] else "")
            + (f"; {', '.join(done['answered'])} shut down (not running)"
               if done["answered"] else ""))
    if not wait:
        print(said)
        return

    def settled() -> bool:
        return bool(_rejections(w, team, opened)) or not actions.still_up(w, team)

    ok = _wait(w, team, timeout, settled, lambda: _still_pending(w, team, opened),
               announce=said)
    rejected = _rejections(w, team, opened)
    if rejected:
        raise TeamdError(f"rejected the shutdown: {', '.join(rejected)}")
    if not ok:
        raise TeamdError(f"timed out after {timeout:g}s: {_still_pending(w, team, opened)}")
    print(f"team {team} is down")


@app.command()
def remove(team: TeamArg, name: NameArg,
           force: Annotated[bool, typer.Option("--force", help="No handshake: stop it.")
                            ] = False,
           timeout: TimeoutOpt = WAIT_DEFAULT) -> None:
    """Take a member out of the team for good: the shutdown handshake (or --force), then
    out of the roster; its unfinished tasks go back to pending.

    \b
    Example:
      teamctl remove shop alice
    """
    w = ws()
    member = roster.get(actions.require_team(w, team), name)
    pending = f"{name} is still running; it leaves the roster once it is down"
    if member["desired"] == "running" or actions.still_up(w, team, [name]):
        if force or member["kind"] == "lead" or name == LEAD:
            actions.stop(w, team, name)
        elif member["status"] != "stopping":
            rid = actions.shutdown(w, team, name, reason=f"removed from team {team}"
                                   )["request"]["request_id"]
            _await_shutdown(w, team, rid, name, timeout, gone_is_enough=True)
    if not _wait(w, team, timeout, lambda: not actions.still_up(w, team, [name]),
                 lambda: pending):
        raise TeamdError(f"{name} is still running after {timeout:g}s")
    gone = actions.remove_member(w, team, name)
    print(f"removed {name} from team {team}")
    report = gone.get("worktree_report")
    if report and not report["removed"] and report["reason"] != "already gone":
        print(f"kept worktree {report['path']} (branch {report['branch']}): "
              f"{report['reason']}")


@app.command()
def approve(team: TeamArg,
            request_id: RequestArg,
            feedback: Annotated[str | None, typer.Option(help="Notes for the member.")] = None,
            always: Annotated[bool, typer.Option(
                "--always", help="Permission requests: also allow this exact call from now on "
                "(added to the team's permissions.json).")] = False,
            ) -> None:
    """Approve a plan or a permission request.

    An approved plan opens the member's write tools; an approved permission request runs
    the waiting tool call, once. --always also allows that exact call from now on.

    \b
    Example:
      teamctl approve shop perm-3f2a9c01bd --always
    """
    actions.answer_request(ws(), team, request_id, True, feedback, always=always)
    print(f"approved {request_id}" + (" (always allowed from now on)" if always else ""))


@app.command()
def reject(team: TeamArg,
           request_id: RequestArg,
           feedback: Annotated[str, typer.Option(help="What to change, or why not (required).",
                                                 show_default=False)] = "",
           ) -> None:
    """Reject a plan or a permission request, with feedback.

    The member revises a rejected plan; a refused tool call is not run and the model reads
    the feedback.

    \b
    Example:
      teamctl reject shop 4f1c2a --feedback 'Add tests first'
    """
    actions.answer_request(ws(), team, request_id, False, feedback)
    print(f"rejected {request_id}")


@app.command("requests")
def requests_cmd(team: TeamArg,
                 pending: Annotated[bool, typer.Option("--pending", help="Only unanswered.")
                                    ] = False,
                 as_json: JsonOpt = False) -> None:
    """List shutdown, plan-approval and permission requests.

    A permission request shows the tool and its argument; --json has its whole input.

    \b
    Example:
      teamctl requests shop --pending
    """
    actions.require_team(ws(), team)
    records = requests.list_requests(ws(), team, pending_only=pending)
    if as_json:
        output.emit_json(records)
        return

    def detail(r: Request) -> str:
        if r["kind"] == "permission":
            said = r.get("feedback") or r.get("reason")
            return output.short(describe(r) + (f" ({said})" if said else ""), 70)
        return output.short(r.get("plan") or r.get("feedback") or r.get("reason") or "", 50)

    rows = [(r["request_id"], r["kind"], r["sender"], r["recipient"], r["status"],
             output.ago(r["created_at"]), detail(r)) for r in records]
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
             owner: Annotated[str | None, typer.Option(
                 metavar="NAME", help="Give it to this member (sent to it once unblocked).",
                 autocompletion=_complete_member)] = None,
             as_json: JsonOpt = False) -> None:
    """Add a task to the board.

    \b
    Example:
      teamctl task add shop 'Write the login page' --blocked-by 1 --owner alice
    """
    task = actions.add_task(ws(), team, subject, description, _ids(blocked_by), owner=owner)
    if as_json:
        output.emit_json(task)
    else:
        print(f"created task #{task['id']}: {task['subject']}")


@task_app.command("list")
def task_list(team: TeamArg, as_json: JsonOpt = False) -> None:
    """List the board.

    \b
    Example:
      teamctl task list shop --json | jq '.[] | select(.status != "completed")'
    """
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
def task_show(team: TeamArg, task_id: TaskIdArg,
              as_json: JsonOpt = False) -> None:
    """Show one task.

    \b
    Example:
      teamctl task show shop 3
    """
    task: Mapping[str, Any] = board.get(ws(), team, task_id)
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
    team: TeamArg, task_id: TaskIdArg,
    status: Annotated[str | None, typer.Option(help="pending, in_progress or completed.")
                      ] = None,
    owner: Annotated[str | None, typer.Option(help="A member name; '' clears it.")] = None,
    blocked_by: Annotated[str | None, typer.Option(help="Add ids this task waits on.")
                          ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Change a task's status, owner or dependencies.

    \b
    Example:
      teamctl task update shop 3 --owner bob --blocked-by 2
    """
    task = actions.update_task(ws(), team, task_id, status=status,
                               owner=board.UNSET if owner is None else owner,
                               add_blocked_by=_ids(blocked_by))
    if as_json:
        output.emit_json(task)
    else:
        print(f"task #{task_id}: {task['status']}, owner {task['owner'] or '-'}")


@app.command("budget")
def budget_cmd(team: TeamArg,
               usd: Annotated[str, typer.Argument(
                   metavar="USD", help="The cap in US dollars; 0 removes it.",
                   show_default=False)],
               member: Annotated[str | None, typer.Option(
                   "--member", metavar="NAME", help="A member's budget, not the team's.",
                   autocompletion=_complete_member)] = None,
               as_json: JsonOpt = False) -> None:
    """Set (0 removes) a team's or a member's spending cap in US dollars.

    Before every model call a member checks its own budget and its team's; at either it
    makes no call and is `paused` (the lead hears of it once). Raising or removing the
    budget sets paused members going again at once.

    \b
    Example:
      teamctl budget shop 20 && teamctl budget shop 2.50 --member alice
    """
    from teamd import prices

    done = actions.set_budget(ws(), team, usd, member=member)
    if as_json:
        output.emit_json(done)
        return
    whose = f"{member} in team {team}" if member else f"team {team}"
    spent = prices.dollars(done["spent_usd"])
    if done["budget_usd"] is None:
        print(f"no budget for {whose} (spent so far {spent})")
    else:
        print(f"budget for {whose}: {prices.dollars(done['budget_usd'])} (spent so far "
              f"{spent})")


# -- looking -----------------------------------------------------------------------------
@app.command()
def status(team: Annotated[str | None, typer.Argument(help="One team (default: all).")
                           ] = None,
           watch: Annotated[bool, typer.Option("--watch", "-w", help="Refresh live until "
                                               "Ctrl-C.")] = False,
           as_json: JsonOpt = False) -> None:
    """The roster with status, task, uptime, pid, CPU, memory (PSS), tokens (in/out) and
    cost; and the supervisor.

    A status ending in '?' claims a process that is not running (stale). NOTES marks a
    plan-mode member whose gate is still closed and each request pending for a member
    (its id, for `teamctl approve`). Colours follow the status (failed red, backoff
    yellow); NO_COLOR turns them off.

    \b
    Example:
      teamctl status shop --watch
    """
    from teamctl import observe, views

    w = ws()
    if team:
        actions.require_team(w, team)

    def doc() -> Json:
        return observe.status_doc(w, [team] if team else w.team_names())

    if as_json and not watch:
        output.emit_json(doc())
    elif not watch:
        print(views.render_status(doc(), fit=views.terminal_width()))
    else:
        teams = [team] if team else w.team_names()
        folders = [w.teams_dir, *(p for t in teams for p in (
            w.team_dir(t), w.requests_dir(t), w.tasks_dir(t)))]
        views.watch(lambda width: views.render_status(doc(), fit=width), folders, every=2.0)


@app.command("board")
def board_cmd(team: TeamArg,
              watch: Annotated[bool, typer.Option("--watch", "-w", help="Refresh live until "
                                                  "Ctrl-C.")] = False,
              as_json: JsonOpt = False) -> None:
    """The task board by column: pending, in progress, completed; each task with its
    owner, what it is blocked by (blockers not completed yet) and what it blocks.

    \b
    Example:
      teamctl board shop --watch
    """
    from teamctl import observe, views

    w = ws()
    actions.require_team(w, team)

    def render(width: int | None) -> str:
        colors = {m["name"]: m.get("color") for m in roster.load(w, team)["members"]}
        return views.render_board(observe.board_doc(w, team), colors, fit=width)

    if as_json and not watch:
        output.emit_json(observe.board_doc(w, team))
    elif not watch:
        print(render(views.terminal_width()))
    else:
        views.watch(render, [w.tasks_dir(team), w.team_dir(team)], every=5.0)


def _journal_of(w: Workspace, team: str) -> tuple[Path, Json | None, Path | None]:
    """(journal path, roster or None, archive or None) of a team, or of its latest archive
    once it was deleted."""
    try:
        return w.events(team), actions.require_team(w, team), None
    except BadInput:
        archives = w.archives(team)
        if not archives:
            raise
        folder = archives[-1]
        config = files.read_json(folder / "config.json") if \
            (folder / "config.json").is_file() else None
        return folder / "events.jsonl", config, folder


def _colors(config: Json | None) -> dict[str, str]:
    if not config:
        return {}
    return {m["name"]: m.get("color") for m in config.get("members", []) if m.get("color")}


@app.command()
def logs(team: TeamArg,
         names: Annotated[list[str] | None, typer.Argument(
             help="Only events about these members.", show_default=False,
             autocompletion=_complete_member)] = None,
         lines: Annotated[int | None, typer.Option(
             "--lines", "-n", metavar="N", help="Start with the last N events shown.")
         ] = None,
         since: Annotated[str | None, typer.Option(
             metavar="T", help="Only events since T: 2025-11-23T14:05, 14:05[:30] (today), "
             "or an age: 90s, 10m, 2h.")] = None,
         follow: Annotated[bool, typer.Option(
             "--follow", "-f", help="Keep printing new events (from the end, after the last "
             "-n when given); ends when the team is deleted.")] = False,
         verbose: Annotated[bool, typer.Option(
             "--verbose", "-v", help="Also model calls and idle notifications.")] = False,
         as_json: Annotated[bool, typer.Option("--json", help="One JSON event per line.")
                            ] = False) -> None:
    """The team's event journal (events.jsonl and its rotated files), oldest first, like
    journalctl. Streamed: -n reads from the end, memory stays flat. A deleted team's
    latest archive is read. A process's own stderr is in .teams/TEAM/logs/NAME.log.

    \b
    Examples:
      teamctl logs shop alice bob -n 20
      teamctl logs shop --since 10m -f
      teamctl logs shop --json | jq 'select(.event == "tool_call" and .ok == false)'
    """
    w = ws()
    who = names or []
    path, config, archive = _journal_of(w, team)
    if config is not None and archive is None:
        for name in who:
            if name not in (LEAD, SUPERVISOR, "user"):
                roster.get(config, name)
    if lines is not None and lines < 0:
        raise BadInput("-n takes a number of events >= 0")
    start = events.parse_since(since) if since else None
    if archive is not None:
        print(f"note: team {team} was deleted; reading its archive {archive}", file=sys.stderr)
    colors = _colors(config)

    def keep(rec: Json) -> bool:
        return events.concerns(rec, who) and (verbose or not events.is_chatter(rec))

    def show(rec: Json) -> None:
        if as_json:
            sys.stdout.write(files.dumps_line(rec).decode())
        else:
            name = str(rec.get("member") or "-")
            sys.stdout.write(f"{output.paint(output.when(rec.get('ts')), 'dim')} "
                             f"{output.paint(f'{name:12}', colors.get(name))} "
                             f"{output.describe_event(rec)}\n")

    following = follow and archive is None
    deleted = False
    bad: list[int] = []

    def unreadable(line: bytes) -> None:
        bad.append(len(line))  # skipped; said once at the end

    try:
        for rec in events.stream(path, match=keep, last=lines, since=start,
                                 follow=following, history=not following or lines is not None
                                 or start is not None, on_bad=unreadable):
            show(rec)
            if following:
                sys.stdout.flush()
        deleted = following
    except KeyboardInterrupt:
        return  # Ctrl-C ends a follow: exit 0
    finally:
        if bad:
            print(f"teamctl: skipped {len(bad)} unreadable line(s) in {path} (or its rotated "
                  "files)", file=sys.stderr)
    if deleted:
        end = f"-- team {team} was deleted --"
        print(end, file=sys.stderr if as_json else sys.stdout, flush=True)


def _member_session(w: Workspace, team: str, name: str
                    ) -> tuple[Path, Path, str | None, Path | None]:
    """(session file, team folder, colour, archive or None) of a member of a team or of
    the team's latest archive."""
    path, config, archive = _journal_of(w, team)
    validate_member_name(name)
    member = roster.find(config, name) if config else None
    if member is None and archive is None:
        roster.get(config or {"name": team, "members": []}, name)
    folder = path.parent
    color = member.get("color") if member else None
    return folder / "sessions" / f"{name}.jsonl", folder, color, archive


def _show_transcript(team: str, name: str, lines: int | None, follow: bool) -> None:
    from teamctl import transcript as tr

    w = ws()
    session, folder, color, archive = _member_session(w, team, name)
    if archive is not None:
        print(f"note: team {team} was deleted; reading its archive {archive}", file=sys.stderr)
    if lines is not None and lines < 0:
        raise BadInput("-n takes a number of records >= 0")
    records = tr.history(w, team, name, session)
    renderer = tr.Renderer(name, color)
    shown = records[-lines:] if lines else ([] if lines == 0 else records)
    for rec in shown:
        for line in tr.render(renderer, rec):
            print(line)
    if not records and not follow:
        print(f"{name} has no conversation yet", file=sys.stderr)
    if not follow or archive is not None:
        return
    sys.stdout.flush()
    seen = sum(1 for r in records if r.get("type") != "turn")
    try:
        for rec in tr.follow(session, folder, seen):
            for line in tr.render(renderer, rec):
                print(line)
            sys.stdout.flush()
    except KeyboardInterrupt:
        return  # Ctrl-C ends an attach: exit 0
    print(f"-- team {team} was deleted --", flush=True)


@app.command()
def transcript(team: TeamArg, name: NameArg,
               lines: Annotated[int | None, typer.Option(
                   "--lines", "-n", metavar="N", help="Only the last N records.")] = None
               ) -> None:
    """A member's conversation as a person reads it: its text, each tool call and its
    (shortened) result, messages in and out, compactions — across restarts.

    \b
    Example:
      teamctl transcript shop alice -n 30
    """
    _show_transcript(team, name, lines, follow=False)


@app.command()
def attach(team: TeamArg, name: NameArg,
           lines: Annotated[int | None, typer.Option(
               "--lines", "-n", metavar="N", help="Start with the last N records.")] = None
           ) -> None:
    """Watch a member work, live: its transcript, then each new step as it happens (across
    restarts and compactions). Ctrl-C detaches; the member goes on.

    \b
    Example:
      teamctl attach shop alice -n 10
    """
    _show_transcript(team, name, lines, follow=True)


@app.command()
def delete(team: TeamArg,
           force: Annotated[bool, typer.Option("--force", help="No handshake: stop everyone.")
                            ] = False,
           timeout: TimeoutOpt = WAIT_DEFAULT,
           purge: Annotated[bool, typer.Option(
               "--purge", help="Keep no archive of its journal, sessions and transcripts.")
           ] = False) -> None:
    """Shut every member down (handshake, or --force), then remove the team's folders. Its
    journal, sessions and transcripts are kept in .teams/.archive/TEAM-TIME/ (unless
    --purge), where `teamctl logs TEAM` still finds them.

    \b
    Example:
      teamctl delete shop --timeout 60
    """
    w = ws()
    with_worktrees = [m for m in actions.require_team(w, team)["members"] if m.get("worktree")]
    started = actions.delete_team(w, team, force=force, purge=purge)
    opened = started["requests"]

    def finished() -> bool:
        if actions.team_gone(w, team):
            return True
        return bool(_rejections(w, team, opened)) or actions.finish_delete(w, team)

    said = actions.asked_to_shut_down(opened)
    if started["deleted"] and said:
        print(said)  # they exited at once: still say what was asked
    done = started["deleted"] or _wait(w, team, timeout, finished,
                                       lambda: _delete_pending(w, team, opened),
                                       announce=said)
    if not actions.team_gone(w, team):
        rejected = _rejections(w, team, opened)
        why = f"rejected the shutdown: {', '.join(rejected)}" if rejected else \
            f"timed out after {timeout:g}s" if not done else "not removed"
        raise TeamdError(f"team {team} is not deleted: {why}; "
                         f"{_still_pending(w, team, opened)}; it stays `deleting` "
                         f"(`teamctl delete {team} --force` stops everyone)")
    archives = w.archives(team)
    kept = f"; its journal and transcripts are in {archives[-1]}" \
        if archives and not purge else ""
    print(f"deleted team {team}{kept}")
    _report_kept_worktrees(with_worktrees)


def _delete_pending(w: Workspace, team: str, opened: list[Json]) -> str:
    if actions.team_gone(w, team):
        return f"team {team} is deleted"
    return (f"team {team} is being deleted; {_still_pending(w, team, opened)}; "
            f"`teamctl delete {team}` again waits for it (--force stops everyone)")


def _report_kept_worktrees(members: list[Json]) -> None:
    """One line per worktree the deletion kept (whoever removed the team: this command or
    the supervisor); the journal archived with the team has `worktree_kept` too."""
    for m in members:
        record = m["worktree"]
        if Path(record["path"]).exists():
            why = worktrees.keep_reason(record) or "kept"
            print(f"kept worktree {record['path']} (branch {record['branch']}): {why}")


@app.command("diff")
def diff_cmd(team: TeamArg, name: NameArg,
             stat: Annotated[bool, typer.Option("--stat", help="Only a summary per file.")
                             ] = False) -> None:
    """A worktree member's committed work against its base (git diff BASE...BRANCH).

    \b
    Example:
      teamctl diff api backend --stat
    """
    record = worktrees.worktree_of(actions.require_team(ws(), team), name)
    sys.stdout.write(worktrees.diff(record, stat=stat))
    _note_uncommitted(record)


def _note_uncommitted(record: Json) -> None:
    """Say so when the member's worktree holds work not committed yet (not in the branch)."""
    if Path(record["path"]).is_dir():
        pending = worktrees.uncommitted(record["path"])
        if pending:
            print(f"note: {len(pending)} uncommitted file(s) in {record['path']} are not in "
                  "its branch yet (committed when its task is completed)", file=sys.stderr)


@app.command()
def merge(team: TeamArg, name: NameArg,
          into: Annotated[str | None, typer.Option(
              metavar="REF", help="Merge into this local branch (in a temporary worktree) "
              "instead of the repository's checked-out branch.")] = None,
          as_json: JsonOpt = False) -> None:
    """Merge a worktree member's branch (git merge --no-ff). Refuses a repository with
    uncommitted changes; a conflict is aborted (exit 1) and its files listed.

    \b
    Example:
      teamctl merge api backend --into release
    """
    config = actions.require_team(ws(), team)
    done = worktrees.merge(ws(), team, name, into=into)
    _note_uncommitted(worktrees.worktree_of(config, name))
    if as_json:
        output.emit_json(done)
    elif done["commit"] is None:
        print(f"{done['into']} already contains {done['branch']}: nothing to merge")
    else:
        print(f"merged {done['branch']} into {done['into']}: {done['commit']}")


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

    \b
    Example:
      teamctl --root /tmp/demo demo --lead
    """
    from pathlib import Path

    from teamctl import demo as demo_mod

    chosen = root or ctx.find_root().params.get("root") or os.environ.get(ROOT_ENV) or None
    demo_mod.run(Path(chosen).expanduser().absolute() if chosen else None, timeout, lead)


def main() -> None:
    """Console entry point: one clear line on stderr and the contract's exit code."""
    try:
        code = app(standalone_mode=False)
        if isinstance(code, int) and code:
            sys.exit(code)  # typer returns 130 for a Ctrl-C outside any wait
    except TeamdError as exc:
        print(f"teamctl: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        # `teamctl … | head` closed the pipe: not an error worth a traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    except OSError as exc:
        # a full disk, a quota, an I/O error: one line naming the file (CONTRACT §3); the
        # writers left nothing half-written
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"teamctl: error: {where}{exc.strerror or exc}", file=sys.stderr)
        sys.exit(1)
    except SystemExit:
        raise
    except Exception as exc:  # click's usage errors carry their own exit code

        if isinstance(exc, click.exceptions.NoArgsIsHelpError):
            exc.show()  # bare `teamctl` or `teamctl task`: the help, not an error line
            sys.exit(0)
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
