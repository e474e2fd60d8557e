"""Crash points, for testing (CONTRACT §17): a process of the product killed with SIGKILL
just before, or just after, its Nth durable write.

`TEAMD_CRASH_AT=N` (before write N) or `after:N`, `TEAMD_CRASH_LOG=FILE` (one line per durable
write once it happened: `{"n", "pid", "what", "path"}`, one `O_APPEND` write each) and
`TEAMD_CRASH_WHO` (`teamd`, a member's name, `teamctl`; unset: any process) are read once per
process, and again in a forked child, which counts its own writes from 1. A process about
to crash appends `{"fired": N, "pid"}` to the log first; once that line is there no process
started (or forked) afterwards is armed, and no second process fires, so recovery can be
watched. A malformed value is ignored with one warning line.

Every durable write calls `before(what, path)` and then `after(what, path)`: when none of
the variables is set both return at once on one attribute check.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

AT = "TEAMD_CRASH_AT"
LOG = "TEAMD_CRASH_LOG"
WHO = "TEAMD_CRASH_WHO"


class _Switch:
    """This process's reading of the variables, and its count of durable writes."""

    def __init__(self) -> None:
        self.on = False  # anything to do at all (a crash armed, or a log to write)
        self.at: int | None = None
        self.after = False
        self.log: str | None = None
        self.who: str | None = None
        self.me: str | None = None
        self.count = 0

    def load(self, warn: bool = True) -> None:
        self.count = 0
        self.at, self.after = None, False
        self.log = os.environ.get(LOG) or None
        self.who = os.environ.get(WHO) or None
        raw = os.environ.get(AT)
        if raw:
            text = raw.removeprefix("after:")
            if text.isdigit() and int(text) > 0:
                self.at, self.after = int(text), raw.startswith("after:")
            elif warn:
                print(f"teamd: ignoring {AT}={raw!r}: expected N or after:N (N >= 1)",
                      file=sys.stderr)
        if self.at is not None and self.log is not None and fired(Path(self.log)):
            self.at = None  # a crash already happened: this process is the recovery
        self.on = self.at is not None or self.log is not None

    def aimed(self) -> bool:
        return self.at == self.count and (self.who is None or self.who == self.me)

    def fire(self, what: str, path: Path) -> None:
        if self.log is not None:
            if fired(Path(self.log)):
                self.at = None  # another process crashed first: one crash per run
                return
            _append(self.log, {"fired": self.count, "pid": os.getpid(), "what": what,
                               "path": str(Path(path).absolute()), "after": self.after,
                               "who": self.me})
        os.kill(os.getpid(), signal.SIGKILL)


_switch = _Switch()


def identify(name: str) -> None:
    """Say which process this is (`teamd`, a member's name, `teamctl`) for `TEAMD_CRASH_WHO`."""
    _switch.me = name


def before(what: str, path: Path) -> None:
    """A durable write of `what` to `path` is about to be made: count it; crash here if aimed."""
    if not _switch.on:
        return
    _switch.count += 1
    if not _switch.after and _switch.aimed():
        _switch.fire(what, path)


def after(what: str, path: Path) -> None:
    """The write `before` counted has happened: log it; crash here if aimed after it."""
    if not _switch.on:
        return
    if _switch.log is not None:
        _append(_switch.log, {"n": _switch.count, "pid": os.getpid(), "what": what,
                              "path": str(Path(path).absolute()), "who": _switch.me})
    if _switch.after and _switch.aimed():
        _switch.fire(what, path)


def fired(log: Path) -> bool:
    """Whether a process has crashed at a point already (a `fired` line is in `log`)."""
    try:
        return b'"fired"' in log.read_bytes()
    except OSError:
        return False


def _append(log: str, record: dict[str, object]) -> None:
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, (json.dumps(record) + "\n").encode())
    finally:
        os.close(fd)


def _forked() -> None:
    """A forked child is a new process: its own count, not yet named (the warning, if
    any, was its parent's)."""
    _switch.me = None
    _switch.load(warn=False)


_switch.load()
os.register_at_fork(after_in_child=_forked)
