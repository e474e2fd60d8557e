"""A member process's end: reaping it, recording its exit, and stopping every process.

This module owns what follows SIGCHLD in `teamd run`: `waitpid` until nothing is left,
the exit written as `policy.after_exit` reads it (restart timer, crash history, a hold
for want of space, tasks released, `member_failed` to the lead or the person), the strays
a dead teammate's tools left to the subreaper, and `stop_all` at SIGTERM: SIGTERM every
member, SIGKILL what remains after `stop_timeout`. `Supervisor` is an `Exits`.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from teamd import events, inbox, journal_gaps, pidfile, policy
from teamd.actions import on_behalf
from teamd.files import Json
from teamd.holds import Holds, short_of_room
from teamd.layout import LEAD, SUPERVISOR, USER
from teamd.notify import Notifier
from teamd.paging import Pager
from teamd.proc import decode_wait_status, describe_exit
from teamd.processes import MemberProcess, find_strays
from teamd.wakeups import Wakeups

log = logging.getLogger(__name__)


class Exits(Wakeups):
    """Reaping member processes and strays; each exit recorded; the stop of everything."""

    # set by Supervisor.__init__
    pid: int
    crashes: dict[tuple[str, str], policy.CrashHistory]
    holds: Holds
    pager: Pager
    notifier: Notifier
    stopping: bool
    _lock: Any

    def reap_processes(self) -> None:
        """Collect every child that ended: a member's process (its exit recorded), or a
        stray we adopted; then end the strays its death left us."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            self.collect(pid, status)
        self.end_strays()

    def collect(self, pid: int, status: int) -> None:
        """`pid` was reaped: if it was a member's process, let go of it and record its exit
        (a stray needs nothing more)."""
        process = self.processes.pop(pid, None)
        self.pager.running.discard(pid)  # a person_needed hook that ended
        if process is not None:
            process.close()
            self.ladder.forget(process)
            self.record_exit(process, *decode_wait_status(status))

    def end_strays(self) -> None:
        """SIGTERM (SIGKILL after stop_timeout) what dead teammates left behind (their
        tools' process groups), which the subreaper flag made our children."""
        now = time.time()
        for stray in find_strays(self.pid, [*self.processes, *self.pager.running]):
            self.ladder.terminate(stray, now)

    def record_exit(self, process: MemberProcess, code: int | None, sig: int | None) -> None:
        """`on_exit`, surviving what it cannot write (a full disk): the supervisor goes on,
        and the next reconcile sees the member's process gone."""
        try:
            self.on_exit(process, code, sig)
        except Exception:
            log.exception("%s/%s: cannot record its exit", process.team, process.name)

    def on_exit(self, process: MemberProcess, code: int | None, sig: int | None) -> None:
        """Write what `policy.after_exit` reads in an exit; then what follows from it: the
        restart timer, the journal, its tasks released, the lead told of a failure."""
        now = time.time()
        team, name = key = process.key
        log.info("%s/%s pid %d exited: %s", team, name, process.pid, describe_exit(code, sig))
        if not self.ws.store.team_exists(team):
            return
        journal_gaps.mend(self.ws, team, name)  # its last move, if it died before the line
        journal_gaps.mend_tasks(self.ws, team, name, process.started_at)
        outcome: policy.Outcome | None = None
        kind = "teammate"

        def change(m: Json, config: Json) -> None:
            nonlocal outcome, kind
            outcome = policy.after_exit(
                m, process, code, sig, now, self.conf,
                history=self.crashes.get(key) or policy.CrashHistory(),
                space_held=self.holds.last(key), stopping=self.stopping)
            if outcome is None:
                return
            kind = m.get("kind", "teammate")
            m["last_exit"] = {"code": code, "signal": sig, "at": now}
            try:  # journaled before the status it explains is written (lock order: → events)
                events.emit(self.ws, team, "exited", member=name, code=code, signal=sig)
            except OSError as exc:  # no room to journal: the roster's record is what counts
                log.error("%s/%s: cannot journal its exit: %s", team, name, exc)
            if outcome.status == "shutdown":  # its approval, finished before it says so
                self.finish_answers(team, name, process.started_at)
            outcome.write(m)  # its status event journaled once it is written

        try:
            self.update_member(team, name, change)
        except Exception as exc:
            if short_of_room(exc):  # unrecorded, it must not be forked again at once
                self.holds.hold(team, name)
            log.exception("%s/%s: cannot record its exit", team, name)
            return
        if outcome is None:
            return
        self.crashes[key] = outcome.history
        if outcome.held_for_space:
            self.holds.hold(team, name, outcome.delay)
        try:
            if outcome.status == "backoff":
                events.emit(self.ws, team, "restart_scheduled", member=name,
                            delay=outcome.delay, restarts=outcome.restarts)
        except OSError as exc:  # the roster has it: the journal is the lesser loss
            log.error("%s/%s: cannot journal its exit: %s", team, name, exc)
        if outcome.status == "backoff":
            self.wake_in(outcome.delay or 0.0)
        if outcome.release_tasks:
            self.release_tasks(team, name)
        if outcome.failed_reason is not None:
            self.tell_failed(team, name, kind, outcome.failed_reason)

    def finish_answers(self, team: str, name: str, since: float) -> None:
        """What a member killed while approving its shutdown left (`on_behalf.finish`),
        finished under the roster lock (lock order: roster → request → inbox → events)."""
        try:
            on_behalf.finish(self.ws, team, name, since)
        except Exception:
            log.exception("%s/%s: cannot finish its shutdown's answer", team, name)

    def tell_failed(self, team: str, name: str, kind: str, reason: str) -> None:
        """`member_failed` to the journal and to the lead; of the LLM lead itself, to the
        person."""
        events.emit(self.ws, team, "member_failed", member=name, reason=reason)
        told = USER if kind == "lead" else LEAD
        msg = inbox.make("member_failed", SUPERVISOR, told,
                         f"{name} failed and will not be restarted ({reason}); "
                         f"`teamctl restart {team} {name}` starts it again",
                         member=name, reason=reason)
        inbox.deliver(self.ws, team, [msg])
        log.error("%s/%s failed: %s", team, name, reason)

    def stop_all(self) -> None:
        """SIGTERM every member's process, SIGKILL what remains after stop_timeout (strays
        included), reap, exit."""
        self.stopping = True
        self.notifier.stopping()
        for team in self.ws.store.team_names():
            events.emit(self.ws, team, "supervisor_stopping", pid=self.pid)
        now = time.time()
        for process in list(self.processes.values()):
            self.ladder.terminate(process, now)
        deadline = now + self.conf.stop_timeout
        while (self.processes or self.ladder.waiting()) and time.time() < deadline:
            self.reap_processes()
            if self.processes or self.ladder.waiting():
                self.wait_for_signal(min(0.5, deadline - time.time()))
        self.ladder.kill_all()
        for pid in list(self.processes):
            try:
                _, status = os.waitpid(pid, 0)
            except ChildProcessError:
                status = 0
            self.collect(pid, status)
        self.end_strays()  # what the last SIGKILLs left behind: no time is left to wait
        self.ladder.kill_all()
        pidfile.release(self.ws, self._lock)
        log.info("stopped")
