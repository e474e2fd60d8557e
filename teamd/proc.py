"""Process plumbing for forked teammates: parent-death signal, descriptor hygiene, exit codes,
and the one liveness check (`live_process`) the roster and the supervisor's pidfile share.

Exit codes are the protocol between a teammate and its supervisor (like gunicorn's
WORKER_BOOT_ERROR): 0 = approved a shutdown, 75 = went to sleep after idle_timeout,
anything else (or death by a signal) = a crash while `desired` is `running`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import signal
import subprocess
from collections.abc import Iterable
from typing import Any

import psutil

log = logging.getLogger(__name__)

EXIT_SHUTDOWN = 0
EXIT_SLEEP = 75  # EX_TEMPFAIL: "try again later"
EXIT_BOOT_ERROR = 3
EXIT_NO_SPACE = 74  # EX_IOERR: stopped for want of space; retried later, never a crash
EXIT_FENCED = 4  # its host lost its lease (CONTRACT §15): it ended itself, writing nothing

#: two start times closer than this are the same process (psutil rounds create_time)
SAME_START = 0.01

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36

_libc: ctypes.CDLL | None = None


def _prctl(option: int, arg: int) -> None:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if _libc.prctl(option, arg, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def live_process(pid: object, create_time: object) -> psutil.Process | None:
    """The process `pid` if it runs and started at `create_time`, else None: a pid since
    reused by an unrelated process (another start time), a zombie, a gone process, or a
    record whose values are no numbers never count (CONTRACT §4 "Live")."""
    try:
        if not pid or create_time is None:
            return None
        proc = psutil.Process(int(pid))  # type: ignore[call-overload]
        if abs(proc.create_time() - float(create_time)) > SAME_START:  # type: ignore[arg-type]
            return None
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
    except (psutil.Error, TypeError, ValueError):
        return None
    return proc


def die_with_parent(sig: int, parent_pid: int) -> None:
    """Ask the kernel to send `sig` when our parent dies, then close the race: the parent
    may have died between fork and prctl, in which case we were already reparented."""
    _prctl(PR_SET_PDEATHSIG, int(sig))
    if os.getppid() != parent_pid:
        os._exit(EXIT_BOOT_ERROR)


def become_subreaper() -> None:
    """Orphaned descendants (a dead teammate's `bash` children) are reparented to us,
    so the supervisor can reap and kill them instead of init inheriting strays."""
    try:
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
    except OSError as exc:  # not Linux, or too old: strays fall back to init
        log.warning("cannot become a child subreaper: %s", exc)


def set_dumpable(dumpable: bool) -> None:
    """Non-dumpable (False): no core dump, and no other process of the same user may
    ptrace this one or read its memory (`/proc/PID/mem`), environment or descriptors —
    where the API key lives in `teamd` and its members (CONTRACT §8). Exec resets it."""
    _prctl(PR_SET_DUMPABLE, int(dumpable))


def reset_signals() -> None:
    """A member's process inherits the supervisor's handlers and wakeup fd; drop them."""
    try:
        signal.set_wakeup_fd(-1)
    except ValueError:
        pass  # not the main thread
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD,
                signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)
    # Python ignores SIGPIPE (a closed connection is an EPIPE error to handle); SIG_DFL
    # would let one dropped connection kill the teammate
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())


OOM_SCORE_ADJ = "/proc/self/oom_score_adj"
OOM_SCORE_ADJ_MAX = 1000


def raise_oom_score_adj(by: int = 500) -> None:
    """Offer this process to the kernel's OOM killer before its parent: a teammate is
    restarted by policy, the supervisor is not. Raising needs no privilege (lowering
    would). Best effort: where /proc says no, the teammate runs as it is.

    A non-dumpable process's `/proc/self` files belong to root, so a member (non-dumpable
    from birth, like the `teamd` it was forked from) that is not root is dumpable for just
    this write, before it holds the key — as Chromium does for the same file."""
    try:
        try:
            _add_oom_score_adj(by)
        except PermissionError:
            set_dumpable(True)
            try:
                _add_oom_score_adj(by)
            finally:
                set_dumpable(False)
    except (OSError, ValueError) as exc:
        log.warning("cannot raise oom_score_adj: %s", exc)


def _add_oom_score_adj(by: int) -> None:
    with open(OOM_SCORE_ADJ, "r+") as fh:
        current = int(fh.read().strip() or 0)
        fh.seek(0)
        fh.write(str(min(OOM_SCORE_ADJ_MAX, current + by)))


def close_fds(keep: Iterable[int] = ()) -> None:
    """Close every inherited descriptor above stderr except `keep` (the supervisor's lock,
    inotify and sockets must not outlive it in a member's process)."""
    keep_sorted = sorted(k for k in set(keep) if k > 2)
    low = 3
    for fd in keep_sorted:
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, _max_fd())


def _max_fd() -> int:
    try:
        return len(os.listdir("/proc/self/fd")) and max(int(n) for n in
                                                         os.listdir("/proc/self/fd")) + 1
    except OSError:
        return os.sysconf("SC_OPEN_MAX")


def wipe_environ_block(keys: Iterable[str]) -> None:
    """Blank `keys` out of this process's original environment block, in place.

    `/proc/PID/environ` (what `ps e` shows) is the block the kernel laid out at exec, and a
    forked child shares a copy of its parent's: removing a variable with `unsetenv` (as
    `os.environ.pop` does) only drops the C `environ` pointer to it, the text stays visible.
    Call this after the keys were removed from `os.environ`; nothing points at the entries
    any more, so they are overwritten with NUL bytes. Best effort: silently does nothing
    where the block's bounds cannot be read.
    """
    wanted = tuple(f"{k}=".encode() for k in keys)
    try:
        with open("/proc/self/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])  # env_start, env_end (proc(5) 50, 51)
    except (OSError, IndexError, ValueError):
        return
    if not 0 < start < end:
        return
    block = ctypes.string_at(start, end - start)
    at = 0
    for entry in block.split(b"\0"):
        if entry.startswith(wanted):
            ctypes.memset(start + at, 0, len(entry))
        at += len(entry) + 1


def set_title(title: str) -> None:
    """Name this process where `ps`, `top` and psutil look: its command line (argv's
    memory, which Python cannot rewrite: the `setproctitle` package does) and its comm.
    Call it after `wipe_environ_block`: the title may take the environment block's room."""
    import setproctitle

    setproctitle.setproctitle(title)


def redirect_stdio(log_path: str) -> None:
    """stdin from /dev/null; stdout and stderr appended to the member's own log file."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.fchmod(fd, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def drain_fd(fd: int) -> None:
    """Empty a non-blocking pipe (a signal wakeup fd): only that something came matters."""
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def describe_exit(code: int | None, sig: int | None) -> str:
    if sig:
        try:
            return f"killed by {signal.Signals(sig).name}"
        except ValueError:
            return f"killed by signal {sig}"
    return f"exit code {code}"


def stop_subprocess(proc: subprocess.Popen[Any], timeout: float) -> None:
    """End a process started with `subprocess` (a `teamd run` the demo started, a bench's
    seed): SIGTERM, SIGKILL if it has not exited `timeout` seconds later; reaped either way."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)


def decode_wait_status(status: int) -> tuple[int | None, int | None]:
    """(code, signal) from a waitpid status."""
    if os.WIFSIGNALED(status):
        return None, os.WTERMSIG(status)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status), None
    return None, None
