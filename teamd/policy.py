"""Restart policy: what an exit means, backoff delays, the crash-loop limit, which
sleeping members mail wakes, and when mail wakes an LLM lead. Pure functions of the roster
and the clock, so the supervisor's loop stays about processes and these rules
stay testable on their own.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from teamd.files import Json
from teamd.proc import EXIT_SHUTDOWN, EXIT_SLEEP
from teamd.settings import Settings

#: a teammate in one of these is still at work: the team is not quiet (CONTRACT §12)
WORKING = ("starting", "active", "waiting")


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


def status_after_exit(code: int | None, desired: str, supervisor_stopping: bool) -> str:
    """The status an exit leaves a member in (CONTRACT §4, "Exits"): `desired=stopped`
    (or an approved shutdown's exit 0) → shutdown; 75 → sleeping, which survives a
    supervisor restart; anything else is a crash → backoff, unless the supervisor is
    stopping (it SIGTERMed the member itself) → pending, for the next supervisor."""
    if desired == "stopped" or code == EXIT_SHUTDOWN:
        return "shutdown"
    if code == EXIT_SLEEP:
        return "sleeping"
    if supervisor_stopping:
        return "pending"
    return "backoff"


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
