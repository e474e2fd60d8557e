"""The member's states as a table (CONTRACT §4): `policy.decide`, what teamd does for a member
in each status, and `policy.after_exit`, what each kind of exit leaves it in. Pure functions:
a roster entry, a process record and a clock in, a decision out."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from teamd import roster
from teamd.policy import (
    SPACE_RETRY_FIRST,
    SPACE_RETRY_MAX,
    Action,
    CrashHistory,
    Outcome,
    Verb,
    after_exit,
    decide,
    held_for_space,
)
from teamd.proc import EXIT_BOOT_ERROR, EXIT_NO_SPACE, EXIT_SHUTDOWN, EXIT_SLEEP
from teamd.processes import MemberProcess
from teamd.settings import Settings

NOW = 1_000_000.0
STARTED = NOW - 30  # when the member's process was forked
PID = 4242
CONF = Settings(backoff_initial=1, backoff_max=8, backoff_reset=60, restart_limit=3,
                restart_window=60)


def entry(status: str, desired: str = "running", **fields: Any) -> dict[str, Any]:
    """A member's roster entry, spec and live fields merged, as decide reads it."""
    m: dict[str, Any] = {"name": "alice", "kind": "teammate", "status": status,
                         "desired": desired, "pid": PID, "pid_create_time": STARTED,
                         "started_at": STARTED, "restart_requested_at": None,
                         "restart_at": None, "restarts": 0, "last_error": None}
    m.update(fields)
    return m


def ours(**fields: Any) -> MemberProcess:
    process = MemberProcess("t", "alice", PID, create_time=STARTED, started_at=STARTED)
    for key, value in fields.items():
        setattr(process, key, value)
    return process


SPAWN = Action(Verb.SPAWN)
NOTHING = Action(Verb.NOTHING)


# -- decide: no process of ours, desired running ----------------------------------------------
#: each status of the contract's table, for a member with no process and desired running
NO_PROCESS: dict[str, Action] = {
    "pending": SPAWN,  # no supervisor ran, or the last one stopped it
    # a status its process left behind (the supervisor was killed with -9): it resumes
    "starting": SPAWN, "active": SPAWN, "idle": SPAWN, "waiting": SPAWN, "paused": SPAWN,
    "stopping": SPAWN,  # asked to stop, then `restart` or `spawn` wanted it again
    "sleeping": NOTHING,  # until mail or work wakes it (below)
    "shutdown": NOTHING,  # only `restart` starts it again
    "backoff": SPAWN,  # its restart_at (None here) has passed
    "failed": NOTHING,  # the crash-loop limit: only `restart`
}


def test_the_table_has_a_row_for_every_status() -> None:
    assert sorted(NO_PROCESS) == sorted(roster.STATUSES)


@pytest.mark.parametrize("status", sorted(NO_PROCESS))
def test_with_no_process(status: str) -> None:
    assert decide(entry(status), None, NOW) == NO_PROCESS[status]


def test_backoff_waits_for_its_restart_at() -> None:
    due = NOW + 4
    assert decide(entry("backoff", restart_at=due), None, NOW) == Action(Verb.WAIT, at=due)
    assert decide(entry("backoff", restart_at=due), None, due) == SPAWN


def test_a_sleeper_is_forked_when_something_wakes_it() -> None:
    assert decide(entry("sleeping"), None, NOW, wake=True) == SPAWN
    assert decide(entry("sleeping"), None, NOW, wake=False) == NOTHING


@pytest.mark.parametrize("status", ["failed", "backoff", "shutdown", "pending", "sleeping"])
def test_restart_forks_at_once_and_resets_the_count(status: str) -> None:
    m = entry(status, restart_requested_at=STARTED + 1, restart_at=NOW + 60)
    assert decide(m, None, NOW) == Action(Verb.SPAWN, reset=True)


def test_a_restart_older_than_the_last_start_is_spent() -> None:
    m = entry("failed", restart_requested_at=STARTED - 1)
    assert decide(m, None, NOW) == NOTHING


@pytest.mark.parametrize("m", [entry("pending"), entry("backoff"),
                               entry("sleeping"), entry("failed", restart_requested_at=NOW)],
                         ids=["pending", "backoff", "sleeping", "restart"])
def test_a_hold_off_for_want_of_space_delays_every_fork(m: dict[str, Any]) -> None:
    held = NOW + 2
    assert decide(m, None, NOW, wake=True, held_until=held) == Action(Verb.WAIT, at=held)
    assert decide(m, None, held, wake=True, held_until=held).verb is Verb.SPAWN


@pytest.mark.parametrize("status", ["pending", "backoff", "sleeping", "idle"])
def test_nothing_is_forked_in_a_team_being_deleted(status: str) -> None:
    m = entry(status, restart_requested_at=NOW)
    assert decide(m, None, NOW, deleting=True, wake=True) == NOTHING


# -- decide: no process, desired stopped -----------------------------------------------------
@pytest.mark.parametrize("status", sorted(set(roster.STATUSES) - {"shutdown"}))
def test_stopped_with_no_process_is_marked_shutdown(status: str) -> None:
    assert decide(entry(status, "stopped"), None, NOW) == Action(Verb.MARK, status="shutdown")
    # ... in a team being deleted too: the winding-down still lands
    assert decide(entry(status, "stopped"), None, NOW, deleting=True).status == "shutdown"


def test_shutdown_and_stopped_is_left_alone() -> None:
    assert decide(entry("shutdown", "stopped"), None, NOW) == NOTHING


# -- decide: a process of an earlier supervisor ----------------------------------------------
@pytest.mark.parametrize("desired", ["running", "stopped"])
def test_an_orphan_is_ended_before_anything_else(desired: str) -> None:
    m = entry("idle", desired, restart_requested_at=NOW)
    assert decide(m, None, NOW, orphan=True) == Action(Verb.END_ORPHAN)


# -- decide: a process of ours ---------------------------------------------------------------
@pytest.mark.parametrize("status", roster.STATUSES)
def test_a_running_process_is_left_to_write_its_own_status(status: str) -> None:
    # starting … stopping are the member's own to write; teamd neither forks nor signals
    assert decide(entry(status), ours(), NOW, wake=True) == NOTHING


def test_an_approved_shutdown_is_let_leave() -> None:
    assert decide(entry("stopping", "stopped"), ours(), NOW) == Action(Verb.LET_LEAVE)


@pytest.mark.parametrize("status", ["starting", "active", "idle", "waiting", "paused"])
def test_desired_stopped_stops_the_process(status: str) -> None:
    assert decide(entry(status, "stopped"), ours(), NOW) == Action(Verb.STOP)
    assert decide(entry(status, "stopped"), ours(), NOW, deleting=True) == Action(Verb.STOP)


def test_a_restart_newer_than_the_process_restarts_it() -> None:
    newer = entry("active", restart_requested_at=STARTED + 1)
    assert decide(newer, ours(), NOW) == Action(Verb.RESTART)
    older = entry("active", restart_requested_at=STARTED - 1)
    assert decide(older, ours(), NOW) == NOTHING


# -- after_exit ------------------------------------------------------------------------------
def read_exit(m: dict[str, Any], code: int | None, sig: int | None = None,
              history: CrashHistory | None = None, **kw: Any) -> Outcome:
    process = kw.pop("process", None) or ours()
    out = after_exit(m, process, code, sig, NOW, CONF,
                     history=history if history is not None else CrashHistory(), **kw)
    assert out is not None
    return out


@pytest.mark.parametrize(("code", "sig"), [(None, signal.SIGTERM), (None, signal.SIGKILL),
                                           (EXIT_SHUTDOWN, None), (1, None)])
def test_desired_stopped_exits_to_shutdown(code: int | None, sig: int | None) -> None:
    out = read_exit(entry("stopping", "stopped", restarts=2), code, sig)
    assert (out.status, out.restarts, out.release_tasks) == ("shutdown", 2, True)
    assert out.restart_at is None and out.last_error is None and out.failed_reason is None


def test_exit_0_after_approval_is_shutdown() -> None:
    out = read_exit(entry("stopping", "stopped"), EXIT_SHUTDOWN)
    assert (out.status, out.release_tasks) == ("shutdown", True)


def test_exit_75_sleeps_and_keeps_its_tasks() -> None:
    history = CrashHistory()
    history.record(NOW - 5, 1, CONF)
    out = read_exit(entry("idle", restarts=1), EXIT_SLEEP, history=history)
    assert (out.status, out.restarts, out.release_tasks) == ("sleeping", 1, False)
    assert out.history is history and out.delay is None  # not a crash


@pytest.mark.parametrize(("code", "sig"), [(1, None), (EXIT_BOOT_ERROR, None),
                                           (None, signal.SIGKILL), (None, signal.SIGSEGV)])
def test_a_crash_backs_off_and_counts(code: int | None, sig: int | None) -> None:
    history = CrashHistory()
    out = read_exit(entry("active", restarts=1), code, sig, history=history)
    assert (out.status, out.restarts) == ("backoff", 2)
    assert (out.delay, out.restart_at) == (CONF.backoff_initial, NOW + CONF.backoff_initial)
    assert out.last_error is not None and "restart 2 in 1 s" in out.last_error
    assert not out.release_tasks and not out.held_for_space and out.failed_reason is None
    assert len(out.history.times) == 1 and len(history.times) == 0  # it is given a copy


def test_delays_double_while_crashes_keep_coming() -> None:
    history, delays = CrashHistory(), []
    for n in range(CONF.restart_limit):
        process = ours(started_at=NOW - 1)  # up for a second each time
        out = read_exit(entry("active", restarts=n), 1, history=history, process=process)
        history = out.history
        delays.append(out.delay)
    assert delays == [1, 2, 4]


def test_a_crash_at_the_limit_fails_and_tells_the_lead() -> None:
    history = CrashHistory()
    for n in range(CONF.restart_limit):
        history = read_exit(entry("active", restarts=n), 1, history=history).history
    out = read_exit(entry("active", restarts=CONF.restart_limit), None, signal.SIGKILL,
                    history=history)
    assert (out.status, out.restarts, out.release_tasks) == ("failed", 4, True)
    assert out.failed_reason == "killed by SIGKILL; 4 restarts within 60s"
    assert out.last_error == out.failed_reason and out.restart_at is None


@pytest.mark.parametrize(("code", "sig"), [(None, signal.SIGTERM), (None, signal.SIGKILL),
                                           (1, None)])
def test_the_supervisor_stopping_leaves_it_pending(code: int | None, sig: int | None) -> None:
    out = read_exit(entry("active", restarts=1), code, sig, stopping=True)
    assert (out.status, out.restarts, out.release_tasks) == ("pending", 1, False)
    assert out.delay is None and len(out.history.times) == 0  # nothing counted


def test_a_restart_is_pending_at_once_and_not_counted() -> None:
    history = CrashHistory()
    for n in range(CONF.restart_limit):  # one crash short of `failed`
        history = read_exit(entry("active", restarts=n), 1, history=history).history
    m = entry("active", restarts=3, restart_requested_at=STARTED + 1)
    out = read_exit(m, None, signal.SIGTERM, history=history, process=ours(restarting=True))
    assert (out.status, out.restarts, out.delay) == ("pending", 0, None)
    assert len(out.history.times) == 0 and out.history.streak == 0
    # ... and the next reconcile forks it again, with the count reset
    assert decide(dict(m, status=out.status), None, NOW) == Action(Verb.SPAWN, reset=True)


def test_a_restart_while_the_supervisor_stops_is_pending_for_the_next_one() -> None:
    out = read_exit(entry("active", restarts=2), None, signal.SIGTERM,
                    process=ours(restarting=True), stopping=True)
    assert (out.status, out.restarts) == ("pending", 2)


def test_no_space_backs_off_held_and_never_counts() -> None:
    history, held, delays = CrashHistory(), None, []
    for _ in range(CONF.restart_limit + 5):
        out = read_exit(entry("active"), EXIT_NO_SPACE, history=history, space_held=held)
        assert (out.status, out.restarts, out.held_for_space) == ("backoff", 0, True)
        assert out.history is history and len(history.times) == 0
        assert out.last_error is not None and "want of space" in out.last_error
        assert out.delay is not None and out.restart_at == NOW + out.delay
        held = (NOW + out.delay, out.delay)
        delays.append(out.delay)
    assert delays == [SPACE_RETRY_FIRST, 2, 4, 8, 16, SPACE_RETRY_MAX, 30, 30]


def test_no_space_starts_from_one_second_again_after_a_quiet_while() -> None:
    long_ago = (NOW - 2 * SPACE_RETRY_MAX, 30.0)
    out = read_exit(entry("active"), EXIT_NO_SPACE, space_held=long_ago)
    assert out.delay == SPACE_RETRY_FIRST


def test_a_start_teamd_could_not_record_is_held_back_and_never_counts() -> None:
    """teamd forked the member but had no room to record it (issue 26): the fork is stopped
    (its exit is nobody's news, below) and the member held back; however often that
    happens it is never a crash, never `failed`, and it is forked once the hold runs out."""
    history = CrashHistory()
    history.record(NOW - 5, 1.0, CONF)  # one real crash before: kept as it was
    why = "teamd cannot record its start ([Errno 27] File too large)"
    for delay in (SPACE_RETRY_FIRST, 2.0, 4.0, SPACE_RETRY_MAX, SPACE_RETRY_MAX):
        m = entry("starting", restarts=1, last_exit={"code": None, "signal": 9, "at": 1.0})
        out = held_for_space(m, NOW, delay, why, history=history)
        assert (out.status, out.restarts, out.held_for_space) == ("backoff", 1, True)
        assert out.history is history and len(history.times) == 1
        assert out.failed_reason is None and not out.release_tasks
        assert out.last_error == (f"held back for want of space: {why}; starting again "
                                  f"in {delay:g} s")
        assert out.write(m) == ("starting", "backoff")
        assert (m["status"], m["restarts"], m["restart_at"], m["last_error"]) == (
            "backoff", 1, NOW + delay, out.last_error)
        assert m["last_exit"]["signal"] == 9  # the aborted fork's exit is none of its news
        assert decide(m, None, NOW, held_until=NOW + delay) == Action(Verb.WAIT,
                                                                      at=NOW + delay)
        assert decide(m, None, NOW + delay, held_until=NOW + delay) == SPAWN  # not a reset


def test_killed_by_a_signal_is_a_crash_even_when_no_space_was_its_code() -> None:
    out = read_exit(entry("active"), EXIT_NO_SPACE, signal.SIGKILL)
    assert (out.status, out.restarts, out.held_for_space) == ("backoff", 1, False)


def test_an_exit_that_is_not_the_members_news_changes_nothing() -> None:
    # a newer process is recorded for the member
    assert after_exit(entry("idle", pid=PID + 1), ours(), 1, None, NOW, CONF,
                      history=CrashHistory()) is None
    # the fork was never let run (its pid could not be recorded)
    assert after_exit(entry("idle", pid=None), ours(aborted=True), 3, None, NOW, CONF,
                      history=CrashHistory()) is None
    # no pid recorded yet is still the member's own exit
    assert after_exit(entry("idle", pid=None), ours(), 1, None, NOW, CONF,
                      history=CrashHistory()) is not None
