"""teamd.policy on its own: what an exit means, backoff delays and the crash-loop limit,
and which sleeping teammates to wake (CONTRACT §4 "Exits", §5 "Waking sleepers")."""

from __future__ import annotations

from typing import Any

import pytest

from teamd.policy import CrashHistory, sleepers_to_wake, status_after_exit
from teamd.proc import EXIT_BOOT_ERROR, EXIT_SHUTDOWN, EXIT_SLEEP
from teamd.settings import Settings

CONF = Settings(backoff_initial=1, backoff_max=8, backoff_reset=60, restart_limit=3,
                restart_window=60)


# -- status_after_exit -------------------------------------------------------------------
@pytest.mark.parametrize(("code", "desired", "stopping", "expected"), [
    (EXIT_SHUTDOWN, "running", False, "shutdown"),  # exit 0 only follows an approval
    (EXIT_SHUTDOWN, "stopped", False, "shutdown"),
    (EXIT_SLEEP, "running", False, "sleeping"),
    (1, "running", False, "backoff"),
    (EXIT_BOOT_ERROR, "running", False, "backoff"),
    (None, "running", False, "backoff"),  # killed by a signal from outside
    (None, "stopped", False, "shutdown"),  # SIGTERM after `stop --force`
    (1, "stopped", False, "shutdown"),
    # the supervisor itself is stopping: the members it stops wait for the next one ...
    (None, "running", True, "pending"),
    (1, "running", True, "pending"),
    # ... but what an exit says on its own stays true
    (EXIT_SLEEP, "running", True, "sleeping"),
    (None, "stopped", True, "shutdown"),
    (EXIT_SHUTDOWN, "stopped", True, "shutdown"),
])
def test_status_after_exit(code: int | None, desired: str, stopping: bool,
                           expected: str) -> None:
    assert status_after_exit(code, desired, stopping) == expected


# -- CrashHistory ------------------------------------------------------------------------
def test_delay_doubles_up_to_the_max() -> None:
    history = CrashHistory()
    delays = []
    for i in range(6):
        history.record(float(i), uptime=0.5, conf=CONF)
        delays.append(history.delay(CONF))
    assert delays == [1, 2, 4, 8, 8, 8]


def test_delay_starts_again_after_staying_up_backoff_reset() -> None:
    history = CrashHistory()
    for i in range(3):
        history.record(float(i), uptime=1, conf=CONF)
    assert history.delay(CONF) == 4
    history.record(100.0, uptime=CONF.backoff_reset, conf=CONF)  # it stayed up long enough
    assert history.delay(CONF) == 1
    history.record(101.0, uptime=1, conf=CONF)
    assert history.delay(CONF) == 2


def test_limit_counts_restarts_within_the_window() -> None:
    history = CrashHistory()
    for i in range(CONF.restart_limit):
        history.record(float(i), uptime=1, conf=CONF)
        assert not history.over_limit(CONF)
    history.record(float(CONF.restart_limit), uptime=1, conf=CONF)
    assert history.over_limit(CONF)  # more than restart_limit within restart_window


def test_crashes_older_than_the_window_do_not_count() -> None:
    history = CrashHistory()
    for t in (0.0, 1.0, 2.0):
        history.record(t, uptime=1, conf=CONF)
    # the next crash comes after the first ones left the window
    history.record(2.0 + CONF.restart_window + 1, uptime=1, conf=CONF)
    assert not history.over_limit(CONF)
    assert len(history.times) == 1


def test_reset_forgets_everything() -> None:
    history = CrashHistory()
    for i in range(5):
        history.record(float(i), uptime=1, conf=CONF)
    assert history.over_limit(CONF)
    history.reset()
    assert not history.over_limit(CONF)
    history.record(10.0, uptime=1, conf=CONF)
    assert history.delay(CONF) == CONF.backoff_initial


# -- sleepers_to_wake (mail; tasks: test_assign.py) ---------------------------------
def m(name: str, status: str = "sleeping", *, desired: str = "running",
      kind: str = "teammate") -> dict[str, Any]:
    return {"name": name, "status": status, "desired": desired, "kind": kind}


def test_nothing_to_do_wakes_nobody() -> None:
    assert sleepers_to_wake([m("a"), m("b")], set(), set()) == []


def test_mail_wakes_its_owner_only() -> None:
    members = [m("a"), m("b"), m("c", "idle")]
    assert sleepers_to_wake(members, {"b"}, {"c"}) == ["b"]


def test_mail_does_not_wake_a_stopped_member_or_one_still_running() -> None:
    members = [m("a", desired="stopped"), m("b")]
    # "b" says sleeping but its process is live (a stale status): nothing to fork
    assert sleepers_to_wake(members, {"a", "b"}, {"b"}) == []


def test_mail_wakes_a_sleeping_lead() -> None:
    assert sleepers_to_wake([m("lead", kind="lead")], {"lead"}, set()) == ["lead"]
