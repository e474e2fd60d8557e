"""What a person (through `teamctl`) or a lead (through its tools) can do to a team.

Each action validates everything first (BadInput, nothing touched), then writes the files
in the contract's lock order: roster → board → request → inbox → events. The supervisor and
the teammates react to those files; nothing here signals a process. One module per concern:
teams (create, find, budgets), members (spawn, the shutdown handshake, stop, restart,
up/down, remove), messages (who sends what, routing by type), answers (requests answered),
tasks, deletion. Callers use `actions.NAME`; the sequences that wait are `teamd.protocols`'.
"""

from __future__ import annotations

from teamd.actions.answers import (
    ANSWERS,
    FLAGS,
    TOOL_INPUTS,
    Spelling,
    answer_request,
    check_answer_fields,
    check_answerer,
    check_shutdown_refusal,
)
from teamd.actions.deletion import (
    asked_to_shut_down,
    begin_delete,
    delete_team,
    finish_delete,
    live_members,
    remove_team,
    team_gone,
)
from teamd.actions.members import (
    approve_shutdown,
    down,
    open_shutdown,
    release_tasks,
    remove_member,
    restart,
    restart_all,
    shutdown,
    spawn,
    still_up,
    stop,
    stops_without_handshake,
)
from teamd.actions.messages import (
    Sent,
    broadcast,
    inbox_owner,
    route,
    send,
)
from teamd.actions.tasks import (
    add_task,
    task_owner,
    update_task,
)
from teamd.actions.teams import (
    WINDING_DOWN,
    create_team,
    require_team,
    set_budget,
)

__all__ = [
    "ANSWERS",
    "FLAGS",
    "TOOL_INPUTS",
    "WINDING_DOWN",
    "Sent",
    "Spelling",
    "add_task",
    "answer_request",
    "approve_shutdown",
    "asked_to_shut_down",
    "begin_delete",
    "broadcast",
    "check_answer_fields",
    "check_answerer",
    "check_shutdown_refusal",
    "create_team",
    "delete_team",
    "down",
    "finish_delete",
    "inbox_owner",
    "live_members",
    "open_shutdown",
    "release_tasks",
    "remove_member",
    "remove_team",
    "require_team",
    "restart",
    "restart_all",
    "route",
    "send",
    "set_budget",
    "shutdown",
    "spawn",
    "still_up",
    "stop",
    "stops_without_handshake",
    "task_owner",
    "team_gone",
    "update_task",
]
