"""How a member process waits (CONTRACT §3, §7): on teamd's wake pipe, or, without one, the
store's change feed of its own (`OwnFeed`, loudly: `wake_fallback`); a signal ends any wait
at once.

Every wait of a member — idle, a permission asked, a budget reached, a retry's back-off —
blocks here, on one watcher made at the first wait and kept for the life of the process:
a wait costs no inotify instance, so nothing runs out with the size of the team. A wait
also ends when the agent's own process does (`watch_agent`).
"""

from __future__ import annotations

import os
import select
import signal
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from teamd import events, wake
from teamd.proc import drain_fd
from teamd.store import Change, Feed, Kind

if TYPE_CHECKING:
    from teamd.agent.member import Member

#: what a member without teamd's wake pipe waits on itself
FALLBACK_KINDS = frozenset({Kind.INBOX, Kind.SPEC, Kind.SPEND, Kind.MEMBER})
#: s between two looks when the store cannot push
POLL = 0.5


class OwnFeed:
    """A change feed that wakes only for what `interesting` takes (others are drained and
    ignored): the wait of a member without teamd's pipe (`wake.MemberWake`'s fallback)."""

    poll_fallback = POLL

    def __init__(self, feed: Feed, interesting: Callable[[Change], bool]) -> None:
        self.feed = feed
        self.interesting = interesting

    @property
    def polling(self) -> bool:
        return self.feed.polling

    def drain(self) -> None:
        self.feed.drain()

    def wait(self, timeout: float | None, also: Sequence[int] = ()) -> bool:
        """Block until an interesting change, a descriptor in `also` is readable, or
        `timeout`; True unless it timed out. Polling, every `poll_fallback` s is a change."""
        if self.feed.polling:
            return self.feed.wait(POLL if timeout is None else min(timeout, POLL), also)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not self.feed.wait(left, also):
                return False
            changes, lost = self.feed.drain()
            if lost or not changes or any(self.interesting(c) for c in changes):
                return True  # no change: a descriptor of `also` is readable

    def close(self) -> None:
        self.feed.close()


class Waits:
    """One member's waits. `watch_roster`: without a wake pipe, the fallback watcher also
    wakes on the roster and the spend (a paused member waits for its budget to be raised; a
    lead holding idle notifications, for quiet); with one, teamd pokes for those
    (`wake.roster_pokes`)."""

    def __init__(self, member: Member, wake_fd: int | None) -> None:
        self.m = member
        self.wake_fd = wake_fd
        self.waker: wake.MemberWake | None = None
        self.wakeup = -1  # read end of the signal wakeup pipe (see `catch_signals`)
        self.watch_roster = False
        #: the agent's own process, when it runs one (`watch_agent`): a descriptor
        #: readable once that process ends, and what the member does then
        self.agent: tuple[int, Callable[[], None]] | None = None

    def watch_agent(self, fd: int, ended: Callable[[], None]) -> None:
        """Every wait from now on also wakes when the agent's process ends (`fd`: a
        pidfd, readable then, no polling), and calls `ended` after each wake: it raises
        (`Leave`) when that process is gone, so no wait outlives the agent."""
        self.agent = (fd, ended)

    def catch_signals(self) -> None:
        """A signal handler is Python code, run between bytecodes: a SIGTERM landing just
        before a blocking wait begins would sit unhandled until the wait ends (up to
        idle_timeout). The wakeup fd turns it into a readable byte the waits select on."""
        self.wakeup, wakeup_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wakeup_w, warn_on_full_buffer=False)

    def wait_on(self, watcher: wake.MemberWake, timeout: float | None) -> None:
        """`watcher.wait(timeout)` that a signal also ends (see `catch_signals`): on return
        to Python its handler runs."""
        agent = [self.agent[0]] if self.agent is not None else []
        watcher.wait(timeout, also=[self.wakeup, *agent] if self.wakeup >= 0 else agent)
        if self.wakeup >= 0:
            drain_fd(self.wakeup)
        if self.agent is not None:
            self.agent[1]()

    def watcher(self) -> wake.MemberWake:
        """What every wait of this member blocks on, made at the first wait and kept for
        the life of the process: teamd's wake pipe, or, without one, an inotify watcher of
        its own on the team folder (loudly: `wake_fallback`, `last_error`)."""
        if self.waker is None:
            self.waker = wake.MemberWake(self.wake_fd, self.own_watcher, self.report_fallback)
        return self.waker

    def own_watcher(self) -> OwnFeed:
        """The fallback: the store's change feed of the team, woken by the member's inbox
        (and, while `watch_roster`, the roster and the spend; a lead, its teammates'
        states); a poll where the store cannot push."""
        m = self.m

        def interesting(change: Change) -> bool:
            if change.kind is Kind.INBOX:
                return change.name == m.name
            return self.watch_roster and (change.kind is not Kind.MEMBER or m.kind == "lead")

        return OwnFeed(m.ws.store.changes([m.team], kinds=FALLBACK_KINDS), interesting)

    def report_fallback(self, reason: str) -> None:
        """Never silent (CONTRACT §7): the journal and `last_error` say it, once."""
        m = self.m
        events.emit(m.ws, m.team, "wake_fallback", member=m.name, reason=reason)
        m.standing.update_if_possible(last_error=f"wake fallback: {reason}")

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

    def wait_out(self, until: float, why: str) -> None:
        """Wait until `until` (epoch). A shutdown_request landing in the inbox ends the wait
        (`Leave`); other messages wait there with it, taken in by the next try."""
        watcher = self.watcher()
        self.m.shutdowns.leave_if_asked(why)
        while (left := until - time.time()) > 0:
            self.wait_on(watcher, left)
            self.m.shutdowns.leave_if_asked(why)
