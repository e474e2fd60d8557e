"""The `Toolbox`: runs one member's tool calls (CONTRACT.md §8, §11, §15).

A call goes: known tool and allowed to this kind → input checked against its schema
(`tool_input`) → the plan-mode gate → the permission rules and `pre_tool_use` hook (ruled
tools) → the fence → its handler (`tool_handlers.HANDLERS`) → the result, redacted of the
API key, journalled as `tool_call` and recorded by the caller — the handler's writes, the
line and the record as one step (`Store.together`: on PostgreSQL one transaction, CONTRACT
§15), so a team tool interrupted by a kill or a failover is done and recorded, or neither.
The toolbox also owns what is the member's own while it runs: the process groups of its
running commands and hooks (killed by the agent loop's SIGTERM handler), its pending plan,
and the settings in force.

The names other modules import from here (`TOOL_SPECS`, `specs_for`, `tool_names`,
`ToolResult`, `ToolError`, `Blocked`) are re-exported from the modules that own them.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from teamd import apikey, events, hooks, permission_rules, permissions, requests
from teamd import settings as settings_mod
from teamd.agent import protected
from teamd.agent.session import INTERRUPTED
from teamd.agent.tool_handlers import HANDLERS, Blocked, ToolResult, task_line
from teamd.agent.tool_input import INPUT_SHOWN, short, validate_input
from teamd.agent.tool_specs import GATED, KINDS, TOOL_SPECS, specs_for, tool_names
from teamd.agent.tools_files import ToolError, confine
from teamd.errors import TeamdError
from teamd.files import Json
from teamd.layout import LEAD, USER, Workspace
from teamd.pgroup import kill_group

log = logging.getLogger(__name__)

__all__ = ["TOOL_SPECS", "Blocked", "ToolError", "ToolResult", "Toolbox", "specs_for",
           "task_line", "tool_names", "validate_input"]

ERROR_SHOWN = 500  # characters of a failed tool's reason kept in its tool_call event


def _redact(text: str) -> str:
    """Never hand the API credentials to the model, whatever a tool read or printed."""
    for key, secret in ((apikey.KEY_ENV, apikey.get() or ""),
                        ("ANTHROPIC_AUTH_TOKEN", os.environ.get("ANTHROPIC_AUTH_TOKEN", ""))):
        if len(secret) >= 8 and secret in text:
            text = text.replace(secret, f"[{key} redacted]")
    return text


def _one_line(text: str) -> str:
    return re.sub(r"\s*\n\s*", " ", text).strip() or "failed"


def _failed(name: str, exc: Exception) -> ToolResult:
    """The error result of a call that raised `exc`."""
    if isinstance(exc, Blocked):
        return ToolResult(str(exc).strip() or "blocked", is_error=True)
    if isinstance(exc, (ToolError, TeamdError)):
        return ToolResult(_one_line(str(exc)), is_error=True)
    log.warning("tool %s failed", name, exc_info=exc)  # a tool error never ends the process
    return ToolResult(_one_line(f"{name} failed: {type(exc).__name__}: {exc}"), is_error=True)


class _Undone(Exception):
    """A handler raised inside its step (`Toolbox.run`): the step is rolled back, then
    `result`, the error, is recorded on its own."""

    def __init__(self, result: ToolResult) -> None:
        super().__init__(result.content)
        self.result = result


def journal_call(ws: Workspace, team: str, member: str, name: str, tool_input: Any,
                 result: ToolResult, ms: int) -> None:
    """The `tool_call` event of a call that ran (its input cut short and redacted, the
    reason of a failure), whichever agent ran it."""
    try:
        if not ws.store.team_exists(team):
            # The team was just deleted (TeamDelete of one's own team): journalling now
            # would recreate its folder, since the lock file's parents get created.
            return
        shown = json.loads(_redact(json.dumps(short(tool_input), default=str)))
        why = {"error": _one_line(result.content)[:ERROR_SHOWN]} if result.is_error else {}
        events.emit(ws, team, "tool_call", member=member, tool=str(name)[:INPUT_SHOWN],
                    input=shown, ok=not result.is_error, ms=ms, **why)
    except Exception:  # the journal is history, not control: never fail a tool over it
        log.warning("could not journal tool_call %s", name, exc_info=True)


class Toolbox:
    """Runs the tools of one member (`member` of `team`, of `kind`) against the workspace.

    `run` raises only when it cannot record a result: every failure of the call, bad input
    included, comes back as an error result, and what the loop must do next (a task
    claimed, a shutdown approved) comes back in the result. `groups` holds the process
    groups of the commands and hooks running now: `kill_running` takes them down (the agent
    loop's SIGTERM handler).
    """

    def __init__(self, ws: Workspace, team: str, member: str, *, kind: str, cwd: Path,
                 bash_timeout: float, plan_mode_required: bool,
                 joined_at: float | None = None,
                 waiter: Callable[[str], Json] | None = None,
                 conf: settings_mod.Settings | None = None, pid: int | None = None) -> None:
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
        #: process groups of this member's `bash` calls and hooks now running
        self.groups: set[int] = set()
        #: blocks until a permission request is answered, returns its record (the agent
        #: loop's, which keeps taking in the inbox meanwhile); None: asks are refused
        self.waiter = waiter
        # `conf`: the settings in force (the member's, from the supervisor that forked it):
        # a broken teamd.toml keeps them, never falls back to no rules and no hooks
        self.conf = conf if conf is not None else settings_mod.load(ws)
        self._use_id: str | None = None
        #: the member process it acts for (its own, or the one a helper serves)
        self.pid = os.getpid() if pid is None else pid

    @property
    def call_id(self) -> str | None:
        """The `tool_use` id of the call running now (None outside one)."""
        return self._use_id

    def kill_running(self) -> None:
        """SIGKILL the process group of every command and hook running now, so a member
        stopped mid-call leaves nothing behind."""
        for pgid in list(self.groups):
            kill_group(pgid)

    def settings(self) -> settings_mod.Settings:
        """teamd.toml as it is now: rules and hooks apply from the next tool call."""
        self.conf = settings_mod.load_or_keep(self.ws, self.conf)
        return self.conf

    def permission_record(self, tool_use_id: str) -> Json | None:
        """The permission request this tool call opened, if it opened one."""
        rid = permissions.request_id_for(self.team, self.member, tool_use_id)
        try:
            return self.ws.store.read_request(self.team, rid)
        except TeamdError:
            return None

    # -- entry point -----------------------------------------------------------------------
    def run(self, name: str, tool_input: dict[str, Any], tool_use_id: str | None = None,
            record: Callable[[ToolResult], None] | None = None) -> ToolResult:
        """Run one tool call; any failure of the call becomes an error result. Emits
        `tool_call`. `tool_use_id` ties a permission request to the call (one request per
        call, found again after a restart). `record` records the result in the member's
        session: in one step with the call's effect and its `tool_call` line
        (`Store.together`; CONTRACT §15: on PostgreSQL, one transaction), so a call cut
        off is either done and recorded or neither. What `admit` passes (the rules, an
        ask, the pre_tool_use hook) and the fence run before that step; a handler that
        raises leaves nothing of its step, and its error result is recorded on its own.
        What cannot record the result — the step's end failing (the store out of reach:
        StoreUnreachable; the lease lost: LeaseLost) — is raised: the member then ends,
        and its restart resumes from what the store holds, the result or neither."""
        started = time.monotonic()
        self._use_id = tool_use_id
        try:
            args = self._admitted(name, tool_input)
        except Exception as exc:
            return self._conclude(name, tool_input, _failed(name, exc), started, record)
        try:
            with self.ws.store.together():
                try:
                    result = HANDLERS[name](self, **args)
                except Exception as exc:
                    raise _Undone(_failed(name, exc)) from exc  # its step rolled back
                return self._conclude(name, tool_input, result, started, record)
        except _Undone as undone:
            return self._conclude(name, tool_input, undone.result, started, record)

    def _conclude(self, name: str, tool_input: Any, result: ToolResult, started: float,
                  record: Callable[[ToolResult], None] | None) -> ToolResult:
        """The result redacted, journaled and recorded."""
        result = replace(result, content=_redact(result.content))
        ms = int((time.monotonic() - started) * 1000)
        journal_call(self.ws, self.team, self.member, name, tool_input, result, ms)
        if record is not None:
            record(result)
        return result

    def _admitted(self, name: str, tool_input: Any) -> Json:
        """The checked input of a call that may run now (`admit`), its host still holding
        its lease; ToolError, Blocked or TeamdError otherwise."""
        if not isinstance(name, str) or name not in TOOL_SPECS:
            raise ToolError(f"unknown tool {name!r}; available: {', '.join(sorted(self.names))}")
        if name not in self.names:
            raise ToolError(f"{name} is not available to a {self.kind}")
        args = self.admit(name, tool_input)
        # its host still holds its lease (CONTRACT §15): checked after the rules, an ask
        # and the pre_tool_use hook, which may take long, right before the tool runs
        self.ws.store.fence()
        return args

    def admit(self, name: str | None, tool_input: Any, tool_use_id: str | None = None,
              own: tuple[str, Json] | None = None) -> Json:
        """Everything a call passes before it runs (CONTRACT §11): its schema, the plan
        gate, what no rule opens, the rules (an ask waits for its answer), `pre_tool_use`;
        its checked input, or ToolError / Blocked. Claude Code's own tools pass it too
        (`teamd.agent.claude_code.pretool`): `own` is the call (its tool's name, its
        input), which rules naming that tool also decide, and which the journal, the ask
        and the hook name; `name` the ruled tool standing for it, or None if none does."""
        if tool_use_id is not None:
            self._use_id = tool_use_id
        args = validate_input(name, tool_input) if name is not None else {}
        if name in GATED:
            self._check_plan_gate()
        if name in permission_rules.RULED and "path" in args:  # no rule opens the key
            protected.check_key(self.settings().api_key_file, os.environ, self.cwd,
                                args["path"])
        if name in protected.WRITING_TOOLS:  # before the rules: no rule can open these
            self.guard_write(confine(self.cwd, args["path"]))
        approved = None
        if name in permission_rules.RULED or own is not None:
            approved = self._permit(name, args, own)
            shown_tool, shown_input = own if own is not None else (name, args)
            self.run_hook("pre_tool_use", tool=shown_tool, tool_input=shown_input)
            if approved is not None and not requests.set_flag(
                    self.ws, self.team, approved, "ran", when_status="approved")["changed"]:
                # it ran before a restart (ran is set just before running): never twice
                raise ToolError(INTERRUPTED)
        return args

    # -- permissions and hooks (CONTRACT §11) ----------------------------------------------
    def _permit(self, name: str | None, args: dict[str, Any],
                own: tuple[str, Json] | None = None) -> str | None:
        """Apply the rules to a ruled call (or a Claude Code call, `own`, named by its own
        tool in the journal and the ask): None to go ahead, the id of an approved
        permission request (its `ran` is set just before the call runs), or ToolError.
        A request this call opened before a restart is the truth, whatever the rules
        say now: waited on again if pending, never run twice once approved."""
        record = self.permission_record(self._use_id) if self._use_id else None
        shown, shown_input = own if own is not None else (str(name), args)
        if record is None:
            conf = self.settings()
            verdict = permissions.decide(conf.permissions,
                                         permissions.always_rules(self.ws, self.team),
                                         name, args, self.cwd, own)
            if verdict.action == "allow":
                return None
            argument = permissions.main_argument(shown, shown_input, self.cwd)
            if verdict.action == "deny":
                permissions.journal_denied(self.ws, self.team, self.member, shown, argument,
                                           verdict.rule)
                raise ToolError(f'denied by rule "{verdict.rule}"')
            if self.waiter is None:
                raise ToolError(f'needs permission (rule "{verdict.rule}"), and nobody can '
                                "be asked from here")
            record = {"tool": shown, "argument": argument, "rule": verdict.rule,
                      "request_id": permissions.request_id_for(self.team, self.member,
                                                               self._use_id)}
        rid = record["request_id"]
        if record.get("status", "pending") == "pending":
            # the LLM lead's own asks go to the person beside it (CONTRACT §11)
            recipient = USER if self.kind == "lead" else LEAD
            permissions.open_ask(self.ws, self.team, self.member, recipient, shown,
                                 shown_input, record["argument"], record["rule"], rid)
            assert self.waiter is not None
            record = self.waiter(rid)
        if record["status"] != "approved":
            raise Blocked(permissions.refused_text(record))
        return str(rid)

    def guard_write(self, target: Path) -> None:
        """ToolError when `target` is none of this member's to write (`protected`)."""
        protected.check_write(self.ws, self.team, self.member, target)

    def run_hook(self, hook: str, **event: Any) -> None:
        """Run the `[hooks]` command for `hook`, if one is set; Blocked on exit 2 (the
        agent loop runs `teammate_idle` through here too)."""
        conf = self.settings()
        command = conf.hooks.get(hook)
        if not command:
            return
        with self.ws.store.apart():  # a hook may take long: never inside a transaction
            outcome = hooks.run(self.ws, self.team, self.member, self.cwd, hook, command,
                                conf.hook_timeout, groups=self.groups, **event)
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


    def pending_plan_id(self) -> str | None:
        """The id of this member's plan request still awaiting the lead, or None. One
        file read while a plan is pending; nothing at all once it is answered."""
        if not self._pending_plan_known:
            found = requests.pending_plan(self.ws, self.team, self.member,
                                          since=self.joined_at)
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

    def plan_submitted(self, request_id: str) -> None:
        """SubmitPlan sent plan `request_id`: pending until the lead answers it."""
        self._pending_plan, self._pending_plan_known = request_id, True
