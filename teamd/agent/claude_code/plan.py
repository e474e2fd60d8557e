"""Plan mode for a `claude-code` member (CONTRACT §14, §6): Claude Code's own plan mode,
bound to the plan protocol.

A plan-mode member whose plan is not approved yet starts Claude Code in plan mode
(`--permission-mode plan`, `starts_planning`). Its plan reaches the lead as the
`plan_approval_request` of §6, through the `SubmitPlan` handler the built-in runtime runs,
whichever way it comes:

- `mcp__teamd__SubmitPlan` (the team tool, in the MCP server): as for any member, the
  answer comes as a `plan_approval_response` in its inbox; an approval given to Claude
  Code while it is in plan mode takes it out first (`leave_if_approved`: the control
  request `set_permission_mode`, written before the user turn carrying the answer);
- Claude Code's `ExitPlanMode`, the way its own plan mode ends: the PreToolUse hook
  answers it `ask`, so Claude Code asks the member (`can_use_tool`), and `exit_plan_mode`
  sends the `plan` input of that call (or waits on the plan already pending), the member
  `waiting` meanwhile, taking its inbox in. Approved: `allow`, and Claude Code leaves plan
  mode and goes on in the same turn. Rejected: `deny` with the lead's feedback, which
  Claude Code gives the model as the tool's error; it stays in plan mode. A shutdown
  asked meanwhile ends the wait (the plan rejected, `shutting down`).

Claude Code's plan mode is one fence; teamd's own gate (`Toolbox.admit`, run by the hook)
is the other: every writing tool of Claude Code's (`Write`, `Edit`, `MultiEdit`,
`NotebookEdit`, `Bash`) is refused until the plan is approved, whatever its mode or
settings. A member restarted after the approval starts Claude Code out of plan mode.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from teamd import requests
from teamd.agent.claude_code import process
from teamd.agent.tool_handlers import send_plan
from teamd.agent.tools_files import ToolError
from teamd.errors import TeamdError
from teamd.files import Json

if TYPE_CHECKING:
    from teamd.agent.member import Member

log = logging.getLogger(__name__)

#: Claude Code's permission mode while the plan is not approved, and after
PLAN, DEFAULT = "plan", "default"
#: what the model is told when ExitPlanMode carries no plan (Claude Code's plan file is
#: under the member's state folder, which no tool of its may write)
NO_PLAN = ("ExitPlanMode needs the whole plan as text in its `plan` argument (no plan file "
           "can be written here): call it again with the plan.")
#: the system prompt's word to a plan-mode member, in Claude Code's terms
PLAN_NOTE = ("You start in plan mode: explore read-only, then call ExitPlanMode with the "
             "whole plan in its `plan` argument (or mcp__teamd__SubmitPlan); the lead's "
             "answer lets you leave plan mode, or says what to change.")


def rejected(record: Json) -> str:
    """The tool's error for a plan not approved: the lead's feedback (or why the wait
    ended: `shutting down`), and what to do."""
    why = record.get("feedback") or record.get("answer_reason") or "no reason given"
    return (f"Your plan was rejected: {why}. You are still in plan mode: revise the plan "
            "along this feedback and call ExitPlanMode again with the whole plan.")


class PlanMode:
    """One member's Claude Code plan mode. `planning`: Claude Code is in it (as started,
    then as its `status` events say)."""

    def __init__(self, member: Member) -> None:
        self.m = member
        self.planning = False

    def approved(self) -> bool:
        """The plan gate of §6 is open (read from requests/, as the gate itself does)."""
        box = self.m.toolbox
        return requests.plan_approved(box.ws, box.team, box.member, since=box.joined_at)

    def starts_planning(self) -> bool:
        """Does Claude Code start in plan mode: a plan-mode member, its plan not approved."""
        self.planning = self.m.toolbox.plan_mode_required and not self.approved()
        return self.planning

    def heard(self, event: Json) -> None:
        """Follow Claude Code's permission mode from what it says (`init`, `status`)."""
        mode = event.get("permissionMode")
        if event.get("type") == "system" and isinstance(mode, str):
            self.planning = mode == PLAN

    def leave_if_approved(self, cli: process.ClaudeProcess, given: list[Json]) -> None:
        """An approval of its plan among the session records about to be given to Claude
        Code (`given`) while it is in plan mode: take it out first."""
        if not self.planning or not any(
                m["type"] == "plan_approval_response" and m.get("approve")
                for r in given if r["type"] == "inbox" for m in r["messages"]):
            return
        if self.approved() and cli.control({"subtype": "set_permission_mode",
                                            "mode": DEFAULT}):
            log.info("plan approved: claude code %d leaves plan mode", cli.pid)
            self.planning = False

    def exit_plan_mode(self, asked: Json, call: Any) -> Json:
        """Claude Code asks to leave plan mode (`asked`, the `can_use_tool` request;
        `call`, the input of the ExitPlanMode call as the model gave it): send its plan to
        the lead and wait for the answer. The control response: `allow` when approved,
        else `deny` with why."""
        if not self.m.toolbox.plan_mode_required or self.approved():
            return process.allow(asked.get("input") or {})
        box = self.m.toolbox
        pending = requests.pending_plan(box.ws, box.team, box.member, since=box.joined_at)
        if pending is not None:  # one plan at a time (§6): the one pending is waited on
            request_id = str(pending["request_id"])
        else:
            plan = next((given["plan"] for given in (call, asked.get("input"))
                         if isinstance(given, dict) and isinstance(given.get("plan"), str)
                         and given["plan"].strip()), None)
            if plan is None:
                return process.deny(NO_PLAN)
            try:
                request_id = send_plan(box, plan)  # SubmitPlan's own: §6 as for any member
            except (ToolError, TeamdError) as exc:  # as SubmitPlan would answer it
                return process.deny(str(exc))
        record = self.m.await_permission(request_id, expires=False)
        if record["status"] == "approved":
            return process.allow(asked.get("input") or {})
        return process.deny(rejected(record))
