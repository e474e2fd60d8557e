"""The soak (`pytest -m soak tests/faults`, about 5 minutes on 2 cores): three teammates
take 2,000 messages and 200 tasks while a random teammate is killed with -9 every few
seconds and `teamd` itself twice; at the end the exact counts have arrived — every message
shown exactly once, every task completed exactly once by one owner. Also here, as it takes
minutes: 200 members in one team all start, get a message and answer."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from teamd import actions, board, inbox, roster
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.faults.faultkit import (
    TEAM,
    Mail,
    assert_no_strays,
    assert_shown_once,
    assert_statuses_true,
    assert_tasks_once,
    figure,
    journal_gaps,
)
from tests.harness import Teamd, reap_leftovers, send_to_lead, teamd_env, tool_use, wait_until

pytestmark = [pytest.mark.soak, pytest.mark.timeout(1800)]

NAMES = ("alice", "bob", "carol")
MESSAGES, TASKS = 2000, 200
LOAD_SECONDS = 200.0  # messages and tasks arrive over this long, kills all along
SETTLE = 600.0  # then everything must have arrived within this


@pytest.fixture
def soak_server() -> Iterator[ScriptedServer]:
    # no request log on disk: thousands of requests; the records in memory are the proof
    rules: list[dict[str, Any]] = [
        {"name": "finish", "regex": r"<auto-claimed>Task #(?P<tid>\d+)",
         "reply": {"content": [tool_use("TaskUpdate", task_id="{int:tid}",
                                        status="completed")]}},
        # a TaskUpdate cut short by a kill: the model looks at the board and finishes its own
        {"name": "look", "contains": "interrupted by a restart; not re-run",
         "reply": {"content": [tool_use("TaskList")]}},
    ]
    for name in NAMES:
        rules.append({"name": f"resume-{name}", "agent": name, "tool_result": "TaskList",
                      "regex": rf"#(?P<tid>\d+) \[in_progress\] owner={name}\b",
                      "reply": {"content": [tool_use("TaskUpdate", task_id="{int:tid}",
                                                     status="completed")]}})
    with ScriptedServer({"rules": rules, "default": {"content": "Noted."}}) as srv:
        yield srv


def start(ws: Workspace, server: ScriptedServer, log: Path) -> Teamd:
    return Teamd(ws, teamd_env(server.url, backoff_initial=0.1, restart_limit=1000,
                               compact_threshold=20000, idle_timeout=3600), log)


def test_soak_kills_while_2000_messages_and_200_tasks_arrive(
        ws: Workspace, soak_server: ScriptedServer, tmp_path: Path) -> None:
    server = soak_server
    workdir = tmp_path / "work"
    workdir.mkdir()
    actions.create_team(ws, TEAM)
    for name in NAMES:
        actions.spawn(ws, TEAM, name, "Wait for work from the lead.", cwd=str(workdir))
    log = tmp_path / "teamd.log"
    mail = Mail(ws)
    rng = random.Random(14)
    errors: list[BaseException] = []

    def feed() -> None:
        try:
            for i in range(MESSAGES):
                mail.send(rng.choice(NAMES), f"note {i}")
                if i % (MESSAGES // TASKS) == 0:
                    board.create(ws, TEAM, f"chore {i // (MESSAGES // TASKS)}")
                time.sleep(LOAD_SECONDS / MESSAGES)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    daemon = start(ws, server, log)
    kills = teamd_kills = 0
    started = time.monotonic()
    try:
        wait_until(lambda: all(m["status"] == "idle" for m in
                               roster.load(ws, TEAM)["members"]), 120, "everyone idle")
        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        teamd_kill_at = [started + LOAD_SECONDS / 3, started + 2 * LOAD_SECONDS / 3]
        while feeder.is_alive():
            time.sleep(rng.uniform(2, 5))
            if teamd_kill_at and time.monotonic() >= teamd_kill_at[0]:
                teamd_kill_at.pop(0)
                daemon.proc.kill()
                daemon.proc.wait(30)
                daemon.log.close()
                teamd_kills += 1
                assert_no_strays(tmp_path, None, timeout=120)  # all died with it
                daemon = start(ws, server, log)
                continue
            live = [m for m in roster.load(ws, TEAM)["members"]
                    if roster.process_of(m) is not None]
            if live:
                victim = rng.choice(live)
                try:
                    os.kill(int(victim["pid"]), signal.SIGKILL)
                    kills += 1
                except ProcessLookupError:
                    pass
        assert not errors, errors
        tasks_done = lambda: all(t["status"] == "completed"  # noqa: E731
                                 for t in board.list_tasks(ws, TEAM))
        wait_until(lambda: tasks_done() and not any(inbox.peek(ws, TEAM, n) for n in NAMES)
                   and all(m["status"] == "idle" for m in roster.load(ws, TEAM)["members"]),
                   SETTLE, "every message taken in and every task completed", interval=1)
        elapsed = time.monotonic() - started
        assert_statuses_true(ws, daemon)
        assert_no_strays(tmp_path, daemon)
        shown = assert_shown_once(ws, server, mail.sent)
        completed = assert_tasks_once(ws)
        gaps = journal_gaps(ws)
        restarts = sum(int(m["restarts"]) for m in roster.load(ws, TEAM)["members"])
        calls = len(server.requests)
    finally:
        daemon.stop()
        reap_leftovers(ws)
    figure("soak", f"{shown} of {MESSAGES} messages shown exactly once, {completed} of "
           f"{TASKS} tasks completed exactly once, {kills} teammate kills (-9), "
           f"{teamd_kills} teamd kills (-9), {restarts} restarts recorded, {calls} model "
           f"calls, {elapsed:.0f} s; task_completed lines the kills cut from the journal: "
           f"{len(gaps)}")
    assert shown == MESSAGES and completed == TASKS and teamd_kills == 2 and kills > 0


def test_200_members_start_get_a_message_and_answer(ws: Workspace, tmp_path: Path) -> None:
    n = 200
    workdir = tmp_path / "work"
    workdir.mkdir()
    with ScriptedServer({"rules": [{"regex": r"HELLO-(?P<k>\d+)",
                                    "reply": send_to_lead("ACK-{k}")}]}) as server:
        actions.create_team(ws, TEAM)
        for i in range(n):
            actions.spawn(ws, TEAM, f"m{i:03d}", "Wait.", cwd=str(workdir))
        log = tmp_path / "teamd.log"
        began = time.monotonic()
        daemon = Teamd(ws, teamd_env(server.url, idle_timeout=3600), log)
        try:
            wait_until(lambda: all(m["status"] == "idle"
                                   for m in roster.load(ws, TEAM)["members"]),
                       SETTLE, "all 200 idle", interval=1)
            up = time.monotonic() - began
            mail = Mail(ws)
            for i in range(n):
                mail.send(f"m{i:03d}", f"HELLO-{i}")
            wait_until(lambda: len({m["content"] for m in inbox.peek(ws, TEAM, "lead")
                                    if m["content"].startswith("ACK-")}) == n,
                       SETTLE, "200 answers", interval=1)
            answered = time.monotonic() - began - up
            assert_statuses_true(ws, daemon)
            assert_no_strays(tmp_path, daemon)
            assert_shown_once(ws, server, mail.sent)
            procs = len(psutil.Process(daemon.pid).children())
        finally:
            daemon.stop()
            reap_leftovers(ws)
    figure("200 members", f"{procs} processes; all idle after {up:.0f} s, 200 answers "
           f"{answered:.0f} s later")
    assert procs == n
