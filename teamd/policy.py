"""The member's states as a table: what the supervisor does for a member (`decide`), what
an exit leaves it in (`after_exit`), backoff delays, the crash-loop limit, which sleeping
members mail wakes, and when mail wakes an LLM lead (CONTRACT §4, §5, §9, §12).

Pure functions of the roster, what the supervisor knows of its processes and the
clock: the supervisor's loop only does what they return, and these rules are tested on their
own. Each edge is commented `# FROM -> TO` the way supervisord's `transition()` comments its
own; who may write each status, and from which, is `teamd.states`'s table, which every
move here passes (`Outcome.write`).
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from teamd.files import Json
from teamd.proc import EXIT_NO_SPACE, EXIT_SHUTDOWN, EXIT_SLEEP, describe_exit
from teamd.settings import Settings
from teamd.states import Move, Status, Writer, transition

if TYPE_CHECKING:
    from teamd.processes import MemberProcess

#: a teammate in one of these is still at work: the team is not quiet (CONTRACT §12)
WORKING = (Status.STARTING, Status.ACTIVE, Status.WAITING)
#: a member in one of these will not come back by itself: only `restart` or `up` starts it
GONE = (Status.SHUTDOWN, Status.FAILED)
#: a teammate in one of these waits for work: a task may be handed to it (CONTRACT §5)
AWAITING_WORK = (Status.IDLE, Status.SLEEPING)


@dataclass
class CrashHistory:
    """Recent crash times of one member, and its current run of consecutive crashes."""

    times: deque[float] = field(default_factory=deque)
    streak: int = 0

    def record(self, now: float, uptime: float, conf: Settings) -> None:
        if uptime >= conf.backoff_reset:
            self.streak = 0  # it stayed up long enough: start the delay afresh
        self.streak += 1
        self.times.append(now)
        while self.times and now - self.times[0] > conf.restart_window:
            self.times.popleft()

    def over_limit(self, conf: Settings) -> bool:
        return len(self.times) > conf.restart_limit

    def delay(self, conf: Settings) -> float:
        return float(min(conf.backoff_max, conf.backoff_initial * 2 ** (self.streak - 1)))

    def reset(self) -> None:
        self.times.clear()
        self.streak = 0

    def copy(self) -> CrashHistory:
        return replace(self, times=deque(self.times))


def error_holds(member: Json) -> bool:
    """Does the member's `last_error` still hold once its process is gone? A paused
    member's says why it is paused (a budget reached, a model with no price), which holds
    until a person changes it; any other was about the process that ended (a retry, a
    wake fallback) and is cleared with it."""
    return member.get("status") == "paused"


def status_after_exit(code: int | None, desired: str, supervisor_stopping: bool) -> Status:
    """The status an exit leaves a member in (CONTRACT §4, "Exits"): `desired=stopped`
    (or an approved shutdown's exit 0) → shutdown; 75 → sleeping, which survives a
    supervisor restart; anything else is a crash → backoff, unless the supervisor is
    stopping (it SIGTERMed the member itself) → pending, for the next supervisor."""
    if desired == "stopped" or code == EXIT_SHUTDOWN:
        return Status.SHUTDOWN
    if code == EXIT_SLEEP:
        return Status.SLEEPING
    if supervisor_stopping:
        return Status.PENDING
    return Status.BACKOFF


#: back-off of a member that cannot start for want of space (CONTRACT §3, §4 "Exits")
SPACE_RETRY_FIRST, SPACE_RETRY_MAX = 1.0, 30.0


def space_delay(held: tuple[float, float] | None, now: float) -> float:
    """How long to hold a member back after a start failed for want of space (or would, for
    want of descriptors): 1 s doubling to 30 s while such failures keep coming, from 1 s
    again once they stopped for a while. `held`: its last hold (no fork before, delay)."""
    if held is None or now - held[0] >= 2 * SPACE_RETRY_MAX:
        return SPACE_RETRY_FIRST
    return min(SPACE_RETRY_MAX, held[1] * 2)


# -- what to do for a member ----------------------------------------------------------------
class Verb(enum.Enum):
    NOTHING = "nothing"
    #: fork its process (`reset`: for a `restart`, its restarts and crash history cleared)
    SPAWN = "spawn"
    #: nothing now; look again at `Action.at` (a backoff or a space hold-off runs out)
    WAIT = "wait"
    #: SIGTERM its process, SIGKILL after stop_timeout
    STOP = "stop"
    #: STOP, for a `restart`: its exit is not a crash, and it is forked again at once
    RESTART = "restart"
    #: it approved its shutdown and exits 0 by itself: no SIGTERM, but SIGKILL after
    #: stop_timeout if it is still here
    LET_LEAVE = "let_leave"
    #: a live process of an earlier supervisor: SIGTERM, SIGKILL after stop_timeout; nothing
    #: is forked for the member until it is gone
    END_ORPHAN = "end_orphan"
    #: write `Action.status` for a member with no process
    MARK = "mark"


@dataclass(frozen=True)
class Action:
    verb: Verb
    reset: bool = False  # SPAWN: a restart, not counted toward restart_limit
    at: float | None = None  # WAIT: when to look again
    status: Status | None = None  # MARK: the status to write


NOTHING = Action(Verb.NOTHING)


def decide(member: Json, process: MemberProcess | None, now: float, *, orphan: bool = False,
           deleting: bool = False, wake: bool = False, held_until: float = 0.0) -> Action:
    """What the supervisor does for `member` (its roster entry, spec and live fields merged).

    `process`: the process this supervisor forked for it and has not reaped yet, or None;
    `orphan`: with no such process, whether a live process of an earlier supervisor holds its
    roster pid; `deleting`: its team is being deleted (no new work, no new fork); `wake`: it
    sleeps and something wakes it (`sleepers_to_wake`); `held_until`: no fork before this (a
    start that failed for want of space)."""
    status, desired = member["status"], member["desired"]
    requested = member.get("restart_requested_at") or 0

    def spawn(reset: bool = False) -> Action:
        if now < held_until:
            return Action(Verb.WAIT, at=held_until)  # short of space: held back, not a crash
        return Action(Verb.SPAWN, reset=reset)

    if process is not None:
        # with a process of ours, starting … stopping are the member's own to write
        if desired == "stopped" and status == "stopping":
            # STOPPING -> SHUTDOWN: it approved its shutdown and exits 0 by itself
            return Action(Verb.LET_LEAVE)
        if desired == "stopped":
            # RUNNING -> STOPPING(signal): `stop --force`, `delete --force`, a shutdown
            # answered on its behalf
            return Action(Verb.STOP)
        if requested > process.started_at:
            # RUNNING -> PENDING -> STARTING: `restart` of a live member
            return Action(Verb.RESTART)
        return NOTHING
    if orphan:
        # PENDING(an earlier supervisor's process) -> PENDING: end it before forking anew
        return Action(Verb.END_ORPHAN)
    if desired != "running":
        # any -> SHUTDOWN: stopped with no process (never started, or it died meanwhile)
        return NOTHING if status == "shutdown" else Action(Verb.MARK, status=Status.SHUTDOWN)
    if deleting:
        return NOTHING  # no new work enters a team being deleted
    if requested > (member.get("started_at") or 0):
        # FAILED / BACKOFF / SHUTDOWN / PENDING -> STARTING: `restart` clears the count
        return spawn(reset=True)
    if status in GONE:
        return NOTHING  # FAILED, SHUTDOWN: only `restart` (or `up`) starts it again
    if status == "backoff":
        due = float(member.get("restart_at") or 0)
        # BACKOFF -> STARTING once its delay is over
        return spawn() if now >= due else Action(Verb.WAIT, at=due)
    if status == "sleeping":
        # SLEEPING -> STARTING: mail or work wakes it; it resumes its session
        return spawn() if wake else NOTHING
    # PENDING -> STARTING; and starting, active, idle, waiting, paused or stopping with no
    # process (a supervisor killed with -9 left it so) -> STARTING: it resumes its session
    return spawn()


# -- what an exit leaves a member in --------------------------------------------------------
@dataclass(frozen=True)
class Outcome:
    """What one exit leaves a member in. `restart_at` and `last_error` are written when not
    None (an exit never clears them); `delay` is the backoff's, in seconds."""

    status: Status
    restarts: int
    history: CrashHistory  # its crash history after this exit
    restart_at: float | None = None
    delay: float | None = None
    last_error: str | None = None
    #: `last_error` no longer holds (`error_holds`): cleared, not left as it was
    clear_error: bool = False
    #: the delay is a hold-off for want of space: the supervisor forks nothing for the
    #: member before it runs out, and nothing counts toward restart_limit
    held_for_space: bool = False
    #: FAILED: why, for `member_failed` to the lead (to the person, of an LLM lead)
    failed_reason: str | None = None

    @property
    def release_tasks(self) -> bool:
        """It will not come back by itself: its tasks go back to the board."""
        return self.status in GONE

    def write(self, member: Json) -> Move | None:
        """Write the outcome into `member`'s live fields; (from, to) if its status moved."""
        member["restarts"] = self.restarts
        if self.restart_at is not None:
            member["restart_at"] = self.restart_at
        if self.last_error is not None or self.clear_error:
            member["last_error"] = self.last_error
        return transition(member, self.status, Writer.TEAMD)


def held_for_space(member: Json, now: float, delay: float, why: str, *,
                   history: CrashHistory) -> Outcome:
    """A member held back `delay` s for want of space, `why` in its `last_error`: its
    restarts and crash history stay as they were (CONTRACT §4 "Exits": a start that fails
    for want of space, in the child or in teamd recording it, never counts toward
    restart_limit and never ends in `failed`)."""
    # STARTING / RUNNING -> BACKOFF(held): retried when the hold runs out, never counted
    return Outcome(Status.BACKOFF, restarts=int(member.get("restarts") or 0), history=history,
                   restart_at=now + delay, delay=delay, held_for_space=True,
                   last_error=f"held back for want of space: {why}; starting again in "
                              f"{delay:g} s")


def after_exit(member: Json, process: MemberProcess, code: int | None, sig: int | None,
               now: float, conf: Settings, *, history: CrashHistory,
               space_held: tuple[float, float] | None = None,
               stopping: bool = False) -> Outcome | None:
    """Read an exit (CONTRACT §4 "Exits"): `member` as the roster has it, read under its lock;
    `process` the one reaped, with its exit `code` or signal `sig`; `history` its crashes so
    far (left as it is: the outcome carries the new one); `space_held` its last hold-off for
    want of space; `stopping`: the supervisor itself is stopping. None when the exit is not
    the member's news: a newer process is recorded, or this one never ran."""
    if process.aborted or member.get("pid") not in (None, process.pid):
        return None
    restarts = int(member.get("restarts") or 0)
    if process.restarting and not stopping:
        # RUNNING -> PENDING: teamd stopped it for a `restart`; forked again at once and
        # nothing counts toward restart_limit
        return Outcome(Status.PENDING, restarts=0, history=CrashHistory())
    status = status_after_exit(code if sig is None else None, member["desired"], stopping)
    if status != "backoff":
        # STOPPING -> SHUTDOWN (desired stopped, or exit 0 after an approval);
        # IDLE -> SLEEPING (exit 75); RUNNING -> PENDING (teamd itself is stopping: what
        # the process said of its trouble, "retrying at …", holds no more)
        return Outcome(status, restarts=restarts, history=history,
                       clear_error=status == "pending" and not error_holds(member))
    if code == EXIT_NO_SPACE and sig is None:
        return held_for_space(member, now, space_delay(space_held, now),
                              "it stopped for want of space (see its log)", history=history)
    crashes = history.copy()
    crashes.record(now, now - process.started_at, conf)
    restarts += 1
    if crashes.over_limit(conf):
        # RUNNING -> FAILED: more than restart_limit crashes within restart_window
        reason = (f"{describe_exit(code, sig)}; {restarts} restarts within "
                  f"{conf.restart_window:g}s")
        return Outcome(Status.FAILED, restarts=restarts, history=crashes, last_error=reason,
                       failed_reason=reason)
    # RUNNING -> BACKOFF: a crash; the roster, not only the journal, says why (CONTRACT §4)
    delay = crashes.delay(conf)
    return Outcome(Status.BACKOFF, restarts=restarts, history=crashes, restart_at=now + delay,
                   delay=delay,
                   last_error=f"{describe_exit(code, sig)}; restart {restarts} in {delay:g} s")


def sleepers_to_wake(members: list[Json], inbox_waiting: set[str], live: set[str]
                     ) -> list[str]:
    """Sleeping members to fork again: those with mail that wakes them (`inbox_waiting`).
    Work wakes a sleeper through mail too: teamd assigns it a task with `task_assigned`
    (`teamd.assign`), which lands in its inbox."""
    return [m["name"] for m in members if m["status"] == "sleeping"
            and m["desired"] == "running" and m["name"] not in live
            and m["name"] in inbox_waiting]


def team_is_quiet(members: list[Json], live: set[str]) -> bool:
    """No teammate is at work: none live and `starting`, `active` or `waiting`."""
    return not any(m.get("kind", "teammate") == "teammate" and m["status"] in WORKING
                   and m["name"] in live for m in members)


def mail_wakes_lead(messages: list[Json], members: list[Json], live: set[str],
                    mode: str) -> bool:
    """Whether what waits in an idle (or sleeping) LLM lead's inbox wakes it. With
    `lead_wake_on_idle = "quiet"` idle notifications alone wait until the team is quiet, so
    a lead is not called once per teammate that settles; anything else wakes it at once."""
    if not messages:
        return False
    if mode != "quiet" or any(m.get("type") != "idle_notification" for m in messages):
        return True
    return team_is_quiet(members, live)
