"""teamctl: the control CLI. A thin typer layer over the `teamd` library.

It acts only by writing the workspace's files (CONTRACT.md section 9); `teamd run` and the
teammates react. It must start fast, so it never imports `anthropic` (nor anything that
does): the supervisor and the agent live behind `teamd run`.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import click
import typer

from teamctl import (
    asks,
    complete,
    config,
    gitviews,
    journal,
    lifecycle,
    messages,
    output,
    params,
    stores,
)
from teamctl.params import (
    HELP_OPTIONS,
    JsonOpt,
    NameArg,
    TeamArg,
    ws,
)
from teamctl.tasks import task_app
from teamctl.web.command import web
from teamd import (
    actions,
    crashpoints,
    roster,
    settings,
    worktrees,
)
from teamd.errors import TeamdError
from teamd.files import Json
from teamd.layout import ROOT_ENV, Workspace

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
    store: Annotated[str | None, typer.Option(
        "--store", metavar="URL", help="Where the records live: files, or a postgresql:// "
        "URL (default: $TEAMD_STORE, else teamd.toml's store, else files).")] = None,
    version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_version, help="Print the version and exit.")
    ] = False,
) -> None:
    ctx.obj = Workspace.at(root, params.store_option(store))


# -- setup -------------------------------------------------------------------------------
app.command()(stores.init)
app.command()(config.config)


RuntimeOpt = Annotated[str | None, typer.Option(
    metavar="RUNTIME", help="The agent: teamd (built in) or claude-code (the Claude Code "
    "CLI, headless; needs the claude-code extra). Default: the team's, else teamd.toml's "
    "runtime.", show_default=False)]
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
           budget_usd: BudgetOpt = None, runtime: RuntimeOpt = None,
           as_json: JsonOpt = False) -> None:
    """Create a team: its roster, inbox folder and task board.

    \b
    Example:
      teamctl create shop --description 'the online shop' --budget 20
      teamctl create api --worktrees --repo ~/src/app
    """
    config = actions.create_team(ws(), team, description, repo=repo, worktrees_on=worktrees_on,
                                 runtime=runtime,
                                 budget_usd=budget_usd)
    if as_json:
        output.emit_json(config)
    else:
        print(f"created team {team} in {ws().store.describe_team(team)}")


@app.command()
def spawn(
    team: TeamArg, name: NameArg,
    prompt: Annotated[str, typer.Option(help="The member's instructions.", show_default=False)],
    role: Annotated[str, typer.Option(help="A short role, e.g. 'backend engineer'.")] = "",
    model: Annotated[str | None, typer.Option(help="Model (default: teamd.toml's).")] = None,
    plan_mode: Annotated[bool, typer.Option(
        "--plan-mode", help="Read-only until the lead approves a plan.")] = False,
    cwd: Annotated[str | None, typer.Option(
        help="Working directory its tools are confined to (default: the root); with hosts, "
        "it runs only on a host that has it.")] = None,
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
    runtime: RuntimeOpt = None,
    host: Annotated[str | None, typer.Option(
        metavar="NAME", help="Run it only on this host of a PostgreSQL store (default: the "
        "leader places it; a worktree or claude-code member stays on this one).")] = None,
) -> None:
    """Add a member with desired=running; the supervisor forks its process.

    \b
    Example:
      teamctl spawn shop alice --prompt 'Handle the backend tasks' --role backend
    """
    member = actions.spawn(ws(), team, name, prompt, role=role, model=model,
                           plan_mode=plan_mode, cwd=cwd, lead=lead, worktree=worktree,
                           base=base, budget_usd=budget_usd, effort=effort,
                           runtime=runtime, host=host)
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

# -- members and teams coming and going: teamctl.lifecycle; answers: teamctl.asks --------
for command in (lifecycle.shutdown, lifecycle.stop, lifecycle.restart, lifecycle.up,
                lifecycle.down, lifecycle.remove, asks.approve, asks.reject):
    app.command()(command)
app.command("requests")(asks.requests_cmd)


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
        return observe.status_doc(w, [team] if team else w.store.team_names())

    if not watch:
        now = doc()
        if as_json:
            output.emit_json(now)
        else:
            print(views.render_status(now, fit=views.terminal_width()))
        sys.exit(1 if now["unreadable"] else 0)  # a team it cannot read: said, and exit 1
    feed = w.store.changes([team] if team else None, kinds=views.STATUS_KINDS)
    views.watch(lambda width: views.render_status(doc(), fit=width), feed, every=2.0)


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
        views.watch(render, w.store.changes([team], kinds=views.BOARD_KINDS), every=5.0)


# -- the journal and sessions: teamctl.journal ----------------------------------------------
app.command()(journal.logs)
app.command()(journal.transcript)
app.command()(journal.attach)
app.command()(lifecycle.delete)
app.command()(stores.export)  # teamctl.stores: a team as files, out of or into the store
app.command("import")(stores.import_cmd)
app.command()(stores.hosts)
app.command()(web)  # teamctl.web: its server stack is imported only when it runs


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
         runtime: Annotated[str, typer.Option(
             metavar="RUNTIME", help="The teammates' agent: teamd (built in) or claude-code "
             "(the Claude Code CLI, which must be installed).")] = "teamd",
         root: Annotated[str | None, typer.Option(
             "--root", metavar="DIR", hidden=True,
             help="The same as the global --root.")] = None,
         timeout: Annotated[float, typer.Option(help="Seconds to let the team work.")
                            ] = 600.0) -> None:
    """A whole team at work: the REST → GraphQL migration of the design notes, four chained
    tasks worked by analyst, backend and frontend under a real supervisor, live, then shut
    down. Uses Claude with ANTHROPIC_API_KEY; offline, the built-in scripted model.
    With --runtime claude-code the teammates run the Claude Code CLI (installed, and
    named by claude_code in teamd.toml if not `claude`).

    The workspace is the global --root or $TEAMD_ROOT, else a new ./teamd-demo folder.

    \b
    Example:
      teamctl --root /tmp/demo demo --lead
      teamctl --root /tmp/cc demo --runtime claude-code
    """
    from teamctl import demo as demo_mod

    chosen = root or ctx.find_root().params.get("root") or os.environ.get(ROOT_ENV) or None
    asked = settings.check("runtime", runtime, "--runtime")
    demo_mod.run(chosen, timeout, lead, asked)  # as given: it prints paths in the same form


def main() -> None:
    """Console entry point: one clear line on stderr and the contract's exit code."""
    crashpoints.identify("teamctl")
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
