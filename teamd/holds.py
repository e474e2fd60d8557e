"""Members teamd holds back from forking for want of room (CONTRACT §3 "What a writer
leaves", §4 "Exits"): a start that failed for want of space (`files.out_of_space`: ENOSPC,
EDQUOT, EFBIG), or would for want of descriptors, waits out a hold-off and is tried again;
it is never a crash, never counted toward `restart_limit`, never `failed`.

`Holds` keeps each member's hold-off (no fork before, last delay; `policy.space_delay`
doubles it while the trouble lasts), and writes to the member's file what it can of one:
`last_error`, and for a fork teamd could not record, `backoff` until the hold runs out.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from teamd import files, policy, roster
from teamd.files import Json
from teamd.layout import Workspace
from teamd.processes import FD_ERRNOS, MemberProcess

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (team, name)
#: how the supervisor writes a member (`roster.update_member`, its cached roster told)
UpdateMember = Callable[[str, str, Callable[[Json, Json], Any]], Any]


def short_of_room(exc: BaseException) -> bool:
    """A write refused for want of space, or for want of descriptors to make it with."""
    return files.out_of_space(exc) or (isinstance(exc, OSError) and exc.errno in FD_ERRNOS)


class Holds:
    """The members held back for want of room, and what their files say of it."""

    def __init__(self, ws: Workspace, update_member: UpdateMember,
                 wake_in: Callable[[float], None]) -> None:
        self.ws = ws
        self.update_member = update_member
        self.wake_in = wake_in  # the supervisor looks again when a hold runs out
        self.held: dict[Key, tuple[float, float]] = {}

    def last(self, key: Key) -> tuple[float, float] | None:
        """The member's last hold (no fork before, its delay), if any."""
        return self.held.get(key)

    def until(self, key: Key) -> float:
        """No fork for the member before this (0: none held)."""
        held = self.held.get(key)
        return held[0] if held else 0.0

    def hold(self, team: str, name: str, delay: float | None = None) -> float:
        """Hold a member back from forking for `delay` s (by default `policy.space_delay`
        of its last hold); returns the delay."""
        now = time.time()
        if delay is None:
            delay = policy.space_delay(self.held.get((team, name)), now)
        self.held[(team, name)] = (now + delay, delay)
        self.wake_in(delay)
        return delay

    def note(self, team: str, name: str, why: str) -> None:
        """`last_error` of a member with no process, when it can be written."""
        def change(m: Json, _config: Json) -> None:
            if not roster.is_live(m):
                m["last_error"] = why

        self._write(team, name, change, "last_error")

    def refuse(self, process: MemberProcess, exc: BaseException) -> None:
        """`process` was forked but teamd could not record it for want of room (its pid in
        the roster, its start in the journal): tell it not to run (its exit is nobody's
        news), hold the member back, and write `backoff` with the reason where it can."""
        process.abort()
        team, name = process.key
        now = time.time()
        delay = self.hold(team, name)
        log.error("%s/%s: cannot record pid %d: %s; trying again in %g s", team, name,
                  process.pid, exc, delay)
        why = f"teamd cannot record its start ({exc})"

        def change(m: Json, config: Json) -> None:
            if m["desired"] != "running" or config.get("state") == "deleting" or (
                    m.get("pid") != process.pid and roster.is_live(m)):
                return  # stopped meanwhile, or not ours to say
            held = policy.held_for_space(m, now, delay, why, history=policy.CrashHistory())
            held.write(m)  # journaled once written; its file has it if the journal cannot

        self._write(team, name, change, "that it is held back")

    def _write(self, team: str, name: str, change: Callable[[Json, Json], Any],
               what: str) -> Any:
        try:
            return self.update_member(team, name, change)
        except Exception as exc:  # short of what it would take: the log has said why
            log.warning("%s/%s: cannot write %s: %s", team, name, what, exc)
            return None
