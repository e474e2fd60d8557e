"""Shell completion of names: teams, members, task ids and request ids (CONTRACT §9), read
from the files of the root named on the line being completed (`--root DIR`), else
$TEAMD_ROOT, else the current directory.

Click parses the line before asking for candidates, and gives up on it at an option still
waiting for its value (`budget shop 3 --member <TAB>`): the command's arguments are then
unknown. `value` reads them again from the line itself, without that last option.
"""

from __future__ import annotations

import os

import click
from click.shell_completion import split_arg_string

from teamd import board, requests, roster
from teamd.errors import TeamdError
from teamd.layout import LEAD, Workspace

#: what a completion gives up on quietly: a root, team or file that is not there or broken
_MISSING = (OSError, TeamdError, ValueError)


def _line() -> list[str]:
    """The words of the line being completed, up to the one being completed (not it):
    bash gives COMP_WORDS and COMP_CWORD, zsh and fish _TYPER_COMPLETE_ARGS."""
    if "COMP_WORDS" in os.environ:
        words = split_arg_string(os.environ["COMP_WORDS"])
        try:
            return words[:int(os.environ.get("COMP_CWORD", len(words)))]
        except ValueError:
            return words
    text = os.environ.get("_TYPER_COMPLETE_ARGS", "")
    words = split_arg_string(text)
    return words if text.endswith(" ") or not words else words[:-1]


def value(ctx: click.Context, param: str) -> str | None:
    """The value of the command's parameter `param` on the line being completed."""
    found = ctx.params.get(param)
    if found is not None or ctx.parent is None:
        return None if found is None else str(found)
    words, at = _line(), 0
    chain = []
    node: click.Context | None = ctx
    while node is not None and node.parent is not None:
        chain.append(node.info_name)
        node = node.parent
    for name in reversed(chain):  # where the command's own words start: after its name
        at = words.index(name, at) + 1 if name in words[at:] else at
    rest = words[at:]
    if rest and rest[-1].startswith("-"):
        rest = rest[:-1]  # the option whose value is being completed
    try:
        again = ctx.command.make_context(ctx.info_name, rest, parent=ctx.parent,
                                         resilient_parsing=True)
    except click.ClickException:
        return None
    found = again.params.get(param)
    return None if found is None else str(found)


def _ws(ctx: click.Context) -> Workspace:
    given = ctx.find_root().params
    return Workspace.at(given.get("root"), given.get("store"))


def team(ctx: click.Context, incomplete: str) -> list[str]:
    """The teams of the root."""
    try:
        return [t for t in _ws(ctx).store.team_names() if t.startswith(incomplete)]
    except _MISSING:
        return []


def _members(ctx: click.Context) -> list[str]:
    name = value(ctx, "team")
    if name is None:
        return []
    try:
        return roster.names(roster.load(_ws(ctx), name))
    except _MISSING:
        return []


def member(ctx: click.Context, incomplete: str) -> list[str]:
    """The members of the team named on the line, but those already given (`logs T a b`)."""
    done = set(ctx.params.get("names") or [])
    return [n for n in _members(ctx) if n.startswith(incomplete) and n not in done]


def recipient(ctx: click.Context, incomplete: str) -> list[str]:
    """Whom a message can go to: the members and the lead."""
    names = _members(ctx)
    if names and LEAD not in names:
        names.append(LEAD)
    return [n for n in names if n.startswith(incomplete)]


def task(ctx: click.Context, incomplete: str) -> list[tuple[str, str]]:
    """The task ids of the team named on the line, each with its subject."""
    from teamctl import output

    name = value(ctx, "team")
    try:
        tasks = board.list_tasks(_ws(ctx), str(name)) if name else []
    except _MISSING:
        return []
    return [(str(t["id"]), output.short(t["subject"], 40)) for t in tasks
            if str(t["id"]).startswith(incomplete)]


def request(ctx: click.Context, incomplete: str) -> list[tuple[str, str]]:
    """The pending request ids of the team named on the line, each with its kind."""
    name = value(ctx, "team")
    try:
        records = requests.list_requests(_ws(ctx), str(name), pending_only=True) \
            if name else []
    except _MISSING:
        return []
    return [(r["request_id"], f"{r['kind']} from {r['sender']}") for r in records
            if r["request_id"].startswith(incomplete)]
