"""`task add`, `task list`, `task show` and `task update`: the shared task board
(CONTRACT §5).

`task_app` is added to the app by teamctl.cli; what a task holds and how it changes is
`teamd.board`'s, who may own it `teamd.actions`'.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import typer

from teamctl import complete, output
from teamctl.params import HELP_OPTIONS, JsonOpt, TaskIdArg, TeamArg, ws
from teamd import actions, board
from teamd.errors import BadInput

task_app = typer.Typer(help="The shared task board.\n\n\b\nExample:\n"
                       "  teamctl task add shop 'Write the login page' --owner alice",
                       no_args_is_help=True, rich_markup_mode=None,
                       context_settings=HELP_OPTIONS)


def parse_ids(text: str | None) -> list[int]:
    """Task ids written `1,2` (`--blocked-by`), as numbers; bad input otherwise."""
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
    task = actions.add_task(ws(), team, subject, description, parse_ids(blocked_by), owner=owner)
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
                               add_blocked_by=parse_ids(blocked_by))
    if as_json:
        output.emit_json(task)
    else:
        print(f"task #{task_id}: {task['status']}, owner {task['owner'] or '-'}")
