"""What each tool of CONTRACT.md §8 does: one handler per tool name (`HANDLERS`), and the
one result type every handler returns (`ToolResult`).

A handler is a function `(box, **input) -> ToolResult`, called by `tools.Toolbox` once the
input has passed its schema (`tool_input`), the plan-mode gate and the permission rules.
It acts as `box.member` through the shared library (`actions`, `board`, `requests`) — the
same functions, checks and wording `teamctl` uses — and the workspace functions of
`tools_files`. A refusal raises `ToolError` (or a `TeamdError` from the library), which
the toolbox turns into an error result. What the agent loop must do after a call (note a
claimed task, leave) is said by the result, never read back from the call's input.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from teamd import actions, board, inbox, permissions, requests, roster, worktrees
from teamd.agent.tool_specs import SEND_TYPES
from teamd.agent.tools_files import (
    ToolError,
    check_command,
    edit_file,
    read_file,
    run_bash,
    write_file,
)
from teamd.files import Json
from teamd.layout import LEAD

if TYPE_CHECKING:
    from teamd.agent.tools import Toolbox

log = logging.getLogger(__name__)

__all__ = ["HANDLERS", "Blocked", "Handler", "ToolResult", "task_line"]


@dataclass(frozen=True)
class ToolResult:
    """A tool call's outcome, for the model and for the agent loop.

    `content` and `is_error` are the model's `tool_result`. `claimed`: the call started
    task N for this member (the loop records it as known to the model, so the task is
    never handed to it again as `<auto-claimed>`). `ends_process`: the call approved a
    shutdown; the loop finishes the turn's calls, records the stop and exits 0."""

    content: str
    is_error: bool = False
    claimed: int | None = None
    ends_process: bool = False


class Blocked(ToolError):
    """A refusal whose text reaches the model as written, lines and all (a hook's reason,
    a person's feedback): not squeezed onto one line like other tool errors. `reason` is
    the hook's own words, without the line saying which hook blocked."""

    def __init__(self, text: str, reason: str | None = None) -> None:
        super().__init__(text)
        self.reason = text if reason is None else reason


Handler = Callable[..., ToolResult]


def task_line(task: Mapping[str, Any]) -> str:
    """One compact line for a task: `#2 [pending] owner=- blocked_by=#1: subject`."""
    blocked = ",".join(f"#{b}" for b in task.get("blocked_by") or []) or "-"
    return (f"#{task['id']} [{task['status']}] owner={task.get('owner') or '-'} "
            f"blocked_by={blocked}: {task['subject']}")


# -- workspace tools -----------------------------------------------------------------------
def bash(box: Toolbox, command: str, timeout: float | None = None) -> ToolResult:
    check_command(command)
    limit = box.bash_timeout if timeout is None else min(float(timeout), box.bash_timeout)
    outcome = run_bash(command, box.cwd, limit, groups=box.groups)
    body = outcome.output if outcome.output else "(no output)\n"
    if not body.endswith("\n"):
        body += "\n"
    if outcome.timed_out:
        return ToolResult(f"{body}[timed out after {limit:g} s: killed the command and "
                          "every process it started]", is_error=True)
    code = outcome.returncode
    status = (f"exit code {code}" if code is not None and code >= 0
              else f"killed by signal {-code if code is not None else '?'}")
    return ToolResult(f"{body}[{status}]")


def read_file_tool(box: Toolbox, path: str, limit: int | None = None) -> ToolResult:
    return ToolResult(read_file(box.cwd, path, limit))


def write_file_tool(box: Toolbox, path: str, content: str) -> ToolResult:
    return ToolResult(write_file(box.cwd, path, content, guard=box.guard_write))


def edit_file_tool(box: Toolbox, path: str, old_text: str, new_text: str) -> ToolResult:
    return ToolResult(edit_file(box.cwd, path, old_text, new_text, guard=box.guard_write))


# -- task board ----------------------------------------------------------------------------
def task_create(box: Toolbox, subject: str, description: str = "",
                blocked_by: list[int] | None = None) -> ToolResult:
    def hook(task: Json) -> None:
        box.run_hook("task_created", task=task)  # Blocked: nothing is written

    task = actions.add_task(box.ws, box.team, subject, description, blocked_by,
                            created_by=box.member, before_write=hook)
    return ToolResult(f"created task {task_line(task)}")


def task_get(box: Toolbox, task_id: int) -> ToolResult:
    task = board.get(box.ws, box.team, task_id)
    return ToolResult(json.dumps({k: v for k, v in task.items() if k != "schema"},
                                 ensure_ascii=False))


def task_update(box: Toolbox, task_id: int, status: str | None = None,
                **rest: Any) -> ToolResult:
    config = actions.require_team(box.ws, box.team)
    task: Mapping[str, Any] = board.get(box.ws, box.team, task_id)
    owner = actions.task_owner(config, rest.get("owner", board.UNSET))
    # A teammate changes only its own or an unowned task (CONTRACT §8): checked before
    # the task_completed hook and the commit, so its work never lands under another's
    # task; re-checked under the board lock (`holder`) against a change meanwhile.
    holder = box.member if box.kind == "teammate" else None
    if holder is not None and task["owner"] not in (None, holder):
        raise ToolError(_not_yours(task_id, task["owner"]))
    add_blocked_by = rest.get("add_blocked_by") or []
    add_blocks = rest.get("add_blocks") or []
    # the model set it going itself: known to it, never announced as <auto-claimed>
    claimed = task_id if status == "in_progress" else None
    # Starting a task for oneself goes through `claim`, which re-checks claimability
    # under the board lock: two members racing for one task cannot both win.
    mine = owner == box.member or (owner is board.UNSET
                                   and task["owner"] in (None, box.member))
    if status == "in_progress" and task["status"] == "pending" and mine:
        if add_blocked_by or add_blocks:
            actions.update_task(box.ws, box.team, task_id, add_blocked_by=add_blocked_by,
                                add_blocks=add_blocks, actor=box.member)
        started = board.claim(box.ws, box.team, box.member, task_id)
        if started is None:
            # an error result, not a raise: the edges just added stay, as they would on
            # the files store (a raise undoes the whole step on PostgreSQL, CONTRACT §15)
            return ToolResult(_why_not_claimable(box, task_id), is_error=True)
        return ToolResult(f"started {task_line(started)}", claimed=claimed)
    commits: list[str] = []
    if status == "completed" and task["status"] != "completed":
        # the quality gate: a blocking hook leaves the task as it is (in_progress)
        box.run_hook("task_completed", task=task)
        # The work is committed before the task says completed: a failed commit leaves
        # it in_progress, and a crash in between is mended by the next completion,
        # which finds that commit by its message instead of making another.
        commits = _commit_work(box, config, task)
    try:
        task = actions.update_task(box.ws, box.team, task_id, status=status, owner=owner,
                                   add_blocked_by=add_blocked_by, add_blocks=add_blocks,
                                   actor=box.member, add_commits=commits, holder=holder)
    except board.NotHolder as exc:
        raise ToolError(_not_yours(task_id, exc.owner)) from None
    if commits:
        return ToolResult(f"updated {task_line(task)}; committed "
                          f"{', '.join(c[:12] for c in commits)}", claimed=claimed)
    return ToolResult(f"updated {task_line(task)}", claimed=claimed)


def _commit_work(box: Toolbox, config: Json, task: Mapping[str, Any]) -> list[str]:
    """A worktree member's commit of what changed for `task` (CONTRACT §13)."""
    me = roster.find(config, box.member)
    record = me.get("worktree") if me else None
    if not record:
        return []
    try:
        with box.ws.store.apart():  # before the step's first write (`Store.together`)
            return worktrees.commit_task(box.team, box.member, record, task)
    except worktrees.GitError as exc:
        raise ToolError(f"task #{task['id']} stays in_progress: could not commit its "
                        f"work: {exc}") from None


def _why_not_claimable(box: Toolbox, task_id: int) -> str:
    tasks = {int(t["id"]): t for t in board.list_tasks(box.ws, box.team)}
    task = tasks[task_id]
    if task["status"] != "pending":
        return f"task #{task_id} is already {task['status']} (owner {task['owner']})"
    if task["owner"] not in (None, box.member):
        return f"task #{task_id} belongs to {task['owner']}; you cannot start it"
    waiting = [f"#{b}" for b in task["blocked_by"]
               if tasks.get(int(b), {}).get("status") != "completed"]
    return (f"task #{task_id} cannot start yet: it is blocked by {', '.join(waiting)} "
            "(not completed)")


def _not_yours(task_id: int, owner: str) -> str:
    return (f"task #{task_id} belongs to {owner}; a teammate updates only its own or an "
            f"unowned task: ask {owner} or the lead to hand it over")


def task_list(box: Toolbox) -> ToolResult:
    tasks = board.list_tasks(box.ws, box.team)
    if not tasks:
        return ToolResult("the task board is empty")
    return ToolResult("\n".join(task_line(t) for t in tasks))


# -- messages and plans --------------------------------------------------------------------
#: SendMessage types whose message takes the call's id, so that the call run again after a
#: restart delivers only where it had not landed and gives its real result (CONTRACT §6
#: Resume, §17): a team tool whose effect was recorded is not "interrupted"
REPLAYED = ("message", "broadcast")


def replayed(name: str, tool_input: Mapping[str, Any]) -> bool:
    """Whether a call cut off by a restart is run again on resume (`REPLAYED`)."""
    return name == "SendMessage" and tool_input.get("type", "message") in REPLAYED


def send_message(box: Toolbox, recipient: str, content: str, type: str = "message",
                 request_id: str | None = None, approve: bool | None = None,
                 reason: str | None = None, feedback: str | None = None,
                 summary: str | None = None) -> ToolResult:
    allowed = SEND_TYPES[box.kind]
    if type not in allowed:
        hint = " (submit plans with SubmitPlan)" if type == "plan_approval_request" else ""
        raise ToolError(f"a {box.kind} cannot send {type!r} messages; allowed: "
                        f"{', '.join(allowed)}{hint}")
    actions.check_answer_fields(type, request_id, approve, words=actions.TOOL_INPUTS)
    if type == "message" and recipient == "*":
        type = "broadcast"
    if type == "shutdown_response" and not approve:
        reason = reason or (content if content.strip() else None)  # why it must go on
    answer = type in ("plan_approval_response", "permission_response")
    # an answer goes to whoever asked: "*" (or the asker's name) for a plan or permission,
    # whatever `recipient` the model named for a shutdown; the feedback may be the text
    anyone = type in ("broadcast", "shutdown_response") or (answer and recipient == "*")
    sent = actions.route(
        box.ws, box.team, None if anyone else recipient,
        "" if answer else content, type_=type, sender=box.member, request_id=request_id,
        approve=approve, reason=None if answer else reason,
        feedback=(feedback if feedback is not None else content.strip() or None)
        if answer else feedback, summary=summary, words=actions.TOOL_INPUTS,
        pid=box.pid, message_id=box.call_id if type in REPLAYED else None)
    msg = sent.messages[0]
    if type == "broadcast":
        names = ", ".join(c["recipient"] for c in sent.messages)
        return ToolResult(f"broadcast to {len(sent.messages)} inbox(es): {names}")
    if type == "shutdown_request":
        rid = msg["request_id"]
        if sent.answered:
            return ToolResult(f"{recipient} has no running process: shut down on its "
                              f"behalf (request {rid} approved, reason: not running)")
        return ToolResult(f"shutdown request {rid} sent to {recipient}; its "
                          "shutdown_response will arrive in your inbox")
    if type == "message":
        return ToolResult(f"sent to {msg['recipient']} (id {msg['id']})")
    if type == "shutdown_response" and approve:
        return ToolResult(f"shutdown approved (request {request_id}, {msg['recipient']} "
                          "was told); stop now: end your turn without further tool calls "
                          "and this process exits", ends_process=True)
    if type == "shutdown_response":
        return ToolResult(f"shutdown refused (request {request_id}); {msg['recipient']} was "
                          "told why")
    if type == "plan_approval_response":
        verdict = "approved" if approve else "rejected"
        return ToolResult(f"plan {request_id} from {msg['recipient']} {verdict}; they were "
                          "told")
    record = requests.get(box.ws, box.team, str(request_id))
    verdict = "approved" if approve else "refused"
    return ToolResult(f"{permissions.describe(record)} {verdict} for {record['sender']} "
                      f"(request {request_id}); they were told")


def send_plan(box: Toolbox, plan: str) -> str:
    """Send `plan` to the lead as a plan_approval_request (CONTRACT §6); its request id.
    SubmitPlan's, and Claude Code's ExitPlanMode's (`claude_code.plan`)."""
    pending = box.pending_plan_id()
    if pending is not None:
        # one plan at a time (CONTRACT §6): a second would race the lead's answer
        raise ToolError(f"your plan {pending} is still waiting for the lead's answer; "
                        "end your turn and wait for the plan_approval_response")
    msg = actions.send(box.ws, box.team, LEAD, plan, type_="plan_approval_request",
                       sender=box.member)
    box.plan_submitted(msg["request_id"])
    return str(msg["request_id"])


def submit_plan(box: Toolbox, plan: str) -> ToolResult:
    request_id = send_plan(box, plan)
    return ToolResult(f"plan submitted to the lead (request_id {request_id}). Wait "
                      "for the lead's plan_approval_response in your inbox: end your turn "
                      "now. If approved, bash, write_file and edit_file open; if rejected, "
                      "revise along the feedback and submit again.")


# -- teams (lead only) ---------------------------------------------------------------------
def team_create(box: Toolbox, name: str, description: str = "") -> ToolResult:
    inbox.check_content(description)
    actions.create_team(box.ws, name, description)
    return ToolResult(f"created team {name}; add teammates with Task(team_name={name!r}, …)")


def team_delete(box: Toolbox, name: str) -> ToolResult:
    """Like `teamctl delete` without the wait: mark deleting, ask every live member to
    shut down; remove the folders now only if nobody is live and no supervisor runs."""
    done = actions.delete_team(box.ws, name, sender=box.member)
    if done["deleted"]:
        return ToolResult(f"deleted team {name}")
    said = actions.asked_to_shut_down(done["requests"])
    who = f"{said}; " if said else ""
    return ToolResult(f"team {name} is being deleted: {who}it accepts no new work, and its "
                      "folders are removed once every member has exited")


def spawn_teammate(box: Toolbox, name: str, prompt: str, team_name: str, role: str = "",
                   plan_mode_required: bool = False,
                   worktree: bool | None = None, effort: str = "",
                   runtime: str | None = None, host: str | None = None) -> ToolResult:
    if name == LEAD:
        raise ToolError("'lead' is the lead's own name; pick another name for a teammate")
    if not prompt.strip():
        raise ToolError("prompt must say what the teammate is for")
    # Teammates the lead spawns work in the lead's own working directory.
    member = actions.spawn(box.ws, team_name, name, prompt, role=role,
                           plan_mode=plan_mode_required, cwd=str(box.cwd), worktree=worktree,
                           effort=effort, runtime=runtime, host=host)
    gate = " in plan mode (it must get a plan approved before changing anything)" \
        if plan_mode_required else ""
    where = ""
    tree = member.get("worktree")
    if tree:
        where = (f" in its own worktree {tree['path']} (branch "
                 f"{tree['branch']}; each task it completes is a commit)")
    return ToolResult(f"spawned {member['agent_id']}{gate}{where}; the supervisor starts it. "
                      "Give it work with TaskCreate or SendMessage.")


#: tool name → handler: exactly the names of `tool_specs.TOOL_SPECS` (a test checks)
HANDLERS: dict[str, Handler] = {
    "bash": bash,
    "read_file": read_file_tool,
    "write_file": write_file_tool,
    "edit_file": edit_file_tool,
    "TaskCreate": task_create,
    "TaskGet": task_get,
    "TaskUpdate": task_update,
    "TaskList": task_list,
    "SendMessage": send_message,
    "SubmitPlan": submit_plan,
    "TeamCreate": team_create,
    "TeamDelete": team_delete,
    "Task": spawn_teammate,
}
