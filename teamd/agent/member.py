"""The teammate process: what every member does whatever its agent (CONTRACT §3, §4, §6,
§11, §12) — its inbox taken in exactly once (`intake`), the shutdown (`shutdowns`), plan
and permission protocols, idle and sleep, its status (`standing`), budgets (`budget_gate`),
hooks — around an agent behind `teamd.agent.runtime.Runtime` (the built-in one:
`teamd.agent.builtin`).

States: active (the agent at work) ↔ idle (waiting on the inbox, woken by teamd through the
wake pipe, `teamd.wake`; teamd hands out tasks as `task_assigned`) → exit 75 after
`idle_timeout` (sleeping) or exit 0 after an approved shutdown; active ↔ waiting (a tool
call waits for the answer to a permission request, §11, still taking in the inbox). Every
step is recorded in the session file first, so a restart at any moment resumes the same
conversation without showing a message twice or re-running a tool.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path

from teamd import (
    events,
    inbox,
    permissions,
    policy,
    requests,
    roster,
    runtimes,
    settings,
    wake,
)
from teamd.agent import context
from teamd.agent.budget_gate import BudgetGate
from teamd.agent.builtin import BuiltinRuntime
from teamd.agent.intake import Intake
from teamd.agent.runtime import Runtime
from teamd.agent.session import Session
from teamd.agent.shutdowns import Shutdowns
from teamd.agent.standing import Standing
from teamd.agent.tools import Blocked, Toolbox
from teamd.agent.waits import Waits
from teamd.errors import TeamdError
from teamd.files import Json
from teamd.layout import LEAD, USER, Workspace
from teamd.proc import EXIT_SLEEP
from teamd.states import Status

log = logging.getLogger(__name__)

IDLE_HOOK_TURNS = 3  # <hook-feedback> turns in a row before a teammate goes idle anyway


class Member:
    """One teammate process: its parts (`intake`, `shutdowns`, `standing`, `waits`,
    `gate`, `toolbox`, `session`) and its agent (`runtime`)."""

    def __init__(self, ws: Workspace, team: str, name: str,
                 conf: settings.Settings | None = None, wake_fd: int | None = None) -> None:
        self.ws, self.team, self.name = ws, team, name
        # a teamd.toml broken since the supervisor last read it keeps the settings in
        # force (CONTRACT §10, §11): a member forked meanwhile must not crash on it
        self.conf = settings.load(ws) if conf is None else settings.load_or_keep(ws, conf)
        events.use_settings(ws, self.conf)  # the journal rotates by the settings in force
        # the roster (as this member sees it) last read: budgets still apply while a hand
        # edit has left config.json unparsable (teamd keeps its last good copy too)
        self.roster_seen: Json = roster.load(ws, team, only=name)
        member = roster.get(self.roster_seen, name)
        self.kind = member.get("kind", "teammate")
        self.cwd = Path(member["cwd"])
        if not self.cwd.is_dir():
            raise TeamdError(f"working directory {self.cwd} does not exist")
        self.prompt = member["prompt"]
        self.model_name = member.get("model") or self.conf.model
        self.effort = str(member.get("effort") or "")  # else the setting's, at each call
        self.identity = context.identity(name, team, self.kind)
        self.system = context.system_prompt(member, team, str(self.cwd))
        self.toolbox = Toolbox(ws, team, name, kind=self.kind, cwd=self.cwd,
                               bash_timeout=self.conf.bash_timeout,
                               plan_mode_required=bool(member.get("plan_mode_required")),
                               joined_at=member.get("joined_at"),
                               waiter=self.await_permission, conf=self.conf)
        self.session = Session.load(ws.store, team, name)
        self.intake = Intake(self)
        self.session.when_stuck = self.intake.session_stuck
        self.waits = Waits(self, wake_fd)
        self.standing = Standing(self, member)
        self.api_told: set[str] = set()  # the lead heard of this trouble ("retrying", …)
        self.turn_ended = False  # the agent ended a turn in this process: tell the lead
        self.shutdowns = Shutdowns(self)
        self.gate = BudgetGate(self)  # budgets before each call
        self.runtime: Runtime = self.make_runtime(runtimes.of(member))

    def make_runtime(self, runtime: str) -> Runtime:
        """The agent this member runs (CONTRACT §14): the built-in loop, or Claude Code."""
        if runtime == runtimes.CLAUDE_CODE:
            from teamd.agent.claude_code.runtime import ClaudeCodeRuntime
            return ClaudeCodeRuntime(self)
        return BuiltinRuntime(self)

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> int:
        """Work until the process leaves; the exit code (0 shutdown, 75 sleep)."""
        self.catch_signals()
        self.open_conversation()
        try:
            code = self.runtime.start()
            while code is None:
                if self.runtime.awaits_input():
                    code = self.idle()
                if code is None:
                    code = self.work()
        finally:  # shutdown, sleep, a crash: what the agent runs goes with the member
            self.runtime.stop()
        return code

    def catch_signals(self) -> None:
        signal.signal(signal.SIGTERM, self.on_sigterm)
        self.waits.catch_signals()

    def on_sigterm(self, signum: int, frame: object) -> None:
        # The session is already on disk (every record is fsynced as it is written); what
        # is left is to take the agent's work down with us and die by the signal.
        self.runtime.stop()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    def open_conversation(self) -> None:
        """A first start: the agent's opening turn (the member's prompt, or for an agent
        with the prompt in its system prompt, a turn that sets it to work) opens its
        conversation."""
        if self.session.empty:
            self.session.append({"type": "user", "content": [
                {"type": "text", "text": self.runtime.opening()}]})

    def work(self) -> int | None:
        """One turn of the agent, and what the member does after it. An exit code ends
        the process."""
        outcome = self.runtime.take_turn()
        if outcome.exit_code is not None:
            return outcome.exit_code
        if outcome.stuck:
            return self.idle(claim=False)  # the next message may mend it: try again then
        if outcome.ended:
            return self.end_turn()
        return None

    def end_turn(self) -> int | None:
        """The agent ended its turn: a shutdown it was shown and left unanswered is
        approved for it; a teammate runs `teammate_idle`."""
        self.turn_ended = True
        rid = self.shutdowns.pending()
        if rid is not None:
            return self.shutdowns.approve(rid, "ended its turn without answering")
        if self.kind != "lead":
            self.check_idle_hook()
        return None

    def take_in(self) -> list[Json]:
        """Take the inbox in for the agent's next step (a batch; see `Intake.take`)."""
        new = self.intake.take()
        self.shutdowns.note(new)
        return new

    # -- idle ----------------------------------------------------------------------------
    def idle(self, claim: bool = True) -> int | None:
        """Wait for work: a message, or a task teamd assigned (`task_assigned`, taken in
        as <auto-claimed>); the member never scans the board (CONTRACT §5). None = back to
        work; an exit code = leave. With `claim` False (after an answer retrying cannot
        mend) there is no sleep, from which work would wake it into the same refusal."""
        deadline = time.monotonic() + self.conf.idle_timeout
        watcher = self.waits.watcher()
        watcher.drain()  # changes made while busy: what they brought is checked below
        rid = self.shutdowns.pending()
        if rid is not None:
            # taken in while idle just before a crash, and not answered yet
            return self.shutdowns.approve(rid, "idle")
        waiting = False
        notice_at: float | None = None  # when the lead hears "idle", unless work comes
        while True:  # the pipe is drained before each check: no line slips past
            # a shutdown request taken in here is answered by the harness: recorded as
            # taken, never shown to the model (not even after a restart)
            if self.kind == "lead" and self.holds_idle_notices():
                new = []  # they stay in the inbox, taken in with the next call
            else:
                new = self.intake.take(hide=("shutdown_request",), tasks=True)
            asks = self.shutdowns.note(new)
            if asks:
                return self.shutdowns.approve(asks[0], "idle")
            if new:
                return None
            now = time.monotonic()
            if not waiting:
                # Idle only now that nothing is waiting for it: no message, no assigned
                # task. The status goes first: it is what teamd hands out work on
                # (CONTRACT §5); the lead hears "idle" only if no task comes within
                # wake.IDLE_NOTICE_GRACE (else it would hear it between every two tasks). Only a
                # turn that ended in this process is news: a process woken from sleep or
                # restarted is not "idle" to the lead. The pipe was drained before the
                # check: a poke from here on ends the wait below at once.
                waiting = True
                self.standing.set_status(Status.IDLE)
                if self.kind != "lead" and self.turn_ended:
                    notice_at = now + wake.IDLE_NOTICE_GRACE
                self.turn_ended = False
            if notice_at is not None and now >= notice_at:
                notice_at = None
                self.tell_lead_idle()
            until_notice = None if notice_at is None else notice_at - now
            if not claim:
                self.waits.wait_on(watcher, until_notice)
                continue
            left = deadline - now
            if left <= 0:
                if notice_at is not None:  # an idle_timeout shorter than the grace
                    self.tell_lead_idle()
                log.info("idle for %gs: going to sleep", self.conf.idle_timeout)
                return EXIT_SLEEP
            self.waits.wait_on(watcher,
                               left if until_notice is None else min(left, until_notice))

    def holds_idle_notices(self) -> bool:
        """An idle LLM lead with `lead_wake_on_idle = "quiet"` is not woken by idle
        notifications while a teammate still works (CONTRACT §12): True while all its inbox
        holds is such notices and the team is not quiet. Meanwhile the roster is watched
        too, so the last teammate to settle wakes it."""
        self.waits.watch_roster = True  # armed before the checks: a change after them wakes
        if not self.intake.has_mail():
            return False
        conf = settings.load_or_keep(self.ws, self.conf)
        waiting = inbox.peek(self.ws, self.team, self.name)
        if not waiting or conf.lead_wake_on_idle != "quiet" or any(
                m["type"] != "idle_notification" for m in waiting):
            self.waits.watch_roster = False
            return False
        members = roster.load(self.ws, self.team)["members"]
        live = {m["name"] for m in members if m["status"] in policy.WORKING
                and roster.is_live(m)}
        held = not policy.mail_wakes_lead(waiting, members, live, conf.lead_wake_on_idle)
        self.waits.watch_roster = held
        return held

    def tell_lead_idle(self) -> None:
        last = ""
        for record in reversed(self.session.records):
            if record["type"] == "assistant":
                last = " ".join(b.get("text", "") for b in record["content"]
                                if b.get("type") == "text").strip()
                break
        reason = "no claimable task"
        summary = (last[:200] or f"{self.name} is idle")
        msg = inbox.make("idle_notification", self.name, LEAD, f"{self.name} is idle: {reason}",
                         reason=reason, summary=summary)
        inbox.deliver(self.ws, self.team, [msg])

    def tell_lead_once(self, what: str, text: str) -> None:
        """One message to the lead per kind of trouble, until a call succeeds again (an
        LLM lead's own trouble goes to the person, as its `member_failed` does)."""
        if what in self.api_told:
            return
        self.api_told.add(what)
        inbox.deliver(self.ws, self.team, [inbox.make(
            "message", self.name, USER if self.kind == "lead" else LEAD,
            f"{self.name}: {text}")])

    # -- hooks, permissions, plans -------------------------------------------------------
    def check_idle_hook(self) -> None:
        """The agent ended its turn: run `teammate_idle` before going idle. Exit 2 keeps
        the teammate at work with the hook's reason as a <hook-feedback> turn, at most
        IDLE_HOOK_TURNS in a row; after that it goes idle without running the hook."""
        in_a_row = 0
        for record in reversed(self.session.records):
            if record["type"] in ("inbox", "compaction") or (
                    record["type"] == "user" and not record.get("hook_feedback")):
                break  # new input since: the count starts again
            if record["type"] == "user":
                in_a_row += 1
        if in_a_row >= IDLE_HOOK_TURNS:
            return
        try:
            self.toolbox.run_hook("teammate_idle")
        except Blocked as exc:
            text = f'<hook-feedback hook="teammate_idle">{exc.reason}</hook-feedback>'
            self.session.append({"type": "user", "hook_feedback": "teammate_idle",
                                 "content": [{"type": "text", "text": text}]})

    def await_permission(self, request_id: str, expires: bool = True) -> Json:
        """Block, status `waiting`, until permission request `request_id` is answered;
        return its record. Woken by teamd when the answer lands in the inbox (as a
        permission_response), never by polling. The inbox is taken in meanwhile; a
        shutdown request ends the wait (rejected, `shutting down`), and so does
        `permission_timeout` (rejected, `timeout`) — unless `expires` is False (a plan
        request, which Claude Code's ExitPlanMode waits on: `claude_code.plan`)."""
        self.standing.set_status(Status.WAITING)
        # the wake pipe, kept for the life of the process: a wait costs no inotify
        # instance (CONTRACT §3: nothing may run out with the size of the team)
        watcher = self.waits.watcher()
        try:
            while True:  # the watcher is armed before each check: no answer slips past
                self.take_in()
                record = requests.get(self.ws, self.team, request_id)
                if record["status"] != "pending":
                    return record
                left = permissions.time_left(
                    record, self.toolbox.settings().permission_timeout) if expires else None
                stop = self.shutdowns.pending()
                if stop is not None or (left is not None and left <= 0):
                    refused = permissions.refuse_ask(
                        self.ws, self.team, request_id,
                        "shutting down" if stop is not None else "timeout")
                    if refused is None:
                        continue  # answered meanwhile: that answer stands
                    self.shutdowns.leaving = stop
                    return refused
                self.waits.wait_on(watcher, left)
        finally:
            self.standing.set_status(Status.ACTIVE)
