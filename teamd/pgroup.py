"""Running a command the product starts — the `bash` tool, a hook — in its own process
group (CONTRACT §8, §11): the environment it gets (never the API key, the store's URL or
the crash points), a timeout that kills the whole group, and output kept within a bound
(head and tail). The one runner: `run`.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# After the command ends the group is killed; output still in the pipe is read for at most
# this long (a grandchild that escaped into its own session could hold the pipe forever).
DRAIN_GRACE = 2.0
#: never in the environment of what the product starts (CONTRACT §8): the API credentials,
#: the descriptor number teamd re-executes with, the systemd notify socket (a `bash` that
#: wrote to it would speak for the supervisor), the store's URL and the test crash points;
#: and by prefix, the watchdog's variables and PostgreSQL's (PGPASSWORD, PGHOST, ...)
_DROPPED_ENV = frozenset({"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "TEAMD_KEY_FD",
                          "NOTIFY_SOCKET", "TEAMD_STORE"})
_DROPPED_PREFIXES = ("WATCHDOG_", "PG", "TEAMD_CRASH_")


def child_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for what a member or teamd starts — `bash`, a hook, git: ours
    (`environ`), less what must never reach it (`_DROPPED_ENV`, `_DROPPED_PREFIXES`)."""
    return {k: v for k, v in (os.environ if environ is None else environ).items()
            if k not in _DROPPED_ENV and not k.startswith(_DROPPED_PREFIXES)}


class Capture:
    """Output kept within a bound: the first `cap` bytes and the last `cap` bytes."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_len = 0
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail.append(data)
            self.tail_len += len(data)
            while self.tail_len - len(self.tail[0]) >= self.cap:
                self.tail_len -= len(self.tail.popleft())

    def read_from(self, fd: int) -> bool:
        """Add what non-blocking `fd` has now; False at end of file."""
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return True
        if not data:
            return False
        self.add(data)
        return True

    def text(self, cap: int) -> str:
        """Decoded output, at most about `cap` characters: head and tail, middle elided."""
        tail = b"".join(self.tail)
        dropped = self.total - len(self.head) - len(tail)
        whole = self.head.decode("utf-8", "replace")
        if not tail and len(whole) <= cap:
            return whole
        rest = tail.decode("utf-8", "replace")
        full = whole + rest
        if dropped == 0 and len(full) <= cap:
            return full
        half = cap // 2
        omitted = len(full) - 2 * half + dropped
        return (f"{full[:half]}\n[... {omitted} characters omitted ...]\n"
                f"{full[len(full) - half:]}")


def kill_group(pgid: int) -> None:
    """SIGKILL every process in group `pgid`; a group already gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


@dataclass(frozen=True)
class Ran:
    """How a command ended: its output (as `run` kept it), its exit code (None when it
    timed out; negative when a signal killed it) and whether it timed out."""

    output: str
    returncode: int | None
    timed_out: bool


def run(argv: list[str], cwd: Path, env: Mapping[str, str], *, timeout: float | None,
        cap: int,
        keep: int, stdin: bytes | None = None, stderr_only: bool = False,
        groups: set[int] | None = None) -> Ran:
    """Run `argv` in `cwd` in a new session (its own process group), with `env` as it is
    (give it `child_env`). `stdin` is fed (without it: /dev/null); the output kept is
    stdout and stderr merged, or with `stderr_only` stderr alone (stdout thrown away),
    `keep` bytes of head and of tail, returned as about `cap` characters. When the
    command exits or `timeout` passes (None: no limit), its whole group is SIGKILLed:
    nothing it started outlives it. `groups` (a member's `Toolbox.groups`) holds the group
    while it runs, so a SIGTERM handler can kill it before the process dies.

    The exit is watched through a pidfd so the group is killed while the command is still
    an unreaped zombie: its pid (the group id) cannot be reused before we signal it."""
    proc = subprocess.Popen(
        argv, cwd=cwd, env=dict(env),
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.DEVNULL if stderr_only else subprocess.PIPE,
        stderr=subprocess.PIPE if stderr_only else subprocess.STDOUT,
        start_new_session=True, close_fds=True)
    running = groups if groups is not None else set()
    running.add(proc.pid)  # start_new_session: the group id is the command's pid
    pipe = proc.stderr if stderr_only else proc.stdout
    assert pipe is not None
    out = Capture(keep)
    fd = pipe.fileno()
    os.set_blocking(fd, False)
    data = memoryview(stdin or b"")
    deadline = None if timeout is None else time.monotonic() + timeout
    timed_out = exited = eof = False
    pidfd: int | None
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        pidfd = None  # no pidfd (old kernel): fall back to polling the exit below
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ, "out")
            if proc.stdin is not None:
                os.set_blocking(proc.stdin.fileno(), False)
                sel.register(proc.stdin, selectors.EVENT_WRITE, "in")
            if pidfd is not None:
                sel.register(pidfd, selectors.EVENT_READ, "exit")
            while not exited:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    timed_out = True
                    break
                wait = left if pidfd is not None else min(left or 0.05, 0.05)
                for key, _ in sel.select(wait):
                    if key.data == "exit":
                        exited = True
                    elif key.data == "in":
                        data = _feed(proc, sel, data)
                    elif not eof and not out.read_from(fd):
                        eof = True
                        sel.unregister(fd)
                if pidfd is None and proc.poll() is not None:
                    exited = True
            # Whatever is left of the group (background jobs, or everything on a timeout)
            # dies now: no process outlives the command.
            kill_group(proc.pid)
            if proc.stdin is not None and not proc.stdin.closed:
                sel.unregister(proc.stdin)
                _close_quietly(proc)
            if pidfd is not None:
                sel.unregister(pidfd)  # stays readable once it exits: stop watching it
            grace = time.monotonic() + DRAIN_GRACE
            while not eof and (left := grace - time.monotonic()) > 0:
                for key, _ in sel.select(left):
                    if key.data == "out" and not out.read_from(fd):
                        eof = True
    finally:
        # Again, in case an exception cut the watch short; harmless otherwise (the command
        # is not reaped yet, so its pid, the group id, cannot have been reused).
        kill_group(proc.pid)
        if pidfd is not None:
            os.close(pidfd)
        _close_quietly(proc)
        pipe.close()
        proc.wait()
        running.discard(proc.pid)
    return Ran(out.text(cap), None if timed_out else proc.returncode, timed_out)


def _feed(proc: subprocess.Popen[bytes], sel: selectors.BaseSelector,
          data: memoryview) -> memoryview:
    """Write what the pipe takes; close stdin once all is written or the command stopped
    reading (a hook need not read its event)."""
    assert proc.stdin is not None
    try:
        data = data[os.write(proc.stdin.fileno(), data):]
    except BlockingIOError:
        return data
    except (BrokenPipeError, OSError):
        data = data[len(data):]
    if not data:
        sel.unregister(proc.stdin)
        _close_quietly(proc)
    return data


def _close_quietly(proc: subprocess.Popen[Any]) -> None:
    if proc.stdin is not None and not proc.stdin.closed:
        try:
            proc.stdin.close()
        except OSError:
            pass
