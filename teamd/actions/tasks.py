"""Tasks as a person or a member adds and changes them: the checks before `teamd.board`
writes (the team, the owner, a `task_created` hook; CONTRACT §5)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from teamd import (
    board,
    inbox,
    roster,
)
from teamd.actions.teams import require_team
from teamd.files import Json
from teamd.layout import LEAD, Workspace, validate_member_name
from teamd.records import Task


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
