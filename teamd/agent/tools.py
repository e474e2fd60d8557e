"""The tools a member's model is given (CONTRACT.md §8): their specs and the `Toolbox` that
runs them.

This module owns the tool definitions (names, descriptions, JSON Schemas, in a stable order
for prompt caching), which tools each kind of member gets, input validation, the plan-mode
gate, and the team tools (task board, messages, plans, teams, spawning), which act through
the shared library as the member. The workspace tools live in `tools_files`. Nothing here
talks to the model API: the agent loop turns `specs_for(kind)` into API parameters and feeds
each `tool_use` to `Toolbox.run`, which never raises.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teamd import (
    actions,
    board,
    events,
    files,
    hooks,
    inbox,
    permissions,
    requests,
    roster,
)
from teamd import settings as settings_mod
from teamd.agent.session import INTERRUPTED
from teamd.agent.tools_files import (
    ToolError,
    check_command,
    edit_file,
    read_file,
    run_bash,
    write_file,
)
from teamd.errors import TeamdError
from teamd.files import Json
from teamd.layout import LEAD, Workspace

log = logging.getLogger(__name__)

__all__ = ["TOOL_SPECS", "ToolError", "ToolResult", "Toolbox", "specs_for", "tool_names"]

KINDS = ("teammate", "lead")
GATED = ("bash", "write_file", "edit_file")
INPUT_SHOWN = 200  # characters of each string input kept in a tool_call event
ERROR_SHOWN = 500  # characters of a failed tool's reason kept in its tool_call event
_IDS = {"type": "array", "items": {"type": "integer", "minimum": 1}}


def _spec(name: str, description: str, properties: dict[str, Any],
          required: list[str]) -> dict[str, Any]:
    return {"name": name, "description": description,
            "input_schema": {"type": "object", "properties": properties,
                             "required": required, "additionalProperties": False}}


# Insertion order is the order the model sees; it must not change between calls, or the
# cached prompt prefix (tools come first) is invalidated.
TOOL_SPECS: dict[str, dict[str, Any]] = {s["name"]: s for s in (
    _spec("bash",
          "Run a shell command with `bash -c` in your working directory and get its combined "
          "stdout and stderr plus the exit code. stdin is closed, so interactive commands "
          "fail: pass flags like `-y`. The command has a time limit (`timeout` seconds, "
          "capped by the team's setting); on timeout it and everything it started are "
          "killed. Anything still running when the command returns (background jobs) is "
          "killed too, so run long jobs in the foreground. Long output keeps only its start "
          "and end: filter with grep/head/tail. Obviously destructive commands (rm -rf /, "
          "mkfs, shutdown …) are refused.",
          {"command": {"type": "string", "minLength": 1,
                       "description": "The command line, run by bash."},
           "timeout": {"type": "number", "exclusiveMinimum": 0,
                       "description": "Seconds before the command is killed (optional)."}},
          ["command"]),
    _spec("read_file",
          "Read a text file inside your working directory (a path relative to it, or an "
          "absolute path inside it; paths that lead outside, also through symlinks, are "
          "refused). Returns the text as is; long files are cut at about 50,000 characters "
          "and say so. Use `limit` to read only the first lines; use bash (sed -n, grep) "
          "for a range in the middle.",
          {"path": {"type": "string", "minLength": 1, "description": "File to read."},
           "limit": {"type": "integer", "minimum": 1,
                     "description": "Read at most this many lines (optional)."}},
          ["path"]),
    _spec("write_file",
          "Create or overwrite a file inside your working directory with `content` "
          "(UTF-8). Missing parent folders are created. The whole file is replaced "
          "atomically; to change part of a file prefer edit_file.",
          {"path": {"type": "string", "minLength": 1, "description": "File to write."},
           "content": {"type": "string", "description": "The complete new content."}},
          ["path", "content"]),
    _spec("edit_file",
          "Replace one exact piece of text in a file inside your working directory. "
          "`old_text` must appear exactly once (copy it from read_file, whitespace and all; "
          "if it appears several times, include surrounding lines to make it unique).",
          {"path": {"type": "string", "minLength": 1, "description": "File to edit."},
           "old_text": {"type": "string", "minLength": 1,
                        "description": "The exact text to replace; must occur once."},
           "new_text": {"type": "string", "description": "The replacement text."}},
          ["path", "old_text", "new_text"]),
    _spec("TaskCreate",
          "Add a task to the team's shared task board. It starts `pending` with no owner. "
          "`blocked_by` lists task ids that must be completed before this one can start. "
          "Idle teammates claim the lowest-numbered unblocked, unowned task on their own.",
          {"subject": {"type": "string", "minLength": 1,
                       "description": "One line saying what is to be done."},
           "description": {"type": "string", "description": "Details (optional)."},
           "blocked_by": {**_IDS, "description": "Ids of tasks this one waits on (optional)."}},
          ["subject"]),
    _spec("TaskGet",
          "Show one task of the board in full (JSON): subject, description, status, owner, "
          "blocked_by, blocks and timestamps.",
          {"task_id": {"type": "integer", "minimum": 1, "description": "The task's id."}},
          ["task_id"]),
    _spec("TaskUpdate",
          "Change a task on the board. Start a task with status `in_progress` (it becomes "
          "yours if it has no owner; a task that is blocked or owned by someone else cannot "
          "be started this way), and set `completed` as soon as it is done, so the tasks it "
          "blocks become available. `owner` assigns the task to a team member by name "
          "(null clears it). `add_blocked_by` / `add_blocks` add dependencies (cycles are "
          "refused).",
          {"task_id": {"type": "integer", "minimum": 1, "description": "The task's id."},
           "status": {"type": "string", "enum": list(board.STATUSES),
                      "description": "New status (optional)."},
           "owner": {"type": ["string", "null"],
                     "description": "Member name to own the task, or null for none "
                                    "(optional)."},
           "add_blocked_by": {**_IDS, "description": "Task ids this task must wait for."},
           "add_blocks": {**_IDS, "description": "Task ids that must wait for this task."}},
          ["task_id"]),
    _spec("TaskList",
          "List every task on the board, one line each: id, status, owner, the ids it is "
          "blocked by, and subject.",
          {}, []),
    _spec("SendMessage",
          "Send a message to a team member's inbox (the lead is `lead`). Types:\n"
          "- `message` (default): text to one member, named by `recipient`.\n"
          "- `broadcast`: the same text to every running member and the lead (`recipient` "
          "is ignored; use \"*\"). Use sparingly.\n"
          "- `shutdown_response`: your answer to a shutdown_request you received. Give "
          "`request_id` from that request and `approve` true or false; `recipient` is who "
          "asked (usually `lead`). Approving ends your work: this process stops after the "
          "turn. To refuse, set approve false with a `reason`, then carry on.\n"
          "- `shutdown_request` (lead only): ask `recipient` to stop; `reason` says why. "
          "The answer arrives in your inbox.\n"
          "- `plan_approval_response` (lead only): answer a plan_approval_request with its "
          "`request_id`, `approve`, and `feedback` (required when rejecting).\n"
          "- `permission_response` (lead only): answer a permission_request (a teammate's "
          "tool call that waits for your go) with its `request_id` and `approve`; "
          "`feedback` tells the teammate why when refusing.\n"
          "`summary` is an optional one-line gist for listings.",
          {"recipient": {"type": "string", "description": "Member name, `lead`, or \"*\" "
                                                          "for a broadcast."},
           "content": {"type": "string", "description": "The message text."},
           # No enum: which types are allowed depends on the sender's kind, and the
           # handler's refusal says so, which an enum failure could not.
           "type": {"type": "string",
                    "description": "message (default), broadcast, shutdown_response; "
                                   "the lead also shutdown_request, plan_approval_response, "
                                   "permission_response."},
           "request_id": {"type": "string", "description": "For shutdown_response, "
                          "plan_approval_response and permission_response."},
           "approve": {"type": "boolean", "description": "For shutdown_response, "
                       "plan_approval_response and permission_response."},
           "reason": {"type": "string", "description": "Why (shutdown_request, or refusing "
                                                       "a shutdown)."},
           "feedback": {"type": "string", "description": "For plan_approval_response and "
                                                        "permission_response."},
           "summary": {"type": "string", "description": "One line for listings (optional)."}},
          ["recipient", "content"]),
    _spec("SubmitPlan",
          "Submit your plan to the lead for approval. In plan mode bash, write_file and "
          "edit_file are refused until a plan is approved: read and explore first, then "
          "submit a concrete plan (what you will change, where, how you will check it). The "
          "lead's plan_approval_response arrives in your inbox: on approval the tools open; "
          "on rejection revise the plan along the feedback and submit again.",
          {"plan": {"type": "string", "minLength": 1, "description": "The plan, in prose or "
                                                                     "as a list of steps."}},
          ["plan"]),
    _spec("TeamCreate",
          "Create a new, empty team (its roster, inboxes and task board).",
          {"name": {"type": "string", "description": "Team name: a-z, 0-9, '-' and '_'."},
           "description": {"type": "string", "description": "What the team is for."}},
          ["name"]),
    _spec("TeamDelete",
          "Delete a team: it stops accepting work, every running member is asked to shut "
          "down, and its folders are removed once all of them have exited.",
          {"name": {"type": "string", "description": "The team to delete."}},
          ["name"]),
    _spec("Task",
          "Spawn a new teammate: an autonomous agent process in team `team_name`, started by "
          "the supervisor. `prompt` is its standing instruction; give it work through the "
          "task board (TaskCreate) or SendMessage. With `plan_mode_required` it may only "
          "read until you approve a plan it submits.",
          {"name": {"type": "string", "description": "Member name: a-z, 0-9, '-', '_'."},
           "prompt": {"type": "string", "minLength": 1,
                      "description": "What this teammate is for and how to work."},
           "team_name": {"type": "string", "description": "The team to join."},
           "role": {"type": "string", "description": "Short role, e.g. 'backend engineer'."},
           "plan_mode_required": {"type": "boolean",
                                  "description": "Read-only until its plan is approved."}},
          ["name", "prompt", "team_name"]),
)}

_LEAD_ONLY = ("TeamCreate", "TeamDelete", "Task")
_KIND_TOOLS: dict[str, tuple[str, ...]] = {
    "teammate": tuple(n for n in TOOL_SPECS if n not in _LEAD_ONLY),
    "lead": tuple(n for n in TOOL_SPECS if n != "SubmitPlan"),
}
_SEND_TYPES = {"teammate": ("message", "broadcast", "shutdown_response"),
               "lead": ("message", "broadcast", "shutdown_response", "shutdown_request",
                        "plan_approval_response", "permission_response")}
_ANSWERS = ("shutdown_response", "plan_approval_response", "permission_response")


def tool_names(kind: str) -> list[str]:
    """The tools a member of `kind` ("teammate" or "lead") gets, in spec order."""
    if kind not in _KIND_TOOLS:
        raise ValueError(f"unknown member kind {kind!r}; one of: {', '.join(KINDS)}")
    return list(_KIND_TOOLS[kind])


def specs_for(kind: str) -> list[dict[str, Any]]:
    """Tool definitions for `kind`, always in the same order (prompt caching)."""
    return [TOOL_SPECS[name] for name in tool_names(kind)]


# -- input validation --------------------------------------------------------------------
_PY_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "array": (list,), "object": (dict,), "null": (type(None),)}


def _type_ok(value: Any, types: list[str]) -> bool:
    for t in types:
        if isinstance(value, bool) and t in ("integer", "number"):
            continue  # JSON true is not a number
        if isinstance(value, _PY_TYPES[t]):
            return True
    return False


def _check_value(where: str, value: Any, schema: dict[str, Any]) -> None:
    types = schema.get("type", [])
    types = [types] if isinstance(types, str) else types
    if types and not _type_ok(value, types):
        raise ToolError(f"{where} must be {' or '.join(types)}, got {type(value).__name__} "
                        f"{_short(value, 40)!r}")
    if "enum" in schema and value not in schema["enum"]:
        raise ToolError(f"{where} must be one of {', '.join(map(str, schema['enum']))}; "
                        f"got {value!r}")
    if isinstance(value, str) and len(value) < schema.get("minLength", 0):
        raise ToolError(f"{where} must not be empty")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            raise ToolError(f"{where} must be at least {schema['minimum']}, got {value}")
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            raise ToolError(f"{where} must be more than {schema['exclusiveMinimum']}, "
                            f"got {value}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            _check_value(f"{where}[{i}]", item, schema["items"])


def validate_input(name: str, tool_input: Any) -> dict[str, Any]:
    """Check `tool_input` against the tool's schema; ToolError says what is wrong."""
    schema = TOOL_SPECS[name]["input_schema"]
    if not isinstance(tool_input, dict):
        raise ToolError(f"{name} input must be a JSON object, got {type(tool_input).__name__}")
    props: dict[str, Any] = schema["properties"]
    unknown = sorted(set(tool_input) - set(props))
    if unknown:
        allowed = ", ".join(props) or "none"
        raise ToolError(f"{name} has no input {', '.join(map(repr, unknown))}; "
                        f"allowed: {allowed}")
    missing = [k for k in schema["required"] if k not in tool_input]
    if missing:
        raise ToolError(f"{name} needs {', '.join(map(repr, missing))}")
    for key, value in tool_input.items():
        _check_value(f"{name}.{key}", value, props[key])
    return tool_input


def _short(value: Any, limit: int = INPUT_SHOWN) -> Any:
    """`value` with every string cut to `limit` characters and long lists to 20 items."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + f"… ({len(value)} chars)"
    if isinstance(value, dict):
        return {str(k): _short(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_short(v, limit) for v in value[:20]] + (["…"] if len(value) > 20 else [])
    return value


def _redact(text: str) -> str:
    """Never hand the API credentials to the model, whatever a tool read or printed."""
    for key in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        secret = os.environ.get(key, "")
        if len(secret) >= 8 and secret in text:
            text = text.replace(secret, f"[{key} redacted]")
    return text


def task_line(task: Json) -> str:
    """One compact line for a task: `#2 [pending] owner=- blocked_by=#1: subject`."""
    blocked = ",".join(f"#{b}" for b in task.get("blocked_by") or []) or "-"
    return (f"#{task['id']} [{task['status']}] owner={task.get('owner') or '-'} "
            f"blocked_by={blocked}: {task['subject']}")


@dataclass
class ToolResult:
    content: str
    is_error: bool = False


class Blocked(ToolError):
    """A refusal whose text reaches the model as written, lines and all (a hook's reason,
    a person's feedback): not squeezed onto one line like other tool errors. `reason` is
    the hook's own words, without the line saying which hook blocked."""

    def __init__(self, text: str, reason: str | None = None) -> None:
        super().__init__(text)
        self.reason = text if reason is None else reason


class Toolbox:
    """Runs the tools of one member (`member` of `team`, of `kind`) against the workspace.

    `run` never raises: every failure, bad input included, comes back as an error result.
    After a successful approving `shutdown_response`, `shutdown_approved` is True and
    `shutdown_request_id` names the request: the agent loop then records the stop and exits.
    """

    def __init__(self, ws: Workspace, team: str, member: str, *, kind: str, cwd: Path,
                 bash_timeout: float, plan_mode_required: bool,
                 joined_at: float | None = None,
                 waiter: Callable[[str], Json] | None = None) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown member kind {kind!r}; one of: {', '.join(KINDS)}")
        self.ws = ws
        self.team = team
        self.member = member
        self.kind = kind
        self.cwd = Path(cwd)
        if bash_timeout <= 0:
            log.warning("bash_timeout %r is not positive; using 120 s", bash_timeout)
            bash_timeout = 120.0
        self.bash_timeout = float(bash_timeout)
        self.plan_mode_required = plan_mode_required
        self.joined_at = joined_at
        # the request id of this member's plan awaiting the lead; None once answered.
        # Looked up on disk once (a plan submitted before a restart), then kept here.
        self._pending_plan: str | None = None
        self._pending_plan_known = False
        self.names = frozenset(tool_names(kind))
        self.shutdown_approved = False
        self.shutdown_request_id: str | None = None
        #: blocks until a permission request is answered, returns its record (the agent
        #: loop's, which keeps taking in the inbox meanwhile); None: asks are refused
        self.waiter = waiter
        self.conf = settings_mod.load_or_keep(ws, settings_mod.Settings())
        self._use_id: str | None = None

    def settings(self) -> settings_mod.Settings:
        """teamd.toml as it is now: rules and hooks apply from the next tool call."""
        self.conf = settings_mod.load_or_keep(self.ws, self.conf)
        return self.conf

    def permission_record(self, tool_use_id: str) -> Json | None:
        """The permission request this tool call opened, if it opened one."""
        rid = permissions.request_id_for(self.team, self.member, tool_use_id)
        try:
            return files.read_json(self.ws.request(self.team, rid))
        except TeamdError:
            return None

    # -- entry point -----------------------------------------------------------------------
    def run(self, name: str, tool_input: dict[str, Any],
            tool_use_id: str | None = None) -> ToolResult:
        """Run one tool call; any failure becomes an error result. Emits `tool_call`.
        `tool_use_id` ties a permission request to the call (one request per call, found
        again after a restart)."""
        started = time.monotonic()
        self._use_id = tool_use_id
        try:
            result = self._dispatch(name, tool_input)
        except Blocked as exc:
            result = ToolResult(str(exc).strip() or "blocked", is_error=True)
        except (ToolError, TeamdError) as exc:
            result = ToolResult(_one_line(str(exc)), is_error=True)
        except Exception as exc:  # a tool error must never end the process
            log.warning("tool %s failed", name, exc_info=True)
            text = f"{name} failed: {type(exc).__name__}: {exc}"
            result = ToolResult(_one_line(text), is_error=True)
        result.content = _redact(result.content)
        ms = int((time.monotonic() - started) * 1000)
        try:
            if not self.ws.team_dir(self.team).is_dir():
                # The team was just deleted (TeamDelete of one's own team): journalling now
                # would recreate its folder, since the lock file's parents get created.
                return result
            shown = json.loads(_redact(json.dumps(_short(tool_input), default=str)))
            why = {"error": _one_line(result.content)[:ERROR_SHOWN]} if result.is_error else {}
            events.emit(self.ws, self.team, "tool_call", member=self.member,
                        tool=str(name)[:INPUT_SHOWN], input=shown, ok=not result.is_error,
                        ms=ms, **why)
        except Exception:  # the journal is history, not control: never fail a tool over it
            log.warning("could not journal tool_call %s", name, exc_info=True)
        return result

    def _dispatch(self, name: str, tool_input: Any) -> ToolResult:
        if not isinstance(name, str) or name not in TOOL_SPECS:
            raise ToolError(f"unknown tool {name!r}; available: {', '.join(sorted(self.names))}")
        if name not in self.names:
            raise ToolError(f"{name} is not available to a {self.kind}")
        args = validate_input(name, tool_input)
        if name in GATED:
            self._check_plan_gate()
        approved = None
        if name in permissions.RULED:
            approved = self._permit(name, args)
            self.run_hook("pre_tool_use", tool=name, tool_input=args)
            if approved is not None and not requests.set_flag(
                    self.ws, self.team, approved, "ran", when_status="approved")["changed"]:
                # it ran before a restart (ran is set just before running): never twice
                raise ToolError(INTERRUPTED)
        handler = getattr(self, f"_tool_{name}")
        out = handler(**args)
        return out if isinstance(out, ToolResult) else ToolResult(str(out))

    # -- permissions and hooks (CONTRACT §11) ----------------------------------------------
    def _permit(self, name: str, args: dict[str, Any]) -> str | None:
        """Apply the rules to a ruled call: None to go ahead, the id of an approved
        permission request (its `ran` is set just before the call runs), or ToolError.
        A request this call opened before a restart is the truth, whatever the rules
        say now: waited on again if pending, never run twice once approved."""
        record = self.permission_record(self._use_id) if self._use_id else None
        if record is None:
            conf = self.settings()
            verdict = permissions.decide(conf.permissions,
                                         permissions.always_rules(self.ws, self.team),
                                         name, args, self.cwd)
            if verdict.action == "allow":
                return None
            argument = permissions.main_argument(name, args, self.cwd)
            if verdict.action == "deny":
                permissions.journal_denied(self.ws, self.team, self.member, name, argument,
                                           verdict.rule)
                raise ToolError(f'denied by rule "{verdict.rule}"')
            if self.waiter is None:
                raise ToolError(f'needs permission (rule "{verdict.rule}"), and nobody can '
                                "be asked from here")
            record = {"tool": name, "argument": argument, "rule": verdict.rule,
                      "request_id": permissions.request_id_for(self.team, self.member,
                                                               self._use_id)}
        rid = record["request_id"]
        if record.get("status", "pending") == "pending":
            # the LLM lead's own asks go to the person beside it (CONTRACT §11)
            recipient = "user" if self.kind == "lead" else LEAD
            permissions.open_ask(self.ws, self.team, self.member, recipient, name, args,
                                 record["argument"], record["rule"], rid)
            assert self.waiter is not None
            record = self.waiter(rid)
        if record["status"] != "approved":
            raise Blocked(permissions.refused_text(record))
        return str(rid)

    def run_hook(self, hook: str, **event: Any) -> None:
        """Run the `[hooks]` command for `hook`, if one is set; Blocked on exit 2 (the
        agent loop runs `teammate_idle` through here too)."""
        conf = self.settings()
        command = conf.hooks.get(hook)
        if not command:
            return
        outcome = hooks.run(self.ws, self.team, self.member, self.cwd, hook, command,
                            conf.hook_timeout, **event)
        if outcome.blocked:
            raise Blocked(outcome.message(), outcome.reason or "(the hook said nothing)")

    def _check_plan_gate(self) -> None:
        # Read from requests/ on every call: the gate survives restarts and opens the moment
        # the lead approves, without the loop having to tell us.
        if self.plan_mode_required and not requests.plan_approved(
                self.ws, self.team, self.member, since=self.joined_at):
            raise ToolError("plan mode: submit a plan with SubmitPlan and wait for the lead's "
                            "approval; until then bash, write_file and edit_file are "
                            "refused (read_file works)")

    # -- workspace tools ---------------------------------------------------------------------
    def _tool_bash(self, command: str, timeout: float | None = None) -> ToolResult:
        check_command(command)
        limit = self.bash_timeout if timeout is None else min(float(timeout), self.bash_timeout)
        outcome = run_bash(command, self.cwd, limit)
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

    def _tool_read_file(self, path: str, limit: int | None = None) -> str:
        return read_file(self.cwd, path, limit)

    def _tool_write_file(self, path: str, content: str) -> str:
        return write_file(self.cwd, path, content)

    def _tool_edit_file(self, path: str, old_text: str, new_text: str) -> str:
        return edit_file(self.cwd, path, old_text, new_text)

    # -- task board --------------------------------------------------------------------------
    def _tool_TaskCreate(self, subject: str, description: str = "",
                         blocked_by: list[int] | None = None) -> str:
        actions.require_team(self.ws, self.team, accepting=True)
        inbox.check_content(subject)
        inbox.check_content(description)
        self.run_hook("task_created", task={"subject": subject, "description": description,
                                             "blocked_by": blocked_by or [],
                                             "created_by": self.member})
        task = board.create(self.ws, self.team, subject, description, blocked_by or (),
                            created_by=self.member)
        return f"created task {task_line(task)}"

    def _tool_TaskGet(self, task_id: int) -> str:
        task = board.get(self.ws, self.team, task_id)
        return json.dumps({k: v for k, v in task.items() if k != "schema"}, ensure_ascii=False)

    def _tool_TaskUpdate(self, task_id: int, status: str | None = None, **rest: Any) -> str:
        config = actions.require_team(self.ws, self.team)
        task = board.get(self.ws, self.team, task_id)
        owner: Any = board.UNSET
        if "owner" in rest:
            owner = rest["owner"] or None  # "" from a model means "nobody", like null
            if owner is not None:
                roster.get(config, owner)
        if self.kind == "teammate" and task["owner"] not in (None, self.member):
            # only a task it owns or an unowned one (CONTRACT §8): the lead may touch any
            raise ToolError(f"task #{task_id} belongs to {task['owner']}; ask them or the "
                            "lead to hand it over")
        add_blocked_by = rest.get("add_blocked_by") or []
        add_blocks = rest.get("add_blocks") or []
        # Starting a task for oneself goes through `claim`, which re-checks claimability
        # under the board lock: two members racing for one task cannot both win.
        mine = owner == self.member or (owner is board.UNSET
                                        and task["owner"] in (None, self.member))
        if status == "in_progress" and task["status"] == "pending" and mine:
            if add_blocked_by or add_blocks:
                board.update(self.ws, self.team, task_id, add_blocked_by=add_blocked_by,
                             add_blocks=add_blocks, actor=self.member)
            claimed = board.claim(self.ws, self.team, self.member, task_id)
            if claimed is None:
                raise ToolError(self._why_not_claimable(task_id))
            return f"started {task_line(claimed)}"
        if status == "completed" and task["status"] != "completed":
            # the quality gate: a blocking hook leaves the task as it is (in_progress)
            self.run_hook("task_completed", task=task)
        task = board.update(self.ws, self.team, task_id, status=status, owner=owner,
                            add_blocked_by=add_blocked_by, add_blocks=add_blocks,
                            actor=self.member)
        return f"updated {task_line(task)}"

    def _why_not_claimable(self, task_id: int) -> str:
        tasks = {int(t["id"]): t for t in board.list_tasks(self.ws, self.team)}
        task = tasks[task_id]
        if task["status"] != "pending":
            return f"task #{task_id} is already {task['status']} (owner {task['owner']})"
        if task["owner"] not in (None, self.member):
            return f"task #{task_id} belongs to {task['owner']}; you cannot start it"
        waiting = [f"#{b}" for b in task["blocked_by"]
                   if tasks.get(int(b), {}).get("status") != "completed"]
        return (f"task #{task_id} cannot start yet: it is blocked by {', '.join(waiting)} "
                "(not completed)")

    def _tool_TaskList(self) -> str:
        tasks = board.list_tasks(self.ws, self.team)
        if not tasks:
            return "the task board is empty"
        return "\n".join(task_line(t) for t in tasks)

    # -- messages and plans ------------------------------------------------------------------
    def _tool_SendMessage(self, recipient: str, content: str, type: str = "message",
                          request_id: str | None = None, approve: bool | None = None,
                          reason: str | None = None, feedback: str | None = None,
                          summary: str | None = None) -> str:
        allowed = _SEND_TYPES[self.kind]
        if type not in allowed:
            hint = " (submit plans with SubmitPlan)" if type == "plan_approval_request" else ""
            raise ToolError(f"a {self.kind} cannot send {type!r} messages; allowed: "
                            f"{', '.join(allowed)}{hint}")
        answers = type in _ANSWERS
        if not answers and (request_id is not None or approve is not None):
            raise ToolError(f"request_id and approve only apply to {', '.join(_ANSWERS)}; "
                            "leave them out of a " + type)
        if answers and (not request_id or approve is None):
            raise ToolError(f"{type} needs the request_id of the request it answers and "
                            "approve (true or false)")
        if type == "broadcast" or (type == "message" and recipient == "*"):
            copies = actions.broadcast(self.ws, self.team, content, sender=self.member,
                                       summary=summary)
            names = ", ".join(c["recipient"] for c in copies)
            return f"broadcast to {len(copies)} inbox(es): {names}"
        if type == "shutdown_request":
            if reason is not None:
                inbox.check_content(reason)
            done = actions.shutdown(self.ws, self.team, recipient, sender=self.member,
                                    reason=reason or content)
            rid = done["request"]["request_id"]
            if done["answered"]:
                return (f"{recipient} has no running process: shut down on its behalf "
                        f"(request {rid} approved, reason: not running)")
            return (f"shutdown request {rid} sent to {recipient}; its shutdown_response will "
                    "arrive in your inbox")
        if type == "plan_approval_response":
            assert request_id is not None and approve is not None
            return self._answer_plan(recipient, content, request_id, approve, feedback)
        if type == "permission_response":
            assert request_id is not None and approve is not None
            return self._answer_permission(recipient, content, request_id, approve, feedback)
        if type == "shutdown_response":
            assert request_id is not None and approve is not None
            if not approve and not (reason or content.strip()):
                raise ToolError("refusing a shutdown needs a reason (why you must go on)")
            msg = actions.send(self.ws, self.team, recipient, content, type_=type,
                               sender=self.member, request_id=request_id, approve=approve,
                               reason=reason if reason or approve else content,
                               summary=summary)
            if approve:
                self.shutdown_approved = True
                self.shutdown_request_id = request_id
                return (f"shutdown approved (request {request_id}); stop now: end your turn "
                        "without further tool calls and this process exits")
            return f"shutdown refused (request {request_id}); {msg['recipient']} was told why"
        msg = actions.send(self.ws, self.team, recipient, content, type_=type,
                           sender=self.member, summary=summary)
        return f"sent to {msg['recipient']} (id {msg['id']})"

    def _answer_plan(self, recipient: str, content: str, request_id: str, approve: bool,
                     feedback: str | None) -> str:
        record = requests.get(self.ws, self.team, request_id)
        if record["kind"] != "plan_approval":
            raise ToolError(f"request {request_id!r} is a {record['kind']} request, not a plan")
        if recipient not in (record["sender"], "*"):
            raise ToolError(f"plan request {request_id!r} came from {record['sender']}, not "
                            f"{recipient}; answer it to {record['sender']}")
        text = feedback if feedback is not None else (content.strip() or None)
        if not approve and not text:
            raise ToolError("rejecting a plan needs feedback saying what to change")
        actions.answer_plan(self.ws, self.team, request_id, approve, feedback=text)
        verdict = "approved" if approve else "rejected"
        return f"plan {request_id} from {record['sender']} {verdict}; they were told"

    def plan_pending(self) -> str | None:
        """The id of this member's plan request still awaiting the lead, or None. One
        file read while a plan is pending; nothing at all once it is answered."""
        if not self._pending_plan_known:
            found = requests.pending_plan(self.ws, self.team, self.member)
            self._pending_plan = found["request_id"] if found else None
            self._pending_plan_known = True
        if self._pending_plan is not None:
            try:
                status = requests.get(self.ws, self.team, self._pending_plan)["status"]
            except TeamdError:
                status = "gone"
            if status != "pending":
                self._pending_plan = None
        return self._pending_plan

    def _answer_permission(self, recipient: str, content: str, request_id: str, approve: bool,
                           feedback: str | None) -> str:
        record = requests.get(self.ws, self.team, request_id)
        if record["kind"] != "permission":
            raise ToolError(f"request {request_id!r} is a {record['kind']} request, not a "
                            "permission request")
        if record["recipient"] != self.member:
            raise ToolError(f"permission request {request_id!r} was sent to "
                            f"{record['recipient']}; only they answer it")
        if recipient not in (record["sender"], "*"):
            raise ToolError(f"permission request {request_id!r} came from {record['sender']}, "
                            f"not {recipient}; answer it to {record['sender']}")
        text = feedback if feedback is not None else (content.strip() or None)
        if not approve and not text:
            raise ToolError("refusing a permission needs feedback saying why (or what to do "
                            "instead)")
        actions.answer_request(self.ws, self.team, request_id, approve, feedback=text)
        verdict = "approved" if approve else "refused"
        return (f"{permissions.describe(record)} {verdict} for {record['sender']} "
                f"(request {request_id}); they were told")

    def _tool_SubmitPlan(self, plan: str) -> str:
        pending = self.plan_pending()
        if pending is not None:
            # one plan at a time (CONTRACT §6): a second would race the lead's answer
            raise ToolError(f"your plan {pending} is still waiting for the lead's answer; "
                            "end your turn and wait for the plan_approval_response")
        msg = actions.send(self.ws, self.team, LEAD, plan, type_="plan_approval_request",
                           sender=self.member)
        self._pending_plan, self._pending_plan_known = msg["request_id"], True
        return (f"plan submitted to the lead (request_id {msg['request_id']}). Wait for the "
                "lead's plan_approval_response in your inbox: end your turn now. If approved, "
                "bash, write_file and edit_file open; if rejected, revise along the feedback "
                "and submit again.")

    # -- teams (lead only) -------------------------------------------------------------------
    def _tool_TeamCreate(self, name: str, description: str = "") -> str:
        inbox.check_content(description)
        actions.create_team(self.ws, name, description)
        return f"created team {name}; add teammates with Task(team_name={name!r}, …)"

    def _tool_TeamDelete(self, name: str) -> str:
        """Like `teamctl delete` without the wait: mark deleting, ask every live member to
        shut down; remove the folders now only if nobody is live and no supervisor runs."""
        opened = actions.begin_delete(self.ws, name, sender=self.member)
        asked = [r["recipient"] for r in opened]
        if actions.finish_delete(self.ws, name):
            return f"deleted team {name}"
        who = f"asked {', '.join(asked)} to shut down; " if asked else ""
        return (f"team {name} is being deleted: {who}it accepts no new work, and its folders "
                "are removed once every member has exited")

    def _tool_Task(self, name: str, prompt: str, team_name: str, role: str = "",
                   plan_mode_required: bool = False) -> str:
        if name == LEAD:
            raise ToolError("'lead' is the lead's own name; pick another name for a teammate")
        if not prompt.strip():
            raise ToolError("prompt must say what the teammate is for")
        # Teammates the lead spawns work in the lead's own working directory.
        member = actions.spawn(self.ws, team_name, name, prompt, role=role,
                               plan_mode=plan_mode_required, cwd=str(self.cwd))
        gate = " in plan mode (it must get a plan approved before changing anything)" \
            if plan_mode_required else ""
        return (f"spawned {member['agent_id']}{gate}; the supervisor starts it. Give it work "
                "with TaskCreate or SendMessage.")


def _one_line(text: str) -> str:
    return re.sub(r"\s*\n\s*", " ", text).strip() or "failed"
