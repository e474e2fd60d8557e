"""Restart policy: what an exit means, backoff delays, the crash-loop limit, which
sleeping teammates to wake, and when mail wakes an LLM lead. Pure functions of the roster,
the board and the clock, so the supervisor's loop stays about processes and these rules
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


def sleepers_to_wake(members: list[Json], tasks: list[Json], inbox_waiting: set[str],
                     live: set[str]) -> list[str]:
    """Sleeping teammates to fork again: those with mail, a sleeping owner of an owned task
    that became claimable, and, for each unowned claimable task no idle or starting
    teammate can take, one more sleeper (lowest join order first)."""
    by_id = {int(t["id"]): t for t in tasks}

    def unblocked(t: Json) -> bool:
        return all(by_id.get(int(b), {}).get("status") == "completed" for b in t["blocked_by"])

    sleeping = [m for m in members if m["status"] == "sleeping" and m["desired"] == "running"
                and m["name"] not in live]
    wake = [m["name"] for m in sleeping if m["name"] in inbox_waiting]
    for m in sleeping:
        if m["name"] in wake or m["kind"] != "teammate":  # a lead never claims
            continue
        if any(t["owner"] == m["name"] and t["status"] == "pending" and unblocked(t)
               for t in tasks):
            wake.append(m["name"])
    open_tasks = [t for t in tasks if t["status"] == "pending" and t["owner"] is None
                  and unblocked(t)]
    takers = [m for m in members if m["kind"] == "teammate" and m["name"] in live
              and m["status"] in ("idle", "starting")]
    spare = len(open_tasks) - len(takers) - sum(1 for m in sleeping if m["name"] in wake
                                                 and m["kind"] == "teammate")
    for m in sleeping:
        if spare <= 0:
            break
        if m["name"] not in wake and m["kind"] == "teammate":
            wake.append(m["name"])
            spare -= 1
    return wake


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
