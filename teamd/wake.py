"""Waking members: the supervisor is the only inotify watcher, each member process waits on
a pipe it inherited at fork (CONTRACT §3 "Delivery": nothing a member needs to wake may run
out with the size of the team, as inotify instances do at 128 per user).

Supervisor side: `open_pipe` before the fork (the child keeps the read end, teamd the write
end until it reaps the child), `poke` when a file that concerns the member changed (its
inbox; the roster or the spend for a paused member; the team settling for an LLM lead that
holds idle notifications — `roster_pokes`).

Member side: `MemberWake` waits on the read end and the signal wakeup fd, draining the pipe
before the caller's check, so a poke that follows a change is never lost. A member without a
usable pipe (started by hand, not by teamd, or the pipe broke) falls back to a `Fallback`
of its own, the store's change feed — loudly, once: `wake_fallback` in the journal and
`last_error` (`on_fallback`).
"""

from __future__ import annotations

import errno
import logging
import os
import select
import stat
from collections.abc import Callable, Sequence
from typing import Protocol

from teamd import policy
from teamd.files import Json

log = logging.getLogger(__name__)

#: what a poke is: the byte says nothing, only that something changed
POKE = b"!"
#: s an idle teammate waits for teamd to assign it a task before the lead hears "idle"
IDLE_NOTICE_GRACE = 1.0
#: s after a teammate went idle by which its idle notice, if any, has been sent: until
#: then the lead's quiet rule counts it as still at work (so the lead is woken once, with
#: every notice, rather than before the last one lands)
SETTLE = IDLE_NOTICE_GRACE + 0.5


# -- the supervisor's side -------------------------------------------------------------------
def open_pipe() -> tuple[int, int] | None:
    """(read end, write end), both non-blocking and close-on-exec (a tool the member runs
    must not hold either); None when the pipe cannot be made (out of descriptors): the
    member is started without one and falls back, saying so."""
    try:
        return os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        log.error("cannot make a wake pipe (%s): the member will wake by its own means", exc)
        return None


def poke(fd: int) -> bool:
    """Write one byte. A full pipe means a poke is already waiting (the member has not
    drained it yet), which is as good; a closed one means the member is gone. False only
    when the member can no longer be woken this way."""
    try:
        os.write(fd, POKE)
    except BlockingIOError:
        return True
    except OSError as exc:
        if exc.errno in (errno.EPIPE, errno.EBADF):
            return False
        raise
    return True


def close(fd: int | None) -> None:
    if fd is None:
        return
    try:
        os.close(fd)
    except OSError:
        pass


def roster_pokes(members: list[Json], live: set[str], lead_has_mail: Callable[[str], bool]
                 ) -> list[str]:
    """Members to poke after the roster or the team's spend changed: every live `paused`
    one (its budget may have been raised, CONTRACT §12), and an idle LLM lead with mail
    once the team is quiet (the quiet rule of §12: it holds idle notifications until then).
    A spurious poke costs the member one re-check; a missing one would leave it asleep."""
    poked = [m["name"] for m in members if m["name"] in live and m["status"] == "paused"]
    if policy.team_is_quiet(members, live):
        poked += [m["name"] for m in members if m.get("kind") == "lead"
                  and m["name"] in live and m["status"] == "idle"
                  and m["name"] not in poked and lead_has_mail(m["name"])]
    return poked


# -- the member's side -----------------------------------------------------------------------
class Fallback(Protocol):
    """What a member without a usable pipe waits on instead (`teamd.agent.waits.OwnFeed`)."""

    poll_fallback: float

    @property
    def polling(self) -> bool: ...

    def drain(self) -> None: ...

    def wait(self, timeout: float | None, also: Sequence[int] = ()) -> bool: ...

    def close(self) -> None: ...


def usable(fd: int | None) -> str | None:
    """Why `fd` cannot be a wake pipe's read end, or None when it can."""
    if fd is None:
        return "started without a wake pipe (not by teamd)"
    try:
        mode = os.fstat(fd).st_mode
    except OSError as exc:
        return f"wake pipe fd {fd} unusable: {exc.strerror or exc}"
    if not stat.S_ISFIFO(mode):
        return f"fd {fd} is not a pipe"
    return None


class MemberWake:
    """What an idle (waiting, paused) member blocks on: teamd's pokes through the pipe, or,
    failing that, its own change feed (built by `fallback`), reported through
    `on_fallback(reason)` once."""

    def __init__(self, fd: int | None, fallback: Callable[[], Fallback],
                 on_fallback: Callable[[str], None]) -> None:
        self._fd: int | None = fd
        self._make_fallback = fallback
        self._on_fallback = on_fallback
        self._watcher: Fallback | None = None
        why = usable(fd)
        if why is not None:
            self._fd = None
            self._fall_back(why)

    def _fall_back(self, why: str) -> None:
        if self._fd is not None:
            close(self._fd)
            self._fd = None
        self._watcher = self._make_fallback()
        if self._watcher.polling:
            why += f"; inotify unavailable too: polling every {self._watcher.poll_fallback:g} s"
        else:
            why += "; watching the store's changes itself"
        log.warning("wake fallback: %s", why)
        self._on_fallback(why)

    def drain(self) -> None:
        """Forget pokes (or changes) that came before now: what they brought is checked
        next by the caller."""
        if self._watcher is not None:
            self._watcher.drain()
            return
        assert self._fd is not None
        if not self._drain_pipe():
            self._fall_back("teamd's end of the wake pipe closed")

    def _drain_pipe(self) -> bool:
        """Empty the pipe; False at end of file (teamd is gone)."""
        assert self._fd is not None
        try:
            while True:
                chunk = os.read(self._fd, 4096)
                if not chunk:
                    return False
                if len(chunk) < 4096:
                    return True
        except BlockingIOError:
            return True

    def wait(self, timeout: float | None, also: Sequence[int] = ()) -> bool:
        """Block until poked, a descriptor in `also` is readable (left for the caller to
        empty), or `timeout` passed. True if woken by a poke or by `also`. The pipe is
        drained before returning, so the caller's check comes after the poke it answers."""
        if self._watcher is not None:
            return self._watcher.wait(timeout, also=also)
        assert self._fd is not None
        try:
            ready, _, _ = select.select([self._fd, *also], [], [], timeout)
        except InterruptedError:
            return True
        if self._fd in ready and not self._drain_pipe():
            self._fall_back("teamd's end of the wake pipe closed")
            return True
        return bool(ready)

    def close(self) -> None:
        if self._watcher is not None:
            self._watcher.close()
        close(self._fd)
        self._fd = None
