"""How a member process waits (CONTRACT §3, §7): on teamd's wake pipe, or, without one, an
inotify watcher of its own (loudly: `wake_fallback`); a signal ends any wait at once.

Every wait of a member — idle, a permission asked, a budget reached, a retry's back-off —
blocks here, on one watcher made at the first wait and kept for the life of the process:
a wait costs no inotify instance, so nothing runs out with the size of the team.
"""

from __future__ import annotations

import os
import select
import signal
import time
from typing import TYPE_CHECKING

from teamd import events, wake
from teamd.proc import drain_fd
from teamd.watch import Watcher

if TYPE_CHECKING:
    from teamd.agent.member import Member


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

    def catch_signals(self) -> None:
        """A signal handler is Python code, run between bytecodes: a SIGTERM landing just
        before a blocking wait begins would sit unhandled until the wait ends (up to
        idle_timeout). The wakeup fd turns it into a readable byte the waits select on."""
        self.wakeup, wakeup_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wakeup_w, warn_on_full_buffer=False)

    def wait_on(self, watcher: wake.MemberWake, timeout: float | None) -> None:
        """`watcher.wait(timeout)` that a signal also ends (see `catch_signals`): on return
        to Python its handler runs."""
        also = [self.wakeup] if self.wakeup >= 0 else []
        watcher.wait(timeout, also=also)
        if also:
            drain_fd(self.wakeup)

    def watcher(self) -> wake.MemberWake:
        """What every wait of this member blocks on, made at the first wait and kept for
        the life of the process: teamd's wake pipe, or, without one, an inotify watcher of
        its own on the team folder (loudly: `wake_fallback`, `last_error`)."""
        if self.waker is None:
            self.waker = wake.MemberWake(self.wake_fd, self.own_watcher, self.report_fallback)
        return self.waker

    def own_watcher(self) -> Watcher:
        """The fallback: inotify on the team folder for the inbox (and, while
        `watch_roster`, the roster and the spend); a poll where inotify is missing."""
        m = self.m
        inbox_file = m.ws.inbox(m.team, m.name).name
        roster_files = (m.ws.config(m.team).name, m.ws.spend(m.team).name)

        folders = [m.ws.team_dir(m.team)]
        if m.kind == "lead":  # holding idle notices, it waits on teammates' statuses
            folders.append(m.ws.members_dir(m.team))

        def interesting(fname: str) -> bool:
            return fname == inbox_file or (self.watch_roster and (
                fname in roster_files or (m.kind == "lead" and fname.endswith(".json"))))

        return Watcher(folders, interesting=interesting)

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
