"""Crashes at chosen moments, each proven to have landed there (CONTRACT §3 "Delivery",
§4, §6 "Resume", §9): kill -9 of a teammate during a model call, a `bash` tool, an inbox
drain, a compaction, and between a claim and its session record; kill -9 of `teamd`
mid-work; SIGSTOP past a model call's length. After each: every message shown exactly once,
no task owned twice or lost, statuses true, nothing outside the supervisor's tree.

A kill during a permission wait: tests/e2e/test_permissions_e2e.py
(test_kill_while_waiting_then_approve_runs_exactly_once and the test after it)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import psutil

from teamd import board, files, inbox
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.faults.faultkit import (
    TEAM,
    Mail,
    T,
    assert_no_strays,
    assert_shown_once,
    assert_statuses_true,
    assert_tasks_once,
    figure,
    holds_flock,
    in_flight,
    restarted,
    showings,
    stopped,
    strike,
    wait_status,
)
from tests.harness import (
    Teamd,
    gone,
    lead_says,
    live_pid,
    make_team,
    member,
    running_teamd,
    send_to_lead,
    teamd_env,
    tool_use,
    wait_until,
)

HOLD = 60.0  # how long the server sits on a call the test kills inside


def settle(ws: Workspace, server: ScriptedServer, mail: Mail, daemon: Teamd,
           tmp_path: Path) -> None:
    """The promises every crash scenario keeps, checked while teamd still runs."""
    assert_statuses_true(ws, daemon)
    assert_no_strays(tmp_path, daemon)
    assert_shown_once(ws, server, mail.sent)
    assert_tasks_once(ws)


def test_kill_9_during_model_calls(ws: Workspace, server: ScriptedServer, workdir: Path,
                                   tmp_path: Path) -> None:
    kills = 3
    server.add_rule({"name": "held", "agent": "alice", "contains": "SLOW", "times": kills,
                     "delay": HOLD,
                     "reply": send_to_lead("never delivered")})
    server.add_rule({"agent": "alice", "contains": "SLOW", "reply": send_to_lead("ANSWERED")})
    make_team(ws, workdir, "alice")
    mail = Mail(ws)
    landed = 0
    with running_teamd(ws, server.url, backoff_initial=0.1, restart_limit=20) as daemon:
        wait_status(ws, "alice", "idle")
        mail.send("alice", "SLOW think hard")
        for n in range(kills):
            pid = live_pid(ws, TEAM, "alice")
            assert pid is not None
            held = in_flight(server, lambda r: r["rule"] == "held", HOLD, nth=n)
            mail.send("alice", f"MORE news {n} while it thinks")
            os.kill(pid, signal.SIGKILL)
            landed += time.time() < held["received_at"] + HOLD
            restarted(ws, "alice", pid)
        wait_until(lambda: lead_says(ws, "ANSWERED"), T, "the answer after the kills")
        wait_status(ws, "alice", "idle")
        figure("kills mid-call", landed)
        assert landed == kills
        m = member(ws, TEAM, "alice")
        assert m["restarts"] == kills and m["last_exit"]["signal"] == signal.SIGKILL
        assert len(lead_says(ws, "ANSWERED")) == 1
        settle(ws, server, mail, daemon, tmp_path)
    assert_no_strays(tmp_path, None)


def test_kill_9_during_a_bash_tool(ws: Workspace, server: ScriptedServer, workdir: Path,
                                   tmp_path: Path) -> None:
    marker = workdir / "ran.txt"
    server.add_rule({"agent": "alice", "contains": "RUN-IT", "times": 1, "reply": {
        "content": [tool_use("bash", command=f"echo ran >> {marker.name}; sleep 300")]}})
    server.add_rule({"agent": "alice", "contains": "interrupted by a restart; not re-run",
                     "reply": send_to_lead("NOT-RERUN")})
    make_team(ws, workdir, "alice")
    mail = Mail(ws)
    with running_teamd(ws, server.url, backoff_initial=0.1) as daemon:
        wait_status(ws, "alice", "idle")
        pid = live_pid(ws, TEAM, "alice")
        assert pid is not None
        mail.send("alice", "RUN-IT run the job")
        wait_until(marker.exists, T, "the command to start")
        sleeper = wait_until(lambda: [p for p in psutil.Process(pid).children(recursive=True)
                                      if p.name() == "sleep"], T, "its sleep")[0]
        mail.send("alice", "NEWS while the tool runs")
        os.kill(pid, signal.SIGKILL)
        landed = int(sleeper.is_running() and marker.read_text() == "ran\n")
        restarted(ws, "alice", pid)
        wait_until(lambda: lead_says(ws, "NOT-RERUN"), T, "the answer after the restart")
        wait_status(ws, "alice", "idle")
        figure("kills mid-bash", landed)
        assert landed == 1
        wait_until(lambda: not sleeper.is_running(), T, "the interrupted tool to be gone")
        assert marker.read_text() == "ran\n"  # never run twice
        settle(ws, server, mail, daemon, tmp_path)
    assert_no_strays(tmp_path, None)


def test_kill_9_while_it_drains_its_inbox(ws: Workspace, server: ScriptedServer,
                                          workdir: Path, tmp_path: Path) -> None:
    """The drain holds the inbox lock while it records the batch in the session and cuts
    the inbox: a kill is counted only when the frozen teammate holds that lock."""
    server.add_rule({"agent": "alice", "reply": {"content": "Noted."}})
    make_team(ws, workdir, "alice")
    mail = Mail(ws)
    lock = files.lock_path(ws.store.paths.inbox(TEAM, "alice"))
    stop = threading.Event()
    errors: list[BaseException] = []

    def keep_sending() -> None:
        pad = "p" * 500
        try:
            while not stop.is_set():
                mail.send("alice", pad)
                time.sleep(0.01)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    want, landed, tries = 3, 0, 0
    with running_teamd(ws, server.url, backoff_initial=0.1, restart_limit=50) as daemon:
        wait_status(ws, "alice", "idle")
        sender = threading.Thread(target=keep_sending, daemon=True)
        sender.start()
        try:
            deadline = time.monotonic() + 4 * T
            while landed < want and time.monotonic() < deadline:
                pid = live_pid(ws, TEAM, "alice")
                if pid is None:
                    time.sleep(0.05)
                    continue
                tries += 1
                if strike(pid, lambda p=pid: holds_flock(p, lock), timeout=10):
                    landed += 1
                    restarted(ws, "alice", pid)
        finally:
            stop.set()
            sender.join(10)
        assert not errors, errors
        wait_until(lambda: not inbox.peek(ws, TEAM, "alice"), T, "the inbox to be taken in")
        wait_status(ws, "alice", "idle")
        figure("kills mid-drain", f"{landed} (messages sent: {len(mail.sent)})")
        assert landed == want
        settle(ws, server, mail, daemon, tmp_path)
    assert_no_strays(tmp_path, None)


def test_kill_9_during_compaction(ws: Workspace, server: ScriptedServer, workdir: Path,
                                  tmp_path: Path) -> None:
    big = {"input_tokens": 100, "cache_read_input_tokens": 30000,
           "cache_creation_input_tokens": 30000}
    server.add_rule({"agent": "alice", "contains": "BIG", "reply": {"content": "Noted.",
                                                                    "usage": big}})
    server.add_rule({"name": "summary-held", "agent": "alice", "times": 1, "delay": HOLD,
                     "contains": "Your context is nearly full", "reply": {"content": "lost"}})
    server.add_rule({"agent": "alice", "contains": "Your context is nearly full",
                     "reply": {"content": "SUMMARY: the lead sent big things."}})
    server.add_rule({"agent": "alice", "contains": "AFTER", "reply": send_to_lead("DONE")})
    make_team(ws, workdir, "alice")
    mail = Mail(ws)
    with running_teamd(ws, server.url, backoff_initial=0.1, compact_threshold=50000) as daemon:
        wait_status(ws, "alice", "idle")
        mail.send("alice", "BIG remember this")
        wait_until(lambda: len([r for r in server.requests if "BIG" in r["last_user_text"]]),
                   T, "the big reply")
        wait_status(ws, "alice", "idle")
        pid = live_pid(ws, TEAM, "alice")
        assert pid is not None
        mail.send("alice", "AFTER what next?")
        held = in_flight(server, lambda r: r["rule"] == "summary-held", HOLD)
        os.kill(pid, signal.SIGKILL)
        landed = int(time.time() < held["received_at"] + HOLD)
        restarted(ws, "alice", pid)
        wait_until(lambda: lead_says(ws, "DONE"), T, "the answer after the restart")
        wait_status(ws, "alice", "idle")
        figure("kills mid-compaction", landed)
        assert landed == 1
        assert len(lead_says(ws, "DONE")) == 1
        settle(ws, server, mail, daemon, tmp_path)
    assert_no_strays(tmp_path, None)


def test_kill_9_between_a_claim_and_its_session_record(
        ws: Workspace, server: ScriptedServer, workdir: Path, tmp_path: Path) -> None:
    """Claiming (the board) and recording the <auto-claimed> turn (the session) are two
    writes: a kill is counted only when the frozen teammate owns an in-progress task its
    session file has no record of."""
    server.add_rule({"name": "finish", "agent": "alice",
                     "regex": r"<auto-claimed>Task #(?P<tid>\d+)",
                     "reply": {"content": [tool_use("TaskUpdate", task_id="{int:tid}",
                                                    status="completed")]}})
    server.add_rule({"agent": "alice", "reply": {"content": "Next."}})
    make_team(ws, workdir, "alice")
    session = ws.store.paths.session(TEAM, "alice")

    def claimed_untold() -> bool:
        told = {r.get("claimed") for r in files.read_jsonl(session).records}
        return any(t["owner"] == "alice" and t["status"] == "in_progress"
                   and t["id"] not in told for t in board.list_tasks(ws, TEAM))

    want, landed = 2, 0
    with running_teamd(ws, server.url, backoff_initial=0.1, restart_limit=50) as daemon:
        wait_status(ws, "alice", "idle")
        deadline = time.monotonic() + 4 * T
        while landed < want and time.monotonic() < deadline:
            for i in range(10):
                board.create(ws, TEAM, f"chore {i}")
            pid = live_pid(ws, TEAM, "alice")
            if pid is not None and strike(pid, claimed_untold, timeout=15, pause=0.01):
                landed += 1
                restarted(ws, "alice", pid)
            wait_until(lambda: all(t["status"] == "completed"
                                   for t in board.list_tasks(ws, TEAM)), T, "every chore done")
        wait_status(ws, "alice", "idle")
        tasks = board.list_tasks(ws, TEAM)
        figure("kills between claim and session record", f"{landed} ({len(tasks)} tasks)")
        assert landed == want
        # each task was handed to the model once: its <auto-claimed> turn shown once
        for t in tasks:
            assert len(showings(server.requests, "alice", f"<auto-claimed>Task #{t['id']}:")) \
                == 1, t["id"]
        assert_tasks_once(ws)
        settle(ws, server, Mail(ws), daemon, tmp_path)
    assert_no_strays(tmp_path, None)


def test_kill_9_of_teamd_mid_work(ws: Workspace, server: ScriptedServer, workdir: Path,
                                  tmp_path: Path) -> None:
    server.add_rule({"name": "held", "agent": "alice", "contains": "SLOW", "times": 1,
                     "delay": HOLD, "reply": send_to_lead("never delivered")})
    server.add_rule({"agent": "alice", "contains": "SLOW", "reply": send_to_lead("A-DONE")})
    server.add_rule({"name": "tool", "agent": "bob", "contains": "TOOL", "times": 1,
                     "reply": {"content": [tool_use("bash", command="sleep 300")]}})
    server.add_rule({"agent": "bob", "contains": "interrupted by a restart",
                     "reply": send_to_lead("B-DONE")})
    server.add_rule({"name": "finish", "regex": r"<auto-claimed>Task #(?P<tid>\d+)",
                     "delay": 0.2,
                     "reply": {"content": [tool_use("TaskUpdate", task_id="{int:tid}",
                                                    status="completed")]}})
    make_team(ws, workdir, "alice", "bob", "carol")
    mail = Mail(ws)
    log = tmp_path / "teamd.log"
    first = Teamd(ws, teamd_env(server.url, backoff_initial=0.1), log)
    try:
        for name in ("alice", "bob", "carol"):
            wait_status(ws, name, "idle")
        pids = {n: live_pid(ws, TEAM, n) for n in ("alice", "bob", "carol")}
        mail.send("alice", "SLOW think")
        mail.send("bob", "TOOL run it")
        for i in range(12):
            board.create(ws, TEAM, f"chore {i}")
        held = in_flight(server, lambda r: r["rule"] == "held", HOLD)
        wait_until(lambda: [p for p in psutil.Process(pids["bob"]).children(recursive=True)
                            if p.name() == "sleep"], T, "bob's tool to run")
        wait_until(lambda: any(t["status"] == "completed" for t in board.list_tasks(ws, TEAM)),
                   T, "the board at work")
        first.proc.kill()
        first.proc.wait(10)
        landed = int(time.time() < held["received_at"] + HOLD)
        done_before = sum(t["status"] == "completed" for t in board.list_tasks(ws, TEAM))
        # every teammate and tool dies with the supervisor: nothing is left behind
        assert_no_strays(tmp_path, None)
        wait_until(lambda: all(gone(p) for p in pids.values() if p), T,
                   "every teammate to die with teamd")
    finally:
        first.kill()
        first.log.close()
    with running_teamd(ws, server.url, backoff_initial=0.1, log_path=log) as second:
        wait_until(lambda: lead_says(ws, "A-DONE") and lead_says(ws, "B-DONE"), T,
                   "alice and bob to resume")
        wait_until(lambda: all(t["status"] == "completed" for t in board.list_tasks(ws, TEAM)),
                   T, "the board to be finished")
        for name in ("alice", "bob", "carol"):
            wait_status(ws, name, "idle")
        figure("teamd kills mid-work", f"{landed} (tasks done before the kill: {done_before}"
               f" of 12)")
        assert landed == 1 and done_before < 12
        assert len(lead_says(ws, "A-DONE")) == 1 and len(lead_says(ws, "B-DONE")) == 1
        settle(ws, server, mail, second, tmp_path)
    assert_no_strays(tmp_path, None)


def test_sigstop_past_a_model_calls_length(ws: Workspace, server: ScriptedServer,
                                           workdir: Path, tmp_path: Path) -> None:
    call = 3.0
    server.add_rule({"name": "call", "agent": "alice", "contains": "FROZEN", "delay": call,
                     "reply": send_to_lead("THAWED")})
    make_team(ws, workdir, "alice")
    mail = Mail(ws)
    with running_teamd(ws, server.url, api_timeout=call + 2) as daemon:
        wait_status(ws, "alice", "idle")
        pid = live_pid(ws, TEAM, "alice")
        assert pid is not None
        mail.send("alice", "FROZEN think")
        held = server.wait_for(lambda r: r["rule"] == "call", T)
        wait_status(ws, "alice", "active")  # written as the request leaves
        os.kill(pid, signal.SIGSTOP)
        assert stopped(pid)
        landed = int(time.time() < held["received_at"] + call)  # stopped inside the call
        # frozen past the call's length and past api_timeout: teamd neither restarts it
        # nor calls it anything but what it is (live, active)
        wait_until(lambda: time.time() > held["received_at"] + call + 2 + 1, T, "time",
                   interval=0.1)
        m = member(ws, TEAM, "alice")
        assert live_pid(ws, TEAM, "alice") == pid and m["status"] == "active"
        assert psutil.Process(pid).status() == psutil.STATUS_STOPPED
        frozen = time.time() - held["received_at"]
        os.kill(pid, signal.SIGCONT)
        wait_until(lambda: lead_says(ws, "THAWED"), T, "the answer once thawed")
        wait_status(ws, "alice", "idle")
        figure("stopped inside a call", f"{landed} (frozen {frozen:.1f} s, call {call:g} s)")
        assert landed == 1 and frozen > call + 2
        assert len(lead_says(ws, "THAWED")) == 1
        assert member(ws, TEAM, "alice")["restarts"] == 0 and live_pid(ws, TEAM, "alice") == pid
        settle(ws, server, mail, daemon, tmp_path)
    assert_no_strays(tmp_path, None)

