"""What wakes `teamd run`, and what it learns when woken: signals, files and timers.

This module owns the supervisor's waiting (gunicorn's arbiter plumbing): signal handlers
that only enqueue and wake the loop through the wakeup fd, the `select` on that fd and on
the store's change feed until the next timer, what a `Change` means (a member's inbox: a
poke through its wake pipe; a task: the board index; the roster: the cached view re-read,
only that record), and teamd's own member writes told to the cached roster at once.
`Supervisor` (teamd/supervisor.py) is a `Wakeups`; it keeps the state declared here.
"""

from __future__ import annotations

import os
import select
import signal
import time
from collections.abc import Callable
from typing import Any, TypeVar

from teamd import actions, roster, roster_cache
from teamd import assign as assign_mod
from teamd import wake as wake_mod
from teamd.files import Json
from teamd.hosts import Host
from teamd.layout import Workspace
from teamd.proc import drain_fd
from teamd.processes import Ladder, MemberProcess
from teamd.settings import Settings
from teamd.store import Change, Feed, Kind

T = TypeVar("T")

SAFETY_INTERVAL = 5.0  # a reconcile at least this often, in case a wakeup was missed
#: the changes the supervisor acts on (a journal line or a session write is not a reason)
SUPERVISED = frozenset({Kind.TEAM, Kind.SPEC, Kind.MEMBER, Kind.INBOX, Kind.TASK,
                        Kind.TASK_IDS, Kind.SPEND})


class Wakeups:
    """The supervisor's signals, change feed and timers; its writes of a member."""

    SIGNALS = (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

    # set by Supervisor.__init__
    ws: Workspace
    conf: Settings
    processes: dict[int, MemberProcess]
    ladder: Ladder
    boards: assign_mod.Boards
    views: dict[str, roster_cache.Cached]
    roster_touched: set[str]
    sig_queue: list[int]
    wake_at: float | None
    watchdog_every: float | None
    next_watchdog: float
    _pipe: tuple[int, int] | None
    feed: Feed | None
    host: Host | None

    def init_signals(self) -> None:
        r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._pipe = (r, w)
        signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        for sig in self.SIGNALS:
            signal.signal(sig, self.enqueue_signal)

    def enqueue_signal(self, signum: int, frame: object) -> None:
        self.sig_queue.append(signum)  # the loop does the work; handlers only take note

    def sleep(self) -> bool:
        """Wait for a signal, a change that matters, or the next timer. True when the
        roster should be reconciled."""
        assert self._pipe is not None and self.feed is not None
        if self.sig_queue:
            return True
        timeout = self.next_timeout()
        fds: list[Any] = [self._pipe[0]]
        if not self.feed.polling:
            fds.append(self.feed)
        try:
            ready, _, _ = select.select(fds, [], [], timeout)
        except InterruptedError:
            ready = []
        if not ready:
            return True  # a timer is due
        dirty = False
        if self._pipe[0] in ready:
            dirty = True
            drain_fd(self._pipe[0])
        if self.feed in ready:
            changes, lost = self.feed.drain()
            if lost:  # changes were lost: read the boards and the rosters again, and
                self.boards.reload_all()  # every member looks at its inbox (a message
                self.views.clear()  # whose notice was lost waits there; sleepers with
                self.poke_every_member()  # mail are woken by the reconcile)
                dirty = True
            for change in changes:
                if self.note_change(change):  # pokes, the board, the cached roster
                    dirty = True
        return dirty

    def next_timeout(self) -> float:
        now = time.time()
        deadlines = [now + SAFETY_INTERVAL]
        kill_due = self.ladder.next_due(self.conf.stop_timeout)
        if kill_due is not None:
            deadlines.append(kill_due)
        if self.wake_at is not None:
            deadlines.append(self.wake_at)
        if self.watchdog_every:
            deadlines.append(self.next_watchdog)
        if self.host is not None:  # the heartbeat (CONTRACT §15)
            deadlines.append(self.host.next_beat)
        return max(0.0, min(deadlines) - now)

    def dispatch_signals(self) -> None:
        while self.sig_queue:
            sig = self.sig_queue.pop(0)
            name = signal.Signals(sig).name.lower()
            getattr(self, f"handle_{name[3:]}")()

    def wait_for_signal(self, timeout: float) -> None:
        assert self._pipe is not None
        try:
            select.select([self._pipe[0]], [], [], max(0.0, timeout))
        except InterruptedError:
            pass
        drain_fd(self._pipe[0])
        self.sig_queue.clear()

    def note_change(self, change: Change) -> bool:
        """What the feed reported: poke the member whose inbox it is; keep the board index
        and the cached roster of its team up to date (only that record is read again);
        remember a roster or spend change for `roster_pokes`. True when the change needs a
        reconcile: mail for a member that is up needs none (unless it was just given a
        task: its taking it in is news), nor does a spend."""
        team = change.team
        match change.kind:
            case Kind.TEAM:  # a team came or went: its board and roster are new
                self.boards.forget(team)
                self.views.pop(team, None)
            case Kind.TASK | Kind.TASK_IDS:
                self.boards.note(change)
            case Kind.MEMBER:  # one member's live state
                if team in self.views and change.name is not None:
                    self.views[team].member_changed(change.name)
                self.roster_touched.add(team)
            case Kind.INBOX:
                owner = change.name or ""
                return not self.poke_members(team, [owner]) or self.boards.is_given(team, owner)
            case Kind.SPEC:
                if team in self.views:
                    self.views[team].spec_changed()
                self.roster_touched.add(team)
            case Kind.SPEND:
                self.roster_touched.add(team)
                return False
            case _:
                return False
        return True

    def poke_members(self, team: str, names: list[str]) -> bool:
        """Poke the live children among `names`; True if every one of them was poked."""
        poked = 0
        for process in self.processes.values():
            if process.team == team and process.name in names and process.wake_w is not None:
                if wake_mod.poke(process.wake_w):
                    poked += 1
                else:
                    wake_mod.close(process.wake_w)  # the member is gone
                    process.wake_w = None
        return poked == len(names)

    def poke_every_member(self) -> None:
        """Poke every member process: each looks at its inbox (a spare poke costs a look)."""
        for process in self.processes.values():
            if process.wake_w is not None and not wake_mod.poke(process.wake_w):
                wake_mod.close(process.wake_w)  # the member is gone
                process.wake_w = None

    def wake_in(self, seconds: float) -> None:
        at = time.time() + max(0.0, seconds)
        self.wake_at = at if self.wake_at is None else min(self.wake_at, at)

    # -- what teamd writes of a member: its cached roster forgets the old copy at once, so a
    # reconcile before the write's inotify event is drained never acts on it
    def update_member(self, team: str, name: str,
                      change: Callable[[Json, Json], T]) -> T | None:
        try:
            return roster.update_member(self.ws, team, name, change)
        finally:
            self.member_written(team, name)

    def release_tasks(self, team: str, name: str) -> None:
        try:
            actions.release_tasks(self.ws, team, name)
        finally:
            self.member_written(team, name)

    def member_written(self, team: str, name: str) -> None:
        view = self.views.get(team)
        if view is not None:
            view.member_changed(name)
