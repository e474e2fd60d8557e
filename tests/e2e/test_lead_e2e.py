"""An LLM lead end to end (CONTRACT.md §8: "An LLM lead is a member with kind: lead and
the lead's tools; it reads lead_inbox.jsonl"): it spawns a teammate with the Task tool,
puts work on the board, hears back, and shuts the teammate down with the handshake."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psutil
import pytest
from typer.testing import CliRunner

from teamctl.cli import app
from teamd import actions, board, requests, roster
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import live_pid, member, running_teamd, wait_until

TEAM = "crew"
T = 20.0


@pytest.fixture
def script() -> dict[str, Any]:
    rid = r'type="shutdown_response" request_id="(?P<rid>[^"]+)"'
    return {"rules": [
        # the lead: staff the team and fill the board on its first call
        {"name": "staff", "agent": "lead", "nth": 1, "reply": {"content": [
            {"type": "tool_use", "name": "Task", "input": {
                "name": "worker", "team_name": TEAM, "role": "engineer",
                "prompt": "Take tasks from the board and report to the lead."}},
            {"type": "tool_use", "name": "TaskCreate", "input": {
                "subject": "Write hello.txt"}}]}},
        # the lead hears the work is done: ask the worker to shut down
        {"name": "wind-down", "agent": "lead", "contains": "hello.txt is written",
         "times": 1, "reply": {"content": [
             {"type": "tool_use", "name": "SendMessage", "input": {
                 "recipient": "worker", "type": "shutdown_request",
                 "content": "All done, thank you.", "reason": "work finished"}}]}},
        {"name": "noted", "agent": "lead", "regex": rid, "reply": {"content": [
            {"type": "text", "text": "Worker shut down ({rid})."}]}},
        # the worker: do the auto-claimed task, complete it, tell the lead
        {"name": "work", "agent": "worker", "regex": r"<auto-claimed>Task #(?P<tid>\d+)",
         "reply": {"content": [
             {"type": "tool_use", "name": "write_file",
              "input": {"path": "hello.txt", "content": "hello\n"}},
             {"type": "tool_use", "name": "TaskUpdate",
              "input": {"task_id": "{int:tid}", "status": "completed"}},
             {"type": "tool_use", "name": "SendMessage", "input": {
                 "recipient": "lead", "content": "Task #{tid}: hello.txt is written"}}]}},
    ], "default": {"content": [{"type": "text", "text": "Waiting."}]}}


def test_llm_lead_staffs_the_team_and_shuts_it_down(ws: Workspace, tmp_path: Path,
                                                    server: ScriptedServer) -> None:
    work = tmp_path / "work"
    work.mkdir()
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "lead", "Get hello.txt written, then wind the team down.",
                  lead=True, cwd=str(work))
    with running_teamd(ws, server.url, idle_timeout=60):
        # the lead's Task tool added a teammate to the roster; teamd forked it
        wait_until(lambda: roster.find(roster.load(ws, TEAM), "worker")
                   and live_pid(ws, TEAM, "worker"), T, "the worker to run")
        worker = member(ws, TEAM, "worker")
        assert worker["kind"] == "teammate" and worker["cwd"] == str(work.resolve())
        assert member(ws, TEAM, "lead")["kind"] == "lead"

        # `teamctl inbox` only peeks at an LLM lead's inbox
        result = CliRunner().invoke(app, ["--root", str(ws.root), "inbox", TEAM, "lead"])
        assert result.exit_code == 0
        assert "only peeking" in result.stderr

        # the worker did the task, and the lead heard it through its own inbox
        wait_until(lambda: board.get(ws, TEAM, 1)["status"] == "completed", T,
                   "task 1 to be completed")
        assert (work / "hello.txt").read_text() == "hello\n"
        server.wait_for(lambda r: r["agent"] == "lead"
                        and 'sender="worker"' in r["last_user_text"]
                        and "hello.txt is written" in r["last_user_text"], timeout=T)

        # the lead's shutdown_request went through the handshake: approved, worker gone
        wait_until(lambda: member(ws, TEAM, "worker")["status"] == "shutdown", T,
                   "the worker to shut down")
        worker = member(ws, TEAM, "worker")
        assert worker["desired"] == "stopped" and worker["last_exit"]["code"] == 0
        shutdowns = [r for r in requests.list_requests(ws, TEAM) if r["kind"] == "shutdown"]
        assert [(r["sender"], r["recipient"], r["status"]) for r in shutdowns] == \
            [("lead", "worker", "approved")]
        # and the lead saw the answer come back
        server.wait_for(lambda r: r["agent"] == "lead" and r["rule"] == "noted", timeout=T)
        assert member(ws, TEAM, "lead")["desired"] == "running"

        # deleting the team stops the LLM lead too (it takes no shutdown request)
        lead_pid = live_pid(ws, TEAM, "lead")
        result = CliRunner().invoke(app, ["--root", str(ws.root), "delete", TEAM,
                                          "--timeout", str(T)])
        assert result.exit_code == 0, result.output
        assert (
            not ws.store.paths.team_dir(TEAM).exists()
            and not ws.store.paths.tasks_dir(TEAM).exists()
        )
        # teamd removes the folders only after reaping every member of the team
        assert lead_pid is not None and not psutil.pid_exists(lead_pid)
