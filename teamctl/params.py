"""What every teamctl command shares: the workspace it acts on (`ws`), and the arguments
and options that mean the same in every command (a team, a member, a task id, `--json`,
a wait's `--timeout`), each with its help and its shell completion.
"""

from __future__ import annotations

import sys
from typing import Annotated

import click
import typer

from teamctl import complete
from teamd.errors import BadInput
from teamd.layout import ROOT_ENV, Workspace

#: the commands that create the root when it is not there
ROOT_MAKERS = ("init", "demo")


def store_option(url: str | None) -> str | None:
    """The global `--store URL`, checked (bad input: exit 2, one line, masked); a password
    in it draws one warning line on stderr, since the command line shows in `ps`."""
    if url is None:
        return None
    from teamd.store import urls

    warning = urls.command_line_warning(urls.check(url))
    if warning:
        print(f"teamctl: {warning}", file=sys.stderr)
    return url


def ws() -> Workspace:
    """The workspace this invocation acts on: the root callback keeps it on the click
    context (`ctx.obj`), so nothing outlives one command (tests run many in one process).
    A root that is no directory is bad input, but to the commands that create it."""
    ctx = click.get_current_context(silent=True)
    chosen = ctx.find_object(Workspace) if ctx is not None else None
    found = chosen if chosen is not None else Workspace.at()
    if ctx is not None and ctx.info_name not in ROOT_MAKERS and not found.root.is_dir():
        raise BadInput(f"no such directory: {found.root} (the root, from --root or "
                       f"${ROOT_ENV}; `teamctl --root {found.root} init` creates it)")
    return found


HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}
WAIT_DEFAULT = 120.0  # every wait's --timeout (CONTRACT §9)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts and jq.")]
TeamArg = Annotated[str, typer.Argument(help="Team name.", show_default=False,
                                        autocompletion=complete.team)]
NameArg = Annotated[str, typer.Argument(help="Member name.", show_default=False,
                                        autocompletion=complete.member)]
TimeoutOpt = Annotated[float, typer.Option("--timeout", metavar="S",
                                           help="Seconds to wait at most.")]
TaskIdArg = Annotated[int, typer.Argument(help="Task id.", autocompletion=complete.task)]
RequestArg = Annotated[str, typer.Argument(help="The request id (`teamctl requests TEAM "
                                           "--pending` lists them).",
                                           autocompletion=complete.request)]
