"""The processes teamd forks for its members, and the ones it ends.

A *member* is a roster entry; its *process* is what teamd forks for it (`MemberProcess`, the
record teamd keeps of it until it is reaped). Here: forking one (`fork_process`: the go pipe
that holds the child until teamd has recorded its pid and then hands it the API key, and
`child_main`, what the child does before the teammate's loop), and ending processes with
one ladder (`Ladder`: SIGTERM, then SIGKILL after `stop_timeout`) for all three kinds teamd
ends: a member's process, a live process of an earlier supervisor still named by the roster
(`Orphan`), and a process teamd adopted as a child subreaper when a teammate died (`Stray`,
found by `find_strays`). When to fork and when to end is `policy`'s; the loop that does it
is the supervisor's.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import resource
import signal
import sys
import time
import traceback
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import psutil

from teamd import apikey, crashpoints, files, wake
from teamd.layout import Workspace
from teamd.notify import NOTIFY_ENV_KEYS, scrub_child_env
from teamd.proc import (
    EXIT_BOOT_ERROR,
    EXIT_FENCED,
    EXIT_NO_SPACE,
    close_fds,
    die_with_parent,
    raise_oom_score_adj,
    redirect_stdio,
    reset_signals,
    set_dumpable,
    set_title,
    wipe_environ_block,
)
from teamd.settings import Settings
from teamd.store.errors import LeaseLost

log = logging.getLogger(__name__)

#: descriptors a fork needs free in teamd (its go pipe, then the roster and journal writes
#: that record it); with fewer, teamd does not fork (RLIMIT_NOFILE set too low)
FD_HEADROOM = 8
FD_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE})
GO = b"1"


def spare_fds() -> tuple[int, int] | None:
    """(descriptors still free, the RLIMIT_NOFILE soft limit), or None without a limit."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        used = len(os.listdir("/proc/self/fd")) - 1  # less the one listdir itself used
    except OSError as exc:
        if exc.errno in FD_ERRNOS:
            return 0, soft
        return None  # no /proc: nothing to judge by
    return soft - used, soft


# -- what teamd ends -----------------------------------------------------------------------
class Target(Protocol):
    """A process the ladder ends."""

    @property
    def label(self) -> str:
        """How the log names it."""

    @property
    def ident(self) -> tuple[int, float]:
        """(pid, start time): one process, never a later one under a reused pid."""

    def send(self, sig: int) -> bool:
        """Send `sig`; False when it is gone already."""

    def gone(self) -> bool:
        """It has ended (teamd forgets its own processes itself, when it reaps them)."""


@dataclass
class MemberProcess:
    """The process teamd forked for member `name` of `team`, until it is reaped."""

    team: str
    name: str
    pid: int
    create_time: float
    started_at: float
    #: stopped for a `restart_requested_at`: its exit is no crash; it is forked again at once
    restarting: bool = False
    #: never let run (its pid could not be recorded): its exit is nobody's news
    aborted: bool = False
    #: the write end of its go pipe until the child is let run (or told not to)
    go_fd: int | None = None
    #: the write end of its wake pipe (`teamd.wake`), kept for the process's whole life:
    #: made in `fork_process`, its read end kept by `child_main`, closed by `close`
    wake_w: int | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.team, self.name)

    @property
    def label(self) -> str:
        return f"{self.team}/{self.name} pid {self.pid}"

    @property
    def ident(self) -> tuple[int, float]:
        return (self.pid, self.create_time)

    def send(self, sig: int) -> bool:
        try:
            os.kill(self.pid, sig)  # our own unreaped child: its pid cannot be reused yet
        except ProcessLookupError:
            return False
        return True

    def gone(self) -> bool:
        return False  # until teamd reaps it, which forgets it

    def go(self) -> None:
        """Let the child run: teamd has recorded its pid. The API key follows the go byte
        (the one way a member gets it: CONTRACT §8, `teamd.apikey`)."""
        self._release(GO + apikey.as_bytes())

    def abort(self) -> None:
        """Tell the child not to run (it sees its go pipe close and exits)."""
        self.aborted = True
        self._release(b"")

    def close(self) -> None:
        """It was reaped: close what teamd still holds of it."""
        self._release(b"")
        fd, self.wake_w = self.wake_w, None
        wake.close(fd)

    def _release(self, word: bytes) -> None:
        fd, self.go_fd = self.go_fd, None
        if fd is None:
            return
        try:
            while word:  # a few bytes into an empty pipe: written at once
                word = word[os.write(fd, word):]
        finally:
            os.close(fd)


@dataclass
class _NotForked:
    """A process teamd did not fork, known through psutil, which re-checks its start time
    before each signal: a reused pid is never hit."""

    proc: psutil.Process

    @property
    def ident(self) -> tuple[int, float]:
        return (self.proc.pid, self.proc.create_time())

    def gone(self) -> bool:
        try:
            return not self.proc.is_running() or self.proc.status() == psutil.STATUS_ZOMBIE
        except psutil.Error:
            return True


@dataclass
class Orphan(_NotForked):
    """A live process of an earlier supervisor that the roster names for a member: normally
    dying of its parent-death signal already."""

    team: str
    name: str

    @property
    def label(self) -> str:
        return f"{self.team}/{self.name}: pid {self.proc.pid}"

    def send(self, sig: int) -> bool:
        try:
            self.proc.send_signal(sig)
        except psutil.Error:
            return False
        return True


@dataclass
class Stray(_NotForked):
    """What a dead teammate left behind (a tool's process group) that the subreaper flag made
    teamd's child. Signalled as a group unless its group is teamd's own or a member's."""

    spared_groups: frozenset[int]  # teamd's group and its members' (each leads its own)

    @property
    def label(self) -> str:
        try:
            return f"stray process {self.proc.pid} ({self.proc.name()})"
        except psutil.Error:
            return f"stray process {self.proc.pid}"

    def send(self, sig: int) -> bool:
        try:
            if not self.proc.is_running():  # psutil: the same pid *and* start time
                return False
            # a group id is not reused while the group has a process: its own pid keeps it
            pgid = os.getpgid(self.proc.pid)
            if pgid in self.spared_groups:
                os.kill(self.proc.pid, sig)
            else:
                os.killpg(pgid, sig)
        except (OSError, psutil.Error):
            return False
        return True



def find_strays(parent_pid: int, forked: Iterable[int]) -> list[Stray]:
    """teamd's children that are not processes it forked: strays it adopted."""
    try:
        kids = psutil.Process(parent_pid).children()
    except psutil.Error:
        return []
    mine = set(forked)
    spared = frozenset({os.getpgid(0), *mine})
    found = [Stray(proc=p, spared_groups=spared) for p in kids if p.pid not in mine]
    return [s for s in found if not s.gone()]  # a zombie is reaped, not signalled


@dataclass
class _Rung:
    target: Target
    since: float  # when it got SIGTERM (or its own leaving was timed)
    killed: bool = False


class Ladder:
    """One way to end a process, whatever it is: SIGTERM, then SIGKILL once it has ignored
    that for `stop_timeout` (CONTRACT §4, §9). A target is on the ladder once."""

    def __init__(self) -> None:
        self.rungs: dict[tuple[int, float], _Rung] = {}

    def terminate(self, target: Target, now: float, *, warning: str = "",
                  signal_it: bool = True) -> None:
        """SIGTERM `target`, once; `warning`: log it as a warning with these words (else at
        info). `signal_it=False`: it is leaving by itself (an approved shutdown), so only the
        clock to SIGKILL starts."""
        try:
            ident = target.ident
        except psutil.Error:
            return  # gone before it could be named
        if ident in self.rungs:
            return  # asked already: `escalate` follows up
        if signal_it:
            if not target.send(signal.SIGTERM):
                return
            if warning:
                log.warning("%s %s: SIGTERM", target.label, warning)
            else:
                log.info("sent SIGTERM to %s", target.label)
        self.rungs[ident] = _Rung(target, now)

    def escalate(self, now: float, stop_timeout: float) -> None:
        """SIGKILL what ignored SIGTERM for stop_timeout; forget what has ended."""
        for ident, rung in list(self.rungs.items()):
            if rung.target.gone():
                del self.rungs[ident]
            elif not rung.killed and now - rung.since >= stop_timeout:
                log.warning("%s ignored SIGTERM for %gs: SIGKILL", rung.target.label,
                            stop_timeout)
                self.kill(rung)

    def kill_all(self) -> None:
        """SIGKILL everything on the ladder now (teamd is exiting: stop_timeout is spent)."""
        for rung in list(self.rungs.values()):
            if not rung.killed and not rung.target.gone():
                log.info("sent SIGKILL to %s", rung.target.label)
                self.kill(rung)

    @staticmethod
    def kill(rung: _Rung) -> None:
        rung.killed = True
        rung.target.send(signal.SIGKILL)

    def forget(self, target: Target) -> None:
        """`target` was reaped."""
        self.rungs.pop(target.ident, None)

    def next_due(self, stop_timeout: float) -> float | None:
        """When the next SIGKILL falls due, if any."""
        due = [r.since + stop_timeout for r in self.rungs.values() if not r.killed]
        return min(due, default=None)

    def waiting(self) -> bool:
        """Is anything on the ladder still running?"""
        return any(not r.target.gone() for r in self.rungs.values())


# -- forking a member's process --------------------------------------------------------------
def fork_process(ws: Workspace, team: str, name: str, conf: Settings,
                 parent_pid: int, *, wake_pipe: bool = True) -> MemberProcess:
    """Fork member `name`'s process. The child waits at its go pipe until `go()` (teamd has
    recorded its pid in the roster; a forked child touches the roster only after that,
    CONTRACT §4) or `abort()`. With `wake_pipe` (teamd watches the files for it) it also
    gets the read end of a pipe teamd pokes to wake it (`teamd.wake`)."""
    go_r, go_w = os.pipe2(os.O_CLOEXEC)
    pipe = wake.open_pipe() if wake_pipe else None
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        os.close(go_w)
        child_main(ws, team, name, conf, parent_pid, go_r, None if pipe is None else pipe[0])
    os.close(go_r)
    if pipe is not None:
        os.close(pipe[0])
    try:
        create_time = psutil.Process(pid).create_time()
    except psutil.Error:
        create_time = time.time()
    return MemberProcess(team, name, pid, create_time, time.time(), go_fd=go_w,
                         wake_w=None if pipe is None else pipe[1])


def child_main(ws: Workspace, team: str, name: str, conf: Settings, parent_pid: int,
               go_r: int, wake_r: int | None) -> None:  # pragma: no cover - in the child
    """The forked child: its own process group, death with teamd, clean signals, descriptors
    and environment; then, once let go, the teammate's loop. Never returns."""
    code = EXIT_BOOT_ERROR
    crashpoints.identify(name)  # TEAMD_CRASH_WHO=NAME aims at this process (CONTRACT §17)
    try:
        apikey.hold(None)  # a member holds only what its go pipe hands it
        os.setpgid(0, 0)
        die_with_parent(signal.SIGTERM, parent_pid)
        reset_signals()
        log_file = ws.member_log(team, name)  # this host's own file, whatever the store
        files.ensure_dir(log_file.parent)
        redirect_stdio(str(log_file))
        raise_oom_score_adj()
        set_dumpable(False)
        close_fds(keep=[go_r] if wake_r is None else [go_r, wake_r])
        scrub_child_env(os.environ)
        wipe_environ_block(NOTIFY_ENV_KEYS)
        set_title(f"teamd: {name}@{team}")  # `ps` tells the members apart (CONTRACT §9)
        if os.read(go_r, 1) != GO:
            os._exit(EXIT_BOOT_ERROR)  # the supervisor changed its mind
        apikey.receive(go_r)  # the key, to the pipe's end; closes it
        from teamd.agent.loop import run_member

        code = run_member(ws, team, name, conf, wake_fd=wake_r)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except LeaseLost as exc:  # its host was fenced off: it acts for nobody now (§15)
        code = EXIT_FENCED
        with contextlib.suppress(OSError):
            print(f"teamd: {exc}: ending at once, writing nothing more", file=sys.stderr)
    except BaseException as exc:
        code = EXIT_NO_SPACE if files.out_of_space(exc) else 1
        with contextlib.suppress(OSError):  # its log may be out of room too: the code says it
            traceback.print_exc()
    finally:
        try:
            logging.shutdown()
        finally:
            os._exit(code)
