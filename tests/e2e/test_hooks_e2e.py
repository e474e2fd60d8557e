"""Hooks end to end (CONTRACT.md §11, issue 11): real `/bin/sh` hooks run by real forked
teammates under a real `teamd run`, the model being the scripted server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psutil

from teamd import actions, board, files
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import (
    TEAM,
    events_of,
    last_user,
    lead_got,
    make_team,
    running_teamd,
    tool_use,
    turn_text,
    wait_status,
    wait_until,
)
from tests.helpers_proc import ctl

T = 20.0


def configure(ws: Workspace, hooks: dict[str, str], extra: str = "") -> None:
    table = "".join(f"{name} = {json.dumps(cmd)}\n" for name, cmd in hooks.items())
    ws.settings_file.write_text(f"{extra}[hooks]\n{table}")


def hook_runs(ws: Workspace, hook: str) -> list[dict[str, Any]]:
    return [e for e in events_of(ws, "*", "hook_run") if e["hook"] == hook]


def error_results(record: dict[str, Any]) -> list[str]:
    return [str(b["content"]) for b in last_user(record)["content"]
            if b.get("type") == "tool_result" and b.get("is_error")]


# -- task_completed: the quality gate ------------------------------------------------------
def test_task_completed_hook_keeps_the_task_open_until_it_passes(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    # stands for `pytest -q >&2`: fails (exit 2, reason on stderr) until tests-pass exists
    gate = ("cat > event.json; env > hook-env.txt; "
            "test -f tests-pass || { echo 'GATE-5e2: 1 failed, 3 passed' >&2; exit 2; }")
    configure(ws, {"task_completed": gate})
    done = tool_use("TaskUpdate", task_id=1, status="completed")
    server.add_rule({"agent": "alice", "contains": "<auto-claimed>Task #1",
                     "reply": {"content": [done]}})
    # the model reads the failure, takes its time to fix it, and completes again
    server.add_rule({"agent": "alice", "contains": "GATE-5e2", "delay": 1.0, "reply": {
        "content": [tool_use("bash", command="touch tests-pass"), done]}})
    server.add_rule({"agent": "alice", "tool_result": "TaskUpdate",
                     "reply": {"content": "Completed."}})
    make_team(ws, workdir, "alice")
    board.create(ws, TEAM, "make the tests pass")
    with running_teamd(ws, server.url):
        seen = server.wait_for(lambda r: r["agent"] == "alice" and "GATE-5e2" in
                               turn_text(last_user(r)), T)
        # the model is fixing it (the server holds its answer): the task is still open
        task = board.get(ws, TEAM, 1)
        assert (task["status"], task["owner"]) == ("in_progress", "alice")
        assert error_results(seen) == ["blocked by the task_completed hook: "
                                       "GATE-5e2: 1 failed, 3 passed"]
        wait_until(lambda: board.get(ws, TEAM, 1)["status"] == "completed", T,
                   "the task to complete once the hook passes")
        wait_status(ws, "alice", "idle")
    runs = hook_runs(ws, "task_completed")
    assert [(r["exit"], r["blocked"], r["timed_out"]) for r in runs] == \
        [(2, True, False), (0, False, False)]
    assert all(isinstance(r["ms"], int) and r["member"] == "alice" for r in runs)
    completed = [e for e in events_of(ws, "*", "task_completed") if e["task_id"] == 1]
    assert len(completed) == 1
    # the event on stdin, and the environment: the TEAMD_ variables, never the API key
    event = json.loads((workdir / "event.json").read_text())
    assert (event["event"], event["team"], event["member"], event["cwd"]) == \
        ("task_completed", TEAM, "alice", str(workdir.resolve()))
    assert (event["task"]["id"], event["task"]["subject"]) == (1, "make the tests pass")
    env = dict(line.split("=", 1) for line in (workdir / "hook-env.txt").read_text()
               .splitlines() if "=" in line)
    assert (env["TEAMD_TEAM"], env["TEAMD_MEMBER"], env["TEAMD_EVENT"], env["TEAMD_TASK_ID"],
            env["TEAMD_ROOT"]) == (TEAM, "alice", "task_completed", "1", str(ws.root))
    assert "ANTHROPIC_API_KEY" not in env and "ANTHROPIC_AUTH_TOKEN" not in env
    assert "test-key" not in (workdir / "hook-env.txt").read_text()


# -- teammate_idle -------------------------------------------------------------------------
def test_teammate_idle_blocks_three_times_in_a_row_then_the_teammate_goes_idle(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    configure(ws, {"teammate_idle": "echo \"IDLE-HOOK-9d4: run the linter first\" >&2; exit 2"})
    make_team(ws, workdir, "alice")
    feedback = '<hook-feedback hook="teammate_idle">'
    with running_teamd(ws, server.url):
        # the first turn (the prompt) ends: blocked 3 times, then idle anyway
        wait_status(ws, "alice", "idle")
        lead_got(ws, lambda m: m["type"] == "idle_notification", "alice's idle notice")
        assert [(r["exit"], r["blocked"]) for r in hook_runs(ws, "teammate_idle")] == \
            [(2, True)] * 3
        fed = [r for r in server.requests if r["agent"] == "alice"
               and feedback in turn_text(last_user(r))]
        assert len(fed) == 3
        assert turn_text(last_user(fed[0])) == \
            f"{feedback}IDLE-HOOK-9d4: run the linter first</hook-feedback>"
        assert len([r for r in server.requests if r["agent"] == "alice"]) == 4
        # new input starts the count again
        actions.send(ws, TEAM, "alice", "WAKE-9d4 one more thing")
        wait_until(lambda: len(hook_runs(ws, "teammate_idle")) == 6, T, "three more runs")
        wait_status(ws, "alice", "idle")
    assert len(hook_runs(ws, "teammate_idle")) == 6


# -- pre_tool_use, task_created, timeouts --------------------------------------------------
def test_pre_tool_use_and_task_created_block_on_exit_2_and_fail_open_otherwise(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    configure(ws, {
        # reads the event: a tool call whose input says "forbidden" is blocked
        "pre_tool_use": "grep -q forbidden && { echo 'PRE-3a1 not that one' >&2; exit 2; }; "
                        "exit 0",
        "task_created": "e=$(cat); echo \"$e\" | grep -q NOPE && "
                        "{ echo 'no NOPE tasks' >&2; exit 2; }; "
                        "echo \"$e\" | grep -q ODD && exit 3; exit 0"})
    server.add_rule({"agent": "alice", "contains": "HOOKS-3a1", "reply": {"content": [
        tool_use("bash", command="echo forbidden >> blocked.txt"),
        tool_use("bash", command="echo fine >> ran.txt"),
        tool_use("TaskCreate", subject="NOPE task"),
        tool_use("TaskCreate", subject="ODD task")]}})
    server.add_rule({"agent": "alice", "tool_result": "TaskCreate",
                     "reply": {"content": "Done."}})
    make_team(ws, workdir, "alice")
    with running_teamd(ws, server.url):
        wait_status(ws, "alice", "idle")
        actions.send(ws, TEAM, "alice", "HOOKS-3a1 go")
        seen = server.wait_for(lambda r: r["agent"] == "alice" and
                               "tool_result" in json.dumps(last_user(r)), T)
        wait_status(ws, "alice", "idle")
        # teamctl runs no hooks: a task the hook would block is created
        ctl(ws, "task", "add", TEAM, "NOPE from a person")
    assert error_results(seen) == ["blocked by the pre_tool_use hook: PRE-3a1 not that one",
                                   "blocked by the task_created hook: no NOPE tasks"]
    assert not (workdir / "blocked.txt").exists()
    assert (workdir / "ran.txt").read_text() == "fine\n"
    assert [t["subject"] for t in board.list_tasks(ws, TEAM)] == ["ODD task",
                                                                  "NOPE from a person"]
    assert [(r["exit"], r["blocked"]) for r in hook_runs(ws, "pre_tool_use")] == \
        [(2, True), (0, False)]
    assert [(r["exit"], r["blocked"]) for r in hook_runs(ws, "task_created")] == \
        [(2, True), (3, False)]  # exit 3: the hook failed, the task was created


def test_a_hook_past_hook_timeout_is_killed_with_its_children_and_the_call_goes_on(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    configure(ws, {"pre_tool_use": "sleep 300 & echo $! > child.pid; sleep 300"},
              extra="hook_timeout = 1\n")
    server.add_rule({"agent": "alice", "contains": "SLOW-8b0", "reply": {"content": [
        tool_use("bash", command="echo ran >> ran.txt")]}})
    server.add_rule({"agent": "alice", "tool_result": "bash", "reply": {"content": "Done."}})
    make_team(ws, workdir, "alice")
    with running_teamd(ws, server.url):
        wait_status(ws, "alice", "idle")
        actions.send(ws, TEAM, "alice", "SLOW-8b0 go")
        wait_until(lambda: (workdir / "ran.txt").exists(), T, "the call after the timeout")
        wait_status(ws, "alice", "idle")
        child = int((workdir / "child.pid").read_text())
        # the background child of the hook died with it (zombies aside: reaped by init)
        wait_until(lambda: not psutil.pid_exists(child)
                   or psutil.Process(child).status() == psutil.STATUS_ZOMBIE, T,
                   "the hook's child to be killed")
    runs = hook_runs(ws, "pre_tool_use")
    assert [(r["exit"], r["blocked"], r["timed_out"]) for r in runs] == [(None, False, True)]
    assert runs[0]["ms"] >= 1000
    assert (workdir / "ran.txt").read_text() == "ran\n"
    session = files.read_jsonl(ws.store.paths.session(TEAM, "alice")).records
    assert [r["block"]["is_error"] for r in session if r["type"] == "tool_result"] == [False]
