"""`processes.Ladder`, the one way teamd ends a process (a member's, an earlier supervisor's,
a stray): SIGTERM, then SIGKILL once stop_timeout has passed. Real processes, real signals;
the ladder's clock is given, so no test waits out a timeout."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator

import psutil
import pytest

from teamd.processes import Ladder, Orphan
from tests.harness import wait_until

STOP_TIMEOUT = 20.0
STUBBORN = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(300)")
MEEK = "import time; print('ready', flush=True); time.sleep(300)"


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(10)
        if p.stdout is not None:
            p.stdout.close()


def start(started: list[subprocess.Popen[bytes]], code: str) -> Orphan:
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    started.append(p)
    assert p.stdout is not None and p.stdout.readline() == b"ready\n"
    return Orphan(proc=psutil.Process(p.pid), team="t", name="alice")


def ended_by(started: list[subprocess.Popen[bytes]], target: Orphan) -> int | None:
    [p] = [p for p in started if p.pid == target.proc.pid]
    return p.poll()


def test_sigkill_comes_only_once_stop_timeout_has_passed(
        started: list[subprocess.Popen[bytes]]) -> None:
    ladder, stubborn = Ladder(), start(started, STUBBORN)
    ladder.terminate(stubborn, 100.0)
    ladder.terminate(stubborn, 105.0)  # asked again: still one rung, its clock unmoved
    assert ladder.next_due(STOP_TIMEOUT) == 100.0 + STOP_TIMEOUT
    ladder.escalate(100.0 + STOP_TIMEOUT - 0.1, STOP_TIMEOUT)
    assert not stubborn.gone() and ended_by(started, stubborn) is None  # SIGTERM ignored
    ladder.escalate(100.0 + STOP_TIMEOUT, STOP_TIMEOUT)
    wait_until(lambda: ended_by(started, stubborn) == -signal.SIGKILL, 10, "SIGKILL")
    assert ladder.next_due(STOP_TIMEOUT) is None  # killed: no further deadline
    ladder.escalate(200.0, STOP_TIMEOUT)
    assert not ladder.rungs and not ladder.waiting()  # gone, and forgotten


def test_a_process_that_obeys_sigterm_never_gets_sigkill(
        started: list[subprocess.Popen[bytes]], caplog: pytest.LogCaptureFixture) -> None:
    ladder, meek = Ladder(), start(started, MEEK)
    ladder.terminate(meek, 100.0, warning="of an earlier supervisor is still running")
    wait_until(lambda: ended_by(started, meek) == -signal.SIGTERM, 10, "SIGTERM to end it")
    assert not ladder.waiting()
    ladder.escalate(100.0 + STOP_TIMEOUT, STOP_TIMEOUT)
    assert not ladder.rungs
    said = [r.getMessage() for r in caplog.records if r.name == "teamd.processes"]
    assert said == [f"t/alice: pid {meek.proc.pid} of an earlier supervisor is still "
                    "running: SIGTERM"]


def test_leaving_by_itself_starts_only_the_clock(
        started: list[subprocess.Popen[bytes]]) -> None:
    ladder, meek = Ladder(), start(started, MEEK)
    ladder.terminate(meek, 100.0, signal_it=False)  # an approved shutdown: no SIGTERM
    assert ladder.waiting() and ended_by(started, meek) is None
    ladder.escalate(100.0 + STOP_TIMEOUT, STOP_TIMEOUT)
    wait_until(lambda: ended_by(started, meek) == -signal.SIGKILL, 10, "SIGKILL")


def test_kill_all_ends_everything_at_once(started: list[subprocess.Popen[bytes]]) -> None:
    ladder = Ladder()
    both = [start(started, STUBBORN), start(started, STUBBORN)]
    for target in both:
        ladder.terminate(target, 100.0)
    ladder.kill_all()
    wait_until(lambda: all(ended_by(started, t) == -signal.SIGKILL for t in both), 10,
               "both to be killed")
