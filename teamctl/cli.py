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
from typing import Annotated, Any

import click
import typer

from teamctl import complete, config, gitviews, journal, messages, output
from teamctl.params import (
    HELP_OPTIONS,
    WAIT_DEFAULT,
    JsonOpt,
    NameArg,
    RequestArg,
    TaskIdArg,
    TeamArg,
    TimeoutOpt,
    ws,
)
from teamd import (
    actions,
    board,
    pidfile,
    requests,
    roster,
    settings,
    worktrees,
)
from teamd.errors import BadInput, Interrupted, TeamdError
from teamd.files import Json
from teamd.layout import LEAD, ROOT_ENV, Workspace
from teamd.permissions import describe
from teamd.records import Request

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
    ws().root.mkdir(parents=True, exist_ok=True)
    path = settings.write_defaults(ws(), force=force)
    print(f"wrote {path}")


app.command()(config.config)


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
    from teamctl import advice, models

    if as_json:
        output.emit_json(member)
    else:
        print(f"spawned {member['agent_id']} (status {member['status']})")
        tree = member.get("worktree")
        if tree:
            print(f"worktree {tree['path']} on branch {tree['branch']}")
    advice.after_spawn(ws(), member.get("model"))  # model, API key, supervisor
    models.warn_if_unpriced(ws(), team, member["name"])


# -- messages: teamctl.messages -----------------------------------------------------------
app.command()(messages.send)
app.command()(messages.broadcast)
app.command("inbox")(messages.inbox_cmd)


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
        raise TeamdError(f"{name} rejected the shutdown: "
                         f"{record.get('answer_reason') or 'no reason'}")


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
                autocompletion=complete.member)] = None) -> None:
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
            out.append(f"{record['recipient']} ({record.get('answer_reason') or 'no reason'})")
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
    gitviews.report_release(gone.get("worktree_report"))


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
            said = r.get("feedback") or r.get("answer_reason")
            return output.short(describe(r) + (f" ({said})" if said else ""), 70)
        # the asker's words (a shutdown's reason is null when none was given: `-`)
        return output.short(r.get("plan") or r.get("feedback") or r.get("reason") or "-", 50)

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
                 autocompletion=complete.member)] = None,
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
        print(f"{key + ':':12} {output.short(task[key], None)}")
    for key in ("created_at", "claimed_at", "completed_at"):
        print(f"{key + ':':12} {output.when(task[key])}")
    if task["description"]:
        print(f"\n{output.safe(task['description'])}")


@task_app.command("update")
def task_update(
    team: TeamArg, task_id: TaskIdArg,
    status: Annotated[str | None, typer.Option(help="pending, in_progress or completed.")
                      ] = None,
    owner: Annotated[str | None, typer.Option(help="A member name; '' clears it.",
                                              autocompletion=complete.member)] = None,
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
                   autocompletion=complete.member)] = None,
               as_json: JsonOpt = False) -> None:
    """Set (0 removes) a team's or a member's spending cap in US dollars.

    Before every model call a member checks its own budget and its team's; at either it
    makes no call and is `paused` (the lead hears of it once). Raising or removing the
    budget sets paused members going again at once.

    \b
    Example:
      teamctl budget shop 20 && teamctl budget shop 2.50 --member alice
    """
    from teamctl import models

    done = actions.set_budget(ws(), team, usd, member=member)
    if done["budget_usd"] is not None:
        models.warn_if_unpriced(ws(), team, member)
    if as_json:
        output.emit_json(done)
        return
    print(models.budget_line(done, team, member))


@app.command()
def prices(as_json: JsonOpt = False) -> None:
    """The price table in force (US dollars per million tokens: the built-in rows, checked
    on the date shown, and `[prices]` of teamd.toml), and the installed SDK's models that
    have no price: under a budget a member on one is paused, never called.

    \b
    Example:
      teamctl prices --json | jq '.models[] | select(.model == "claude-sonnet-5-5")'
    """
    from teamctl import models

    models.show_prices(ws(), as_json)


# -- looking -----------------------------------------------------------------------------
@app.command()
def status(team: Annotated[str | None, typer.Argument(
               help="One team (default: all).", autocompletion=complete.team)] = None,
           watch: Annotated[bool, typer.Option("--watch", "-w", help="Refresh live until "
                                               "Ctrl-C.")] = False,
           as_json: JsonOpt = False) -> None:
    """The roster with status, task, uptime, pid, CPU, memory (PSS), tokens (in/out) and
    cost; and the supervisor.

    A status ending in '?' claims a process that is not running (stale). NOTES marks a
    plan-mode member whose gate is still closed and each request pending for a member
    (its id, for `teamctl approve`). Colours follow the status (failed red, backoff
    yellow); NO_COLOR turns them off. A team whose files cannot be read gets one line,
    the others are shown, and the exit code is 1.

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

    if not watch:
        now = doc()
        if as_json:
            output.emit_json(now)
        else:
            print(views.render_status(now, fit=views.terminal_width()))
        sys.exit(1 if now["unreadable"] else 0)  # a team it cannot read: said, and exit 1
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


# -- the journal and sessions: teamctl.journal ----------------------------------------------
app.command()(journal.logs)
app.command()(journal.transcript)
app.command()(journal.attach)


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
    gitviews.report_after_delete(with_worktrees)


def _delete_pending(w: Workspace, team: str, opened: list[Json]) -> str:
    if actions.team_gone(w, team):
        return f"team {team} is deleted"
    return (f"team {team} is being deleted; {_still_pending(w, team, opened)}; "
            f"`teamctl delete {team}` again waits for it (--force stops everyone)")


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
    gitviews.note_uncommitted(record)


@app.command()
def merge(team: TeamArg, name: NameArg,
          into: Annotated[str | None, typer.Option(
              metavar="REF", help="Merge into this local branch (in a temporary worktree) "
              "instead of the repository's checked-out branch.")] = None,
          delete_branch: Annotated[bool, typer.Option(
              "--delete-branch", help="Then delete the merged branch (git branch -d), or, "
              "while the member still works in it, when its worktree goes.")] = False,
          as_json: JsonOpt = False) -> None:
    """Merge a worktree member's branch (git merge --no-ff). Refuses a repository with
    uncommitted changes; a conflict is aborted (exit 1) and its files listed.

    \b
    Example:
      teamctl merge api backend --into release
      teamctl merge api backend --delete-branch
    """
    actions.require_team(ws(), team)
    gitviews.merge(ws(), team, name, into, delete_branch, as_json)


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
    from teamctl import demo as demo_mod

    chosen = root or ctx.find_root().params.get("root") or os.environ.get(ROOT_ENV) or None
    demo_mod.run(chosen, timeout, lead)  # as given: it prints paths in the same form


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
