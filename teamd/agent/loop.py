"""The teammate process: an agent loop on the Messages API, working from its inbox and
the shared task board (CONTRACT.md sections 3, 4 and 6).

States: active (calling the model, running tools) ↔ idle (waiting on the inbox, woken by
teamd through the wake pipe, `teamd.wake`; teamd hands out tasks as `task_assigned`)
→ exit 75 after `idle_timeout` (sleeping) or exit 0 after an
approved shutdown; active ↔ waiting (a tool call waits for the answer to a permission
request, §11, still taking in the inbox). Every step is recorded in the session file
first, so a restart at any moment resumes the same conversation without showing a message
twice or re-running a tool.
"""

from __future__ import annotations

import fcntl
import logging
import os
import select
import signal
import time
from pathlib import Path
from typing import Any

from teamd import (
    actions,
    board,
    budget,
    calls,
    events,
    files,
    inbox,
    model_limits,
    policy,
    prices,
    ratelimit,
    requests,
    roster,
    settings,
    wake,
)
from teamd.agent import compaction, context, model, stops
from teamd.agent.budget_gate import BudgetGate
from teamd.agent.cache_ttl import CacheTTL
from teamd.agent.session import INTERRUPTED, Session
from teamd.agent.tools import Blocked, Toolbox, specs_for
from teamd.errors import BadInput, TeamdError
from teamd.files import Json
from teamd.layout import LEAD, USER, Workspace
from teamd.proc import EXIT_SHUTDOWN, EXIT_SLEEP, drain_fd
from teamd.watch import Watcher

log = logging.getLogger(__name__)

IDLE_HOOK_TURNS = 3  # <hook-feedback> turns in a row before a teammate goes idle anyway
RETRY_FIRST = 1.0  # the first wait before retrying the model API; doubling to retry_max_wait
TELL_LEAD_AFTER = 5  # failed tries in a row before the lead hears of retryable trouble
PLAN_ANSWER_GRACE = 30.0  # s: an answer recorded this long ago whose message never came


class Leave(Exception):
    """Raised from a wait deep in a call (a retry, the shared back-off) when the member has
    approved a shutdown: it unwinds to `run_member`, which exits with `code`."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


#: back-off while the session cannot be written (a full disk): no model call meanwhile
SESSION_RETRY_FIRST, SESSION_RETRY_MAX = 1.0, 30.0


def run_member(ws: Workspace, team: str, name: str,
               conf: settings.Settings | None = None, wake_fd: int | None = None) -> int:
    """Entry point in the forked child. Returns the exit code (0 shutdown, 75 sleep).
    `conf`: the supervisor's settings in force, kept while teamd.toml is broken.
    `wake_fd`: the read end of the wake pipe teamd pokes (`teamd.wake`); without one the
    member watches its files itself, and says so (`wake_fallback`)."""
    logging.basicConfig(level=logging.INFO,
                        format=f"%(asctime)s {name}@{team} %(levelname)s %(message)s")
    for noisy in ("httpx", "httpx2", "anthropic"):  # one INFO line per request otherwise
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        return Member(ws, team, name, conf, wake_fd=wake_fd).run()
    except Leave as leaving:
        return leaving.code


class Member:
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
        self.inbox_path = ws.inbox(team, name)
        self.system = context.system_prompt(member, team, str(self.cwd))
        self.toolbox = Toolbox(ws, team, name, kind=self.kind, cwd=self.cwd,
                               bash_timeout=self.conf.bash_timeout,
                               plan_mode_required=bool(member.get("plan_mode_required")),
                               joined_at=member.get("joined_at"),
                               waiter=self.await_permission, conf=self.conf)
        self.specs = specs_for(self.kind)
        self.session = Session.load(ws.session(team, name))
        self.session.when_stuck = self.session_stuck
        self.cache = CacheTTL(woken=self.session.ends_with_reply())  # the breakpoints' TTLs
        self.client = model.make_client(self.conf.api_timeout)
        self.status: str | None = member.get("status")
        self.last_context = 0
        self.api_failures = 0  # failed model calls in a row
        self.intake_floor = 0  # session records before this count toward no batch
        self.wake_fd = wake_fd
        self.waker: wake.MemberWake | None = None
        # tasks handed to the conversation (claimed_ids) seen finished or given away: the
        # status writes read only the others' files for `current_task`, never the board
        self.closed_ids: set[int] = set()
        self.wakeup = -1  # read end of the signal wakeup pipe (see `run`)
        self.api_told: set[str] = set()  # the lead heard of this trouble ("retrying", …)
        self.turn_ended = False  # the model ended a turn in this process: tell the lead
        # teamd's last_error (why it was in backoff) holds until this process is up
        self.error_of_last_run = member.get("last_error") is not None
        # request ids the model has been shown (after a restart: those still pending)
        self.shutdown_asks: list[str] = self.shown_shutdown_asks()
        # a shutdown request that ended a wait for permission: approved after that tool
        self.leaving: str | None = None
        # without a wake pipe, the fallback watcher also wakes on the roster and the spend
        # (a paused member waits for its budget to be raised; a lead holding idle
        # notifications, for quiet); with one, teamd pokes for those (`wake.roster_pokes`)
        self.watch_roster = False
        self.unpriced_told = False  # last_error named the model with no price, once
        # what `current_task` need not read again: tasks seen let go, and how many of the
        # session's claims it has looked at
        self.tasks_let_go: set[int] = set()
        self.claims_seen = 0
        self.gate = BudgetGate(self, member.get("last_error"))  # budgets before each call

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> int:
        signal.signal(signal.SIGTERM, self.on_sigterm)
        # The handler is Python code, run between bytecodes: a SIGTERM landing just before
        # a blocking wait begins would sit unhandled until the wait ends (up to
        # idle_timeout). The wakeup fd turns it into a readable byte the waits select on.
        self.wakeup, wakeup_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wakeup_w, warn_on_full_buffer=False)
        if self.session.empty:
            self.session.append({"type": "user", "content": [
                {"type": "text", "text": self.prompt}]})
        code = self.settle_interrupted()
        if code is not None:
            return code
        while True:
            if self.session.ends_with_reply():
                code = self.idle()
                if code is not None:
                    return code
            code = self.turn()
            if code is not None:
                return code

    def on_sigterm(self, signum: int, frame: object) -> None:
        # The session is already on disk (every record is fsynced as it is written); what
        # is left is to take the tools' process groups down with us and die by the signal.
        self.toolbox.kill_running()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    def turn(self) -> int | None:
        """One model call, and what its stop reason asks (`stops`): tools run, a cut reply
        continued, the turn ended. An exit code ends the process."""
        if self.last_context > model_limits.compact_threshold(self.model_name,
                                                              self.conf.compact_threshold):
            compaction.compact(self)
        if not self.session.paused():  # a paused reply goes back as the last message
            self.note_shutdown_asks(self.take_inbox())
        reply = self.ask_model(context.micro_compact(self.session.messages(self.identity)))
        if reply is None:  # an answer retrying cannot mend (see api_refused)
            self.leave_if_asked("the model API is unavailable")
            return self.idle(claim=False)  # the next message may mend it: try again then
        if reply.stop_reason == stops.WINDOW_EXCEEDED:  # compacted, then the same call again
            if compaction.compact(self):
                return None
            self.api_refused("model API: context window exceeded, nothing left to compact")
            return self.idle(claim=False)
        self.last_context = context.context_size(reply.usage)
        done = stops.handle(reply.content, reply.stop_reason, reply.usage,
                            self.session.cuts_in_a_row())
        self.session.append(done.record)
        for tool_use_id, error in done.unrun:  # never run (a call cut off, or refused)
            self.record_result(tool_use_id, error, is_error=True)
        leaving = False  # the model approved a shutdown: leave once this turn's calls ran
        for use in done.run:
            result = self.toolbox.run(use["name"], use.get("input") or {},
                                      tool_use_id=use["id"])
            self.record_result(use["id"], result.content, is_error=result.is_error,
                               claimed=result.claimed)
            leaving = leaving or result.ends_process
            if self.leaving:
                return self.approve_shutdown(self.leaving, "waiting for permission")
        if leaving:
            return self.leave()
        if done.follow_up is not None:
            self.session.append(done.follow_up)
        if done.trouble is not None:
            self.update_member(last_error=done.trouble[1])
            self.tell_lead_once(*done.trouble)
        if done.ends_turn:
            self.turn_ended = True
            for rid in self.shutdown_asks:
                if requests.get(self.ws, self.team, rid)["status"] == "pending":
                    # the model ended its turn without answering: approve for it
                    return self.approve_shutdown(rid, "ended its turn without answering")
            if self.kind != "lead":
                self.check_idle_hook()
        return None

    def settle_interrupted(self) -> int | None:
        """Tool calls of the last turn with no result: the process died during them. One
        that ran, or may have, is never run again (INTERRUPTED); one that was waiting for
        permission waits again on its request record, whose `ran` flag says whether an
        approved call already ran (CONTRACT §6 Resume, §11)."""
        for use in self.session.pending_tool_uses():
            if self.toolbox.permission_record(use["id"]) is None:
                self.record_result(use["id"], INTERRUPTED, is_error=True)
                continue
            result = self.toolbox.run(use["name"], use.get("input") or {},
                                      tool_use_id=use["id"])
            self.record_result(use["id"], result.content, is_error=result.is_error)
            if self.leaving:
                return self.approve_shutdown(self.leaving, "waiting for permission")
        return None

    def check_idle_hook(self) -> None:
        """The model ended its turn: run `teammate_idle` before going idle. Exit 2 keeps
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

    def await_permission(self, request_id: str) -> Json:
        """Block, status `waiting`, until permission request `request_id` is answered;
        return its record. Woken by teamd when the answer lands in the inbox (as a
        permission_response), never by polling. The inbox is taken in meanwhile; a
        shutdown request ends the wait (rejected, `shutting down`), and so does
        `permission_timeout` (rejected, `timeout`)."""
        self.set_status("waiting")
        # the wake pipe, kept for the life of the process: a wait costs no inotify
        # instance (CONTRACT §3: nothing may run out with the size of the team)
        watcher = self.idle_watcher()
        try:
            while True:  # the watcher is armed before each check: no answer slips past
                self.note_shutdown_asks(self.take_inbox())
                record = requests.get(self.ws, self.team, request_id)
                if record["status"] != "pending":
                    return record
                left = None
                timeout = self.toolbox.settings().permission_timeout
                if timeout > 0:
                    left = float(record["created_at"]) + timeout - time.time()
                stop = self.pending_shutdown()
                if stop is not None or (left is not None and left <= 0):
                    why = "shutting down" if stop is not None else "timeout"
                    try:
                        record = requests.answer(self.ws, self.team, request_id, False,
                                                 reason=why)
                    except BadInput:
                        continue  # answered meanwhile: that answer stands
                    self.leaving = stop
                    return record
                self.wait_on(watcher, left)
        finally:
            self.set_status("active")

    def pending_shutdown(self) -> str | None:
        for rid in self.shutdown_asks:
            if requests.get(self.ws, self.team, rid)["status"] == "pending":
                return rid
        return None

    def idle(self, claim: bool = True) -> int | None:
        """Wait for work: a message, or a task teamd assigned (`task_assigned`, taken in
        as <auto-claimed>); the member never scans the board (CONTRACT §5). None = back to
        work; an exit code = leave. With `claim` False (after an answer retrying cannot
        mend) there is no sleep, from which work would wake it into the same refusal."""
        deadline = time.monotonic() + self.conf.idle_timeout
        watcher = self.idle_watcher()
        watcher.drain()  # changes made while busy: what they brought is checked below
        for rid in self.shutdown_asks:
            if requests.get(self.ws, self.team, rid)["status"] == "pending":
                # taken in while idle just before a crash, and not answered yet
                return self.approve_shutdown(rid, "idle")
        waiting = False
        notice_at: float | None = None  # when the lead hears "idle", unless work comes
        while True:  # the pipe is drained before each check: no line slips past
            # a shutdown request taken in here is answered by the harness: recorded as
            # taken, never shown to the model (not even after a restart)
            if self.kind == "lead" and self.holds_idle_notices():
                new = []  # they stay in the inbox, taken in with the next call
            else:
                new = self.take_inbox(hide=("shutdown_request",), tasks=True)
            asks = [m for m in new if m["type"] == "shutdown_request"]
            if asks:
                return self.approve_shutdown(asks[0]["request_id"], "idle")
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
                self.set_status("idle")
                if self.kind != "lead" and self.turn_ended:
                    notice_at = now + wake.IDLE_NOTICE_GRACE
                self.turn_ended = False
            if notice_at is not None and now >= notice_at:
                notice_at = None
                self.tell_lead_idle()
            until_notice = None if notice_at is None else notice_at - now
            if not claim:
                self.wait_on(watcher, until_notice)
                continue
            left = deadline - now
            if left <= 0:
                if notice_at is not None:  # an idle_timeout shorter than the grace
                    self.tell_lead_idle()
                log.info("idle for %gs: going to sleep", self.conf.idle_timeout)
                return EXIT_SLEEP
            self.wait_on(watcher, left if until_notice is None else min(left, until_notice))

    def holds_idle_notices(self) -> bool:
        """An idle LLM lead with `lead_wake_on_idle = "quiet"` is not woken by idle
        notifications while a teammate still works (CONTRACT §12): True while all its inbox
        holds is such notices and the team is not quiet. Meanwhile the roster is watched
        too, so the last teammate to settle wakes it."""
        self.watch_roster = True  # armed before the checks: a change after them wakes us
        try:
            if self.inbox_path.stat().st_size == 0:
                return False
        except FileNotFoundError:
            return False
        conf = settings.load_or_keep(self.ws, self.conf)
        waiting = inbox.peek(self.ws, self.team, self.name)
        if not waiting or conf.lead_wake_on_idle != "quiet" or any(
                m["type"] != "idle_notification" for m in waiting):
            self.watch_roster = False
            return False
        members = roster.load(self.ws, self.team)["members"]
        live = {m["name"] for m in members if m["status"] in policy.WORKING
                and roster.is_live(m)}
        held = not policy.mail_wakes_lead(waiting, members, live, conf.lead_wake_on_idle)
        self.watch_roster = held
        return held

    def wait_on(self, watcher: wake.MemberWake, timeout: float | None) -> None:
        """`watcher.wait(timeout)` that a signal also ends (see `run`): on return to
        Python its handler runs."""
        also = [self.wakeup] if self.wakeup >= 0 else []
        watcher.wait(timeout, also=also)
        if also:
            drain_fd(self.wakeup)

    def idle_watcher(self) -> wake.MemberWake:
        """What every wait of this member blocks on, made at the first wait and kept for
        the life of the process: teamd's wake pipe, or, without one, an inotify watcher of
        its own on the team folder (loudly: `wake_fallback`, `last_error`)."""
        if self.waker is None:
            self.waker = wake.MemberWake(self.wake_fd, self.own_watcher, self.report_fallback)
        return self.waker

    def own_watcher(self) -> Watcher:
        """The fallback: inotify on the team folder for the inbox (and, while
        `watch_roster`, the roster and the spend); a poll where inotify is missing."""
        inbox_file = self.inbox_path.name
        roster_files = (self.ws.config(self.team).name, self.ws.spend(self.team).name)

        folders = [self.ws.team_dir(self.team)]
        if self.kind == "lead":  # holding idle notices, it waits on teammates' statuses
            folders.append(self.ws.members_dir(self.team))

        def interesting(fname: str) -> bool:
            return fname == inbox_file or (self.watch_roster and (
                fname in roster_files or (self.kind == "lead" and fname.endswith(".json"))))

        return Watcher(folders, interesting=interesting)

    def report_fallback(self, reason: str) -> None:
        """Never silent (CONTRACT §7): the journal and `last_error` say it, once."""
        events.emit(self.ws, self.team, "wake_fallback", member=self.name, reason=reason)
        self.update_member_if_possible(last_error=f"wake fallback: {reason}")

    def plan_pending(self) -> bool:
        """A plan of this member's awaits the lead: it claims nothing meanwhile (§6).

        Pending as the member knows it: an answer is recorded before its message is
        appended, so a claim made in between would reach the model in the same turn as a
        rejection it has not read yet. An answered plan counts as pending until its
        answer is in the session (or, should that message never come, for
        PLAN_ANSWER_GRACE seconds)."""
        if not self.toolbox.plan_mode_required:
            return False
        seen = {m.get("request_id") for r in self.session.records if r["type"] == "inbox"
                for m in r["messages"] if m["type"] == "plan_approval_response"}
        now = time.time()
        return any(r["kind"] == "plan_approval" and r["sender"] == self.name
                   and (r.get("created_at") or 0) >= (self.toolbox.joined_at or 0) and (
            r["status"] == "pending" or (r["request_id"] not in seen and now - float(
                r.get("resolved_at") or 0) < PLAN_ANSWER_GRACE))
            for r in requests.list_requests(self.ws, self.team))

    def assigned_task(self, msg: Json) -> Json | None:
        """The task a `task_assigned` hands over, read from its own file alone; None when
        there is nothing new to tell the model: its conversation was handed this claim
        already (teamd re-sends after a restart: a claim and its message are two writes;
        a task the model started itself), or the task is no longer this member's to do.
        A task claimed for it again later (released, then assigned anew) is news."""
        try:
            task_id = int(msg["task_id"])
            task = board.get(self.ws, self.team, task_id)
        except (TypeError, ValueError, TeamdError):
            return None
        if task.get("owner") != self.name or task.get("status") != "in_progress":
            return None
        known_at = self.session.claimed_at(task_id)
        if known_at is not None and known_at >= float(task.get("claimed_at") or 0):
            return None
        return task

    # -- inbox and protocols -------------------------------------------------------------
    def take_inbox(self, hide: tuple[str, ...] = (), tasks: bool = False) -> list[Json]:
        """Drain the inbox into the session (recorded and fsynced before the cut): at most
        BATCH_MESSAGES messages or MAX_CONTENT of content since the model last answered,
        a shutdown_request always. Messages of a type in `hide` are recorded as taken but
        never shown to the model: the harness answers them itself. A `task_assigned`
        reaches the model as <auto-claimed>Task #N: subject …</auto-claimed>, recorded with
        the task as claimed before the message is recorded as taken (a crash between the
        two leaves the message in the inbox, whose task the session then knows: nothing is
        shown twice); one for a task the session knows is taken and not returned. A task
        comes as a turn of its own, taken only while idle (`tasks`): never in a batch with
        other messages, nor in the middle of work; it waits in the inbox meanwhile. While
        the session cannot be written nothing is taken: it waits (see `session_stuck`) and
        tries again."""
        try:
            if self.inbox_path.stat().st_size == 0:
                # Nothing has landed (a line is one write under the lock, so a size of 0
                # means no line yet): no need for the lock. A line landing right after
                # this is taken at the next check, as if it had landed after the drain.
                return []
        except FileNotFoundError:
            return []
        self.wait_for_sender()
        fresh: list[Json] = []

        def consume(batch: list[Json]) -> None:
            new: list[Json] = []
            taken: set[str] = set()
            for m in batch:  # de-duplicated on the id, within the batch too
                mid = str(m.get("id"))
                if mid not in self.session.known_ids and mid not in taken:
                    taken.add(mid)
                    new.append(m)
            # no waiting here: the inbox lock is held (senders would wait on us)
            stale: list[Json] = []
            for m in new:
                if m.get("type") != "task_assigned":
                    continue
                task = self.assigned_task(m)
                if task is None:
                    stale.append(m)
                    continue
                self.session.append({"type": "user", "claimed": int(task["id"]), "content": [
                    {"type": "text", "text": auto_claimed(task)}]}, wait=False)
            shown = [m for m in new if m.get("type") not in (*hide, "task_assigned")]
            hidden = [m for m in new if m.get("type") in (*hide, "task_assigned")]
            if hidden:
                self.session.append({"type": "inbox", "messages": hidden, "hidden": True},
                                    wait=False)
            if shown:
                self.session.append({"type": "inbox", "messages": shown}, wait=False)
            fresh.extend(m for m in new if not any(m is s for s in stale))

        count, content = self.intake()
        attempt = 0
        while True:
            def hold(m: Json, batch: dict[str, bool] = {"task": False,  # noqa: B006
                                                          "other": False}) -> bool:
                """A task alone, first in a batch and while idle; others without one
                (`batch`: a fresh dict each try, bound as the function is made)."""
                if m["type"] == "task_assigned":
                    if not tasks or batch["task"] or batch["other"]:
                        return True
                    batch["task"] = True
                    return False
                if batch["task"]:
                    return True
                batch["other"] = True
                return False

            try:
                inbox.take(self.ws, self.team, self.name, consume,
                           max_messages=max(0, inbox.BATCH_MESSAGES - count),
                           max_content=max(0, inbox.MAX_CONTENT - content), hold=hold)
                break
            except OSError as exc:  # the inbox is as it was, or what was taken is recorded
                self.session_stuck(exc, attempt)
                attempt += 1
        if attempt:
            self.session_stuck(None, attempt)
        return fresh

    def intake(self) -> tuple[int, int]:
        """Messages (and bytes of their content) taken in since the model last answered:
        they count toward the one call's batch limit."""
        count = content = 0
        records = self.session.records
        # a refused call (api_refused) opens a new batch: the member waits for its next
        # message, which must not find the batch still full of what the model never read
        for record in reversed(records[self.intake_floor:]):
            if record["type"] == "assistant":
                break
            if record["type"] == "inbox":
                count += len(record["messages"])
                content += sum(len(str(m.get("content", "")).encode("utf-8", "replace"))
                               for m in record["messages"])
        return count, content

    def session_stuck(self, exc: OSError | None, attempt: int) -> None:
        """The session (or the inbox beside it) cannot be written: say why, wait, and let
        the caller try again; None once it went through. No model call is made meanwhile
        (CONTRACT §3): the call that would follow waits on this record."""
        if exc is None:
            log.info("the session is written again after %d failed attempt(s)", attempt)
            self.update_member_if_possible(last_error=None)
            return
        delay = min(SESSION_RETRY_MAX, SESSION_RETRY_FIRST * 2 ** min(attempt, 10))
        where = exc.filename or self.session.path
        line = (f"cannot record to {where}: {exc.strerror or exc}; no model call until it "
                f"can, retrying in {delay:g} s")
        log.warning(line)
        self.update_member_if_possible(last_error=line)
        self.pause(delay)

    def update_member_if_possible(self, **changes: Any) -> None:
        """`update_member`, when the disk lets it (it may be as full as the session's)."""
        try:
            self.update_member(**changes)
        except OSError as exc:
            log.warning("cannot update the roster either: %s", exc)

    def pause(self, seconds: float) -> None:
        """Sleep `seconds`; a signal ends it early (its handler runs on return)."""
        if self.wakeup < 0:
            time.sleep(seconds)
            return
        try:
            select.select([self.wakeup], [], [], seconds)
        except InterruptedError:
            pass
        drain_fd(self.wakeup)

    def wait_for_sender(self) -> None:
        """Block in flock until no sender holds the inbox lock. inotify wakes us at the
        sender's write, before its fsync and unlock; `files.lock` (filelock) would then
        retry every millisecond, while the kernel hands a blocking flock over at once.
        The drain right after takes the lock for real (this shared lock is dropped)."""
        try:
            fd = os.open(files.lock_path(self.inbox_path), os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
        finally:
            os.close(fd)  # releases it

    def shown_shutdown_asks(self) -> list[str]:
        """Shutdown requests in the conversation that are still pending (after a restart
        the model may have seen one and not answered yet: the harness must still know)."""
        asks = [m["request_id"] for r in self.session.records if r["type"] == "inbox"
                for m in r["messages"] if m["type"] == "shutdown_request"
                and m.get("request_id")]
        pending = []
        for rid in asks:
            try:
                if requests.get(self.ws, self.team, rid)["status"] == "pending":
                    pending.append(rid)
            except TeamdError:
                continue
        return pending

    def note_shutdown_asks(self, messages: list[Json]) -> None:
        self.shutdown_asks.extend(m["request_id"] for m in messages
                                  if m["type"] == "shutdown_request" and m.get("request_id"))

    def approve_shutdown(self, request_id: str, why: str) -> int:
        """The harness approves for the model; the answer goes to whoever asked."""
        try:
            actions.approve_shutdown(self.ws, self.team, self.name, request_id, reason=why,
                                     pid=os.getpid())
        except TeamdError as exc:  # answered already (e.g. by the model): still leave
            log.info("shutdown %s: %s", request_id, exc)
        return self.leave()

    def leave(self) -> int:
        """Approved a shutdown: desired=stopped and status=stopping (already written with
        the approval by `actions.approve_shutdown`; again here for an approval that was
        refused as answered already), then exit 0."""
        def change(config: Json) -> tuple[str, str] | None:
            m = roster.find(config, self.name)
            if m is None or m.get("pid") != os.getpid():
                return None
            m["desired"] = "stopped"
            return roster.set_status(m, "stopping")

        events.status_changed(self.ws, self.team, self.name,
                              roster.update(self.ws, self.team, change))
        return EXIT_SHUTDOWN

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

    # -- the model -----------------------------------------------------------------------
    def ask_model(self, messages: list[dict[str, Any]], **extra: Any) -> model.Reply | None:
        """The model's answer. Trouble a later try may mend is retried here, after the
        root's shared back-off and with every wait shown in `last_error`, until it mends;
        a shutdown_request ends a wait (`Leave`). None: an answer retrying cannot mend."""
        system, tools, messages = context.with_cache_breakpoints(
            self.system, self.specs, messages, *self.cache.ttls(self.conf.cache_ttl))
        while True:
            # teamd.toml as it is now (SIGHUP applies from the next call: prices, limits)
            self.conf = settings.load_or_keep(self.ws, self.conf)
            events.use_settings(self.ws, self.conf)
            if self.client.api_timeout != self.conf.api_timeout:
                self.client = model.make_client(self.conf.api_timeout)  # a new bound
            self.gate.wait()
            self.wait_out_shared_backoff()
            # "active" reaches the roster as soon as the request has left, not before it:
            # that write (roster lock, fsyncs, journal) would otherwise sit on the path from
            # a new message to the model. It is done before `call` returns. With a call
            # slot to take it is done first: a slot is never held with another lock.
            mark_active = None if self.status == "active" else lambda: self.set_status("active")
            slot = None
            if self.conf.max_concurrent_calls > 0:
                if mark_active is not None:
                    mark_active = None
                    self.set_status("active")
                slot = calls.take(self.ws, self.conf.max_concurrent_calls,
                                  between=lambda: self.leave_if_asked("waiting for a call slot"))
            reply: model.Reply | None = None
            failure: model.ModelUnavailable | None = None
            try:
                if slot is not None and self.must_hold_off():
                    continue  # changed while it waited for the slot: the top waits it out
                reply = model.call(self.client, after_send=mark_active, model=self.model_name,
                                   max_tokens=model_limits.max_tokens(
                                       self.model_name, self.conf.max_tokens),
                                   system=system, tools=tools, messages=messages, **extra,
                                   **context.model_options(self.model_name,
                                                           self.effort or self.conf.effort))
            except model.ModelUnavailable as exc:
                failure = exc
            finally:
                if slot is not None:
                    slot.release()
            price = prices.price_of(self.model_name, self.conf.prices)
            if failure is not None:
                events.emit(self.ws, self.team, "model_call", member=self.name,
                            model=self.model_name, error=str(failure), ms=None,
                            stop_reason=None, cost_usd=prices.cost({}, price),
                            **dict.fromkeys(prices.CALL_KEYS, 0))
                if not failure.retryable:
                    self.api_refused(str(failure))
                    return None
                self.wait_to_retry(failure)
                continue
            assert reply is not None
            cost = prices.cost(reply.usage, price)
            self.cache.saw(reply.usage)
            events.emit(self.ws, self.team, "model_call", member=self.name,
                        model=self.model_name, ms=round(reply.ms, 1), error=None,
                        cost_usd=cost, stop_reason=reply.stop_reason, **reply.usage,
                        thinking=context.thinking_text(reply.content))
            self.add_usage(reply.usage, clear_error=True, cost=cost)
            self.api_failures = 0
            self.api_told.clear()
            if reply.limited_until is not None:
                self.hold_root_back(reply.limited_until)
            return reply

    def must_hold_off(self) -> bool:
        """Re-checked once a call slot is taken (the wait may have been long): a budget
        reached or a shared back-off begun meanwhile."""
        return self.gate.holds() is not None or ratelimit.in_force(
            self.ws, self.conf.retry_max_wait) is not None

    def hold_root_back(self, until: float) -> None:
        """An answer said a rate-limit family is used up until `until`: the whole root
        waits until then (ratelimit.json, `source: headers`), before any 429."""
        until = min(until, time.time() + self.conf.retry_max_wait)
        if until <= time.time():
            return
        now_in_force = ratelimit.record(self.ws, until=until, status=None,
                                        model=self.model_name, source="headers")
        if now_in_force.get("until") == until:  # ours, not an earlier, longer one
            events.emit(self.ws, self.team, "rate_limited", member=self.name, status=None,
                        until=until, source="headers")

    def wait_to_retry(self, exc: model.ModelUnavailable) -> None:
        """Wait before the next try: the server's `retry-after`, else doubling from
        RETRY_FIRST, never longer than `retry_max_wait`. A 429 or 529 holds the whole root
        off for as long (ratelimit.json)."""
        self.api_failures += 1
        longest = self.conf.retry_max_wait
        if exc.retry_after is not None:
            wait, source = min(exc.retry_after, longest), "retry-after"
        else:
            wait = min(RETRY_FIRST * 2 ** min(self.api_failures - 1, 30), longest)
            source = "backoff"
        until = time.time() + wait
        if exc.status in model.SHARED_BACKOFF_STATUSES:
            ratelimit.record(self.ws, until=until, status=exc.status, model=self.model_name,
                             source=source)
            events.emit(self.ws, self.team, "rate_limited", member=self.name,
                        status=exc.status, until=until, source=source)
        line = f"{exc}, retrying at {_clock(until)}"
        log.warning(line)
        self.update_member(status="active", last_error=line)
        if self.api_failures >= TELL_LEAD_AFTER:
            self.tell_lead_once("retrying", f"cannot reach the model ({line})")
        self.wait_out(until, "the model API is unavailable")

    def wait_out_shared_backoff(self) -> None:
        """Before a call: while the root is rate limited (ratelimit.json), wait instead
        of sending, saying so."""
        while (limit := ratelimit.in_force(self.ws, self.conf.retry_max_wait)) is not None:
            until = float(limit["until"])
            what = limit.get("status") or "a rate limit used up, said the headers"
            line = (f"model API: rate limited (shared) until {_clock(until)}: the root is "
                    f"rate limited ({what} for {limit.get('model')})")
            log.info(line)
            self.update_member(status="active", last_error=line)
            self.wait_out(until, "the model API is rate limited")

    def wait_out(self, until: float, why: str) -> None:
        """Wait until `until` (epoch). A shutdown_request landing in the inbox ends the wait
        (`Leave`); other messages wait there with it, taken in by the next try."""
        watcher = self.idle_watcher()
        self.leave_if_asked(why)
        while (left := until - time.time()) > 0:
            self.wait_on(watcher, left)
            self.leave_if_asked(why)

    def leave_if_asked(self, why: str) -> None:
        """Approve a pending shutdown request (one the model was shown, or one in the
        inbox) on the model's behalf, since it cannot answer now, and leave."""
        if self.inbox_has_shutdown_request():
            self.note_shutdown_asks(self.take_inbox())
        for rid in self.shutdown_asks:
            if requests.get(self.ws, self.team, rid)["status"] == "pending":
                raise Leave(self.approve_shutdown(rid, why))

    def inbox_has_shutdown_request(self) -> bool:
        try:
            if self.inbox_path.stat().st_size == 0:
                return False
        except FileNotFoundError:
            return False
        return any(m["type"] == "shutdown_request"
                   for m in inbox.peek(self.ws, self.team, self.name))

    def api_refused(self, text: str) -> None:
        """An answer retrying cannot mend (400, 401, 403, 404, 413, a body that is not a
        response): not retried; said in `last_error` and, once, to the lead; the member
        waits for its next message (`turn`)."""
        line = f"{text}; not retried, waiting for the next message"
        log.error(line)
        self.intake_floor = len(self.session.records)
        self.update_member(last_error=line)
        self.tell_lead_once("refused", f"the model API refused the call ({text}); not "
                            "retried: waiting for the next message")

    def tell_lead_once(self, what: str, text: str) -> None:
        """One message to the lead per kind of trouble, until a call succeeds again (an
        LLM lead's own trouble goes to the person, as its `member_failed` does)."""
        if what in self.api_told:
            return
        self.api_told.add(what)
        inbox.deliver(self.ws, self.team, [inbox.make(
            "message", self.name, USER if self.kind == "lead" else LEAD,
            f"{self.name}: {text}")])

    # -- the roster (only while its pid is ours) -----------------------------------------
    def record_result(self, tool_use_id: str, content: str, *, is_error: bool,
                      claimed: int | None = None) -> None:
        record: Json = {"type": "tool_result", "block": {
            "type": "tool_result", "tool_use_id": tool_use_id, "content": content,
            "is_error": is_error}}
        if claimed is not None:
            record["claimed"] = claimed  # known to the model: never re-announced
        self.session.append(record)

    def set_status(self, status: str) -> None:
        if status == self.status:
            return
        self.update_member(status=status)

    def add_usage(self, usage: Json, clear_error: bool, cost: float | None = None) -> None:
        """Count a call's tokens and its cost (the member's `usage` and the team's spend,
        in one step). A model with no price says so in `last_error`, once per process."""
        changes: dict[str, Any] = {"last_error": None} if clear_error else {}
        if cost is None and not self.unpriced_told:
            self.unpriced_told = True
            changes["last_error"] = (f"no price known for model {self.model_name}: its "
                                     "calls are not counted in cost (add it under [prices] "
                                     "in teamd.toml)")
            log.warning(changes["last_error"])
        self.update_member(usage_add={k: usage.get(k) for k in prices.TOKEN_KEYS},
                           cost_add=cost, **changes)

    def current_task(self) -> int | None:
        """`current_task`: the lowest in_progress task this member owns, read from the tasks
        it knows it holds (those its session records as claimed or handed to it), not from
        the whole board. A task it was seen to let go (done, released, taken by another) is
        not read again unless it is claimed again."""
        fresh = self.session.claims[self.claims_seen:]
        self.claims_seen = len(self.session.claims)
        self.tasks_let_go.difference_update(fresh)
        held = []
        for task_id in sorted(self.session.claimed_ids - self.tasks_let_go):
            try:
                task = board.get(self.ws, self.team, task_id)
            except BadInput:  # gone (or the team is: the status write will say so)
                task = None
            except TeamdError as exc:  # a hand edit broke it: read it again next time
                log.warning("%s", exc)
                continue
            if task is not None and board.current_task([task], self.name) is not None:
                held.append(task_id)
            else:
                self.tasks_let_go.add(task_id)
        return min(held) if held else None

    def update_member(self, **changes: Any) -> None:
        usage_add = changes.pop("usage_add", None)
        cost_add = changes.pop("cost_add", None)
        current = self.current_task()
        charged = False

        def change(m: Json) -> tuple[str, str] | None:
            nonlocal charged
            if cost_add:  # spent, whoever holds the roster entry now
                budget.charge(self.ws, self.team, cost_add)  # lock order: status → spend
                charged = True
            if m.get("pid") != os.getpid():
                return None  # not ours any more (CONTRACT §4): write nothing
            moved = None
            if "status" in changes:
                moved = roster.set_status(m, changes["status"])
            if self.error_of_last_run:
                m["last_error"] = None  # up and running again: that trouble has cleared
            for key in ("last_error",):
                if key in changes:
                    m[key] = changes[key]
            if usage_add:
                total = m.setdefault("usage", {})
                for key, value in usage_add.items():
                    total[key] = int(total.get(key) or 0) + int(value or 0)
                if cost_add is not None:
                    total["cost_usd"] = prices.add(total.get("cost_usd"), cost_add)
            m["current_task"] = current
            return moved

        try:
            moved = roster.update_status(self.ws, self.team, self.name, change)
            if cost_add and not charged:  # removed from the roster meanwhile: still spent
                budget.charge(self.ws, self.team, cost_add)
        except BadInput:
            raise  # the team is gone: nothing to work for
        except TeamdError as exc:
            # config.json does not parse (a hand edit): it is not ours to repair, and the
            # work goes on; the status is written again once the file reads
            log.error("cannot record %s in the roster: %s", sorted(changes), exc)
            return
        self.error_of_last_run = False
        if "status" in changes:
            self.status = changes["status"]
        events.status_changed(self.ws, self.team, self.name, moved)


def auto_claimed(task: Json) -> str:
    """How a task assigned by teamd reaches the model (CONTRACT §6)."""
    text = f"<auto-claimed>Task #{task['id']}: {task['subject']}"
    if task.get("description"):
        text += f"\n{task['description']}"
    return text + "</auto-claimed>"


def _clock(epoch: float) -> str:
    """A time of day for `last_error` ("retrying at 14:03:21")."""
    return time.strftime("%H:%M:%S", time.localtime(epoch))
