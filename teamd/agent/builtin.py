"""The built-in runtime: teamd's own agent loop on the Messages API (CONTRACT §6, §8, §12).

Behind `teamd.agent.runtime.Runtime`: each turn takes the inbox in, compacts the history
when its context has grown past `compact_threshold`, calls the model — with retries, the
root's shared back-off, call slots and budgets, each call counted by `accounting` — and
does what the stop reason asks (`stops`): tools run through the member's `Toolbox`, a cut
reply continued, the turn ended.
Every step is recorded in the session first, so a restart resumes it without re-running a
tool; a tool's result is recorded in one step with its effect (`run_tool`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

from teamd import events, model_limits, ratelimit, settings
from teamd.agent import accounting, compaction, context, model, stops, tool_handlers
from teamd.agent.cache_ttl import CacheTTL
from teamd.agent.runtime import GOES_ON, TurnOutcome
from teamd.agent.session import INTERRUPTED
from teamd.agent.tools import ToolResult, specs_for
from teamd.files import Json
from teamd.states import Status

#: a fence older than this when a request leaves is made again (`fence_fresh`): a fence and
#: its request are milliseconds apart unless the process was stopped between them
FENCE_FRESH = 1.0

if TYPE_CHECKING:
    from teamd.agent.member import Member

log = logging.getLogger(__name__)

RETRY_FIRST = 1.0  # the first wait before retrying the model API; doubling to retry_max_wait
TELL_LEAD_AFTER = 5  # failed tries in a row before the lead hears of retryable trouble


class BuiltinRuntime:
    """The agent loop of one member process. `last_context`: the real context size of the
    last call (what compaction is decided on; at start, the last reply's in the session);
    `api_failures`: failed calls in a row."""

    def __init__(self, member: Member) -> None:
        self.m = member
        self.specs = specs_for(member.kind)
        self.cache = CacheTTL(woken=member.session.ends_with_reply())  # breakpoints' TTLs
        self.client = model.make_client(member.conf.api_timeout, guard=self.fence_fresh)
        # a member restarted compacts where it would have: from its last reply's usage
        usage = member.session.last_usage()
        self.last_context = context.context_size(usage) if usage else 0
        self.api_failures = 0

    # -- the Runtime interface -----------------------------------------------------------
    def opening(self) -> str:
        return self.m.prompt

    def start(self) -> int | None:
        """Tool calls of the last turn with no result: the process died during them. One
        that ran, or may have, is never run again (INTERRUPTED); one that was waiting for
        permission waits again on its request record, whose `ran` flag says whether an
        approved call already ran (CONTRACT §6 Resume, §11); a message sent with the
        call's id is sent again, landing only where it had not, for its real result
        (`tool_handlers.replayed`, §17)."""
        m = self.m
        compaction.mend(self)  # a `compacted` line a kill cost
        for use in m.session.pending_tool_uses():
            again = tool_handlers.replayed(use["name"], use.get("input") or {})
            if not again and m.toolbox.permission_record(use["id"]) is None:
                self.record_result(use["id"], INTERRUPTED, is_error=True)
                continue
            self.run_tool(use)
            if m.shutdowns.leaving:
                return m.shutdowns.approve(m.shutdowns.leaving, "waiting for permission")
        return None

    def awaits_input(self) -> bool:
        return self.m.session.ends_with_reply()

    def stop(self) -> None:
        self.m.toolbox.kill_running()

    def take_turn(self) -> TurnOutcome:
        """One model call, and what its stop reason asks (`stops`): tools run, a cut reply
        continued, the turn ended."""
        m = self.m
        if self.last_context > model_limits.compact_threshold(m.model_name,
                                                              m.conf.compact_threshold):
            compaction.compact(self)
        if not m.session.paused():  # a paused reply goes back as the last message
            m.take_in()
        reply = self.ask_model(context.micro_compact(m.session.messages(m.identity)))
        if reply is None:  # an answer retrying cannot mend (see api_refused)
            m.shutdowns.leave_if_asked("the model API is unavailable")
            return TurnOutcome(stuck=True)  # the next message may mend it: try again then
        if reply.stop_reason == stops.WINDOW_EXCEEDED:  # compacted, then the same call again
            if compaction.compact(self):
                return GOES_ON
            self.api_refused("model API: context window exceeded, nothing left to compact")
            return TurnOutcome(stuck=True)
        self.last_context = context.context_size(reply.usage)
        done = stops.handle(reply.content, reply.stop_reason, reply.usage,
                            m.session.cuts_in_a_row())
        m.session.append(done.record)
        for tool_use_id, error in done.unrun:  # never run (a call cut off, or refused)
            self.record_result(tool_use_id, error, is_error=True)
        leaving = False  # the model approved a shutdown: leave once this turn's calls ran
        for use in done.run:
            result = self.run_tool(use)
            leaving = leaving or result.ends_process
            if m.shutdowns.leaving:
                return TurnOutcome(exit_code=m.shutdowns.approve(
                    m.shutdowns.leaving, "waiting for permission"))
        if leaving:
            return TurnOutcome(exit_code=m.shutdowns.leave())
        if done.follow_up is not None:
            m.session.append(done.follow_up)
        if done.trouble is not None:
            m.standing.update(last_error=done.trouble[1])
            m.tell_lead_once(*done.trouble)
        return TurnOutcome(ended=done.ends_turn)

    def run_tool(self, use: Json) -> ToolResult:
        """Run one tool call, its result recorded in the same step as its effect
        (`Toolbox.run`: on PostgreSQL one transaction, CONTRACT §15)."""
        def record(result: ToolResult) -> None:
            self.record_result(use["id"], result.content, is_error=result.is_error,
                               claimed=result.claimed)
        return self.m.toolbox.run(use["name"], use.get("input") or {},
                                  tool_use_id=use["id"], record=record)

    def record_result(self, tool_use_id: str, content: str, *, is_error: bool,
                      claimed: int | None = None) -> None:
        record: Json = {"type": "tool_result", "block": {
            "type": "tool_result", "tool_use_id": tool_use_id, "content": content,
            "is_error": is_error}}
        if claimed is not None:
            record["claimed"] = claimed  # known to the model: never re-announced
        self.m.session.append(record)

    # -- the model -----------------------------------------------------------------------
    def ask_model(self, messages: list[dict[str, Any]], **extra: Any) -> model.Reply | None:
        """The model's answer. Trouble a later try may mend is retried here, after the
        root's shared back-off and with every wait shown in `last_error`, until it mends;
        a shutdown_request ends a wait (`Leave`). None: an answer retrying cannot mend."""
        m = self.m
        system, tools, messages = context.with_cache_breakpoints(
            m.system, self.specs, messages, *self.cache.ttls(m.conf.cache_ttl))
        while True:
            # teamd.toml as it is now (SIGHUP applies from the next call: prices, limits)
            m.conf = settings.load_or_keep(m.ws, m.conf)
            events.use_settings(m.ws, m.conf)
            if self.client.api_timeout != m.conf.api_timeout:
                self.client = model.make_client(m.conf.api_timeout,  # a new bound
                                                guard=self.fence_fresh)
            m.gate.wait()
            self.wait_out_shared_backoff()
            # "active" reaches the roster as soon as the request has left, not before it:
            # that write (roster lock, fsyncs, journal) would otherwise sit on the path from
            # a new message to the model. It is done before `call` returns. With a call
            # slot to take it is done first: a slot is never held with another lock.
            mark_active = (None if m.standing.status == Status.ACTIVE
                           else lambda: m.standing.set_status(Status.ACTIVE))
            slot = contextlib.ExitStack()  # a call slot, for the length of the call
            slots = m.conf.max_concurrent_calls
            if slots > 0:
                if mark_active is not None:
                    mark_active = None
                    m.standing.set_status(Status.ACTIVE)
                slot.enter_context(m.ws.store.call_slot(slots, between=lambda:
                                   m.shutdowns.leave_if_asked("waiting for a call slot")))
            reply: model.Reply | None = None
            failure: model.ModelUnavailable | None = None
            try:
                if slots > 0 and self.must_hold_off():
                    continue  # changed while it waited for the slot: the top waits it out
                m.ws.store.fence()  # its host still holds its lease (CONTRACT §15)
                reply = model.call(self.client, after_send=mark_active, model=m.model_name,
                                   max_tokens=model_limits.max_tokens(
                                       m.model_name, m.conf.max_tokens),
                                   system=system, tools=tools, messages=messages, **extra,
                                   **context.model_options(m.model_name,
                                                           m.effort or m.conf.effort))
            except model.ModelUnavailable as exc:
                failure = exc
            finally:
                slot.close()
            if failure is not None:
                accounting.count_call(m, m.model_name, None, ms=None, stop_reason=None,
                                      error=str(failure))
                if not failure.retryable:
                    self.api_refused(str(failure))
                    return None
                self.wait_to_retry(failure)
                continue
            assert reply is not None
            self.cache.saw(reply.usage)
            accounting.count_call(m, m.model_name, reply.usage, ms=reply.ms,
                                  stop_reason=reply.stop_reason,
                                  thinking=context.thinking_text(reply.content))
            self.api_failures = 0
            m.api_told.clear()
            if reply.limited_until is not None:
                accounting.hold_root_back(m, m.model_name, reply.limited_until)
            return reply

    def fence_fresh(self) -> None:
        """As a request leaves: the fence made just before the call, made again when it
        has grown old — a process frozen between the two must not send for a member that
        moved to another host meanwhile (CONTRACT §15)."""
        self.m.ws.store.fence(max_age=FENCE_FRESH)

    def must_hold_off(self) -> bool:
        """Re-checked once a call slot is taken (the wait may have been long): a budget
        reached or a shared back-off begun meanwhile."""
        m = self.m
        return m.gate.holds() is not None or ratelimit.in_force(
            m.ws, m.conf.retry_max_wait) is not None

    def wait_to_retry(self, exc: model.ModelUnavailable) -> None:
        """Wait before the next try: the server's `retry-after`, else doubling from
        RETRY_FIRST, never longer than `retry_max_wait`. A 429 or 529 holds the whole root
        off for as long (ratelimit.json)."""
        m = self.m
        self.api_failures += 1
        longest = m.conf.retry_max_wait
        if exc.retry_after is not None:
            wait, source = min(exc.retry_after, longest), "retry-after"
        else:
            wait = min(RETRY_FIRST * 2 ** min(self.api_failures - 1, 30), longest)
            source = "backoff"
        until = time.time() + wait
        if exc.status in model.SHARED_BACKOFF_STATUSES:
            accounting.rate_limited(m, m.model_name, exc.status, until, source)
        line = f"{exc}, retrying at {accounting.clock(until)}"
        log.warning(line)
        m.standing.update(status=Status.ACTIVE, last_error=line)
        if self.api_failures >= TELL_LEAD_AFTER:
            m.tell_lead_once("retrying", f"cannot reach the model ({line})")
        m.waits.wait_out(until, "the model API is unavailable")

    def wait_out_shared_backoff(self) -> None:
        """Before a call: while the root is rate limited (ratelimit.json), wait instead
        of sending, saying so."""
        m = self.m
        while (limit := ratelimit.in_force(m.ws, m.conf.retry_max_wait)) is not None:
            line = accounting.backoff_line(limit)
            log.info(line)
            m.standing.update(status=Status.ACTIVE, last_error=line)
            m.waits.wait_out(float(limit["until"]), "the model API is rate limited")

    def api_refused(self, text: str) -> None:
        """An answer retrying cannot mend (400, 401, 403, 404, 413, a body that is not a
        response): not retried; said in `last_error` and, once, to the lead; the member
        waits for its next message (`TurnOutcome.stuck`)."""
        m = self.m
        line = f"{text}; not retried, waiting for the next message"
        log.error(line)
        m.intake.floor = len(m.session.records)
        m.standing.update(last_error=line)
        m.tell_lead_once("refused", f"the model API refused the call ({text}); not "
                         "retried: waiting for the next message")

