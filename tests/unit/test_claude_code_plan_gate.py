"""teamd's plan gate is the second fence around a plan-mode Claude Code member (CONTRACT
§14, §6): whatever Claude Code's own mode or settings, the PreToolUse hook teamd installs
refuses every writing tool Claude Code has until a plan is approved, and answers
`ExitPlanMode` with `ask`, so that only the member (Claude Code's permission host, through
the plan protocol) can let it leave plan mode. The real hook, run as Claude Code runs it
(`python -m teamd.agent.claude_code.pretool …`, the event on stdin), over real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from teamd import actions, requests
from teamd.layout import Workspace
from tests.harness import TEAM, make_team

#: each writing tool of Claude Code's, with an input as it sends one
WRITING = {
    "Write": {"file_path": "a.txt", "content": "x\n"},
    "Edit": {"file_path": "a.txt", "old_string": "x", "new_string": "y"},
    "MultiEdit": {"file_path": "a.txt", "edits": [{"old_string": "x", "new_string": "y"}]},
    "NotebookEdit": {"notebook_path": "a.ipynb", "new_source": "print(1)"},
    "Bash": {"command": "touch b.txt", "description": "mark"},
}


def hook(ws: Workspace, tool: str, given: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    event = {"hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": given,
             "tool_use_id": f"toolu_{tool}", "permission_mode": "default"}
    return subprocess.run(
        [sys.executable, "-m", "teamd.agent.claude_code.pretool", str(ws.root), TEAM, "cc",
         str(os.getpid())], input=json.dumps(event), capture_output=True, text=True,
        timeout=60, check=False)


def decision(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["hookSpecificOutput"]["permissionDecision"])


@pytest.fixture
def planner(ws: Workspace, workdir: Path) -> Workspace:
    make_team(ws, workdir, "cc", plan_mode=True)
    return ws


@pytest.mark.parametrize("tool", sorted(WRITING))
def test_every_writing_tool_is_refused_until_a_plan_is_approved(
        planner: Workspace, tool: str) -> None:
    refused = hook(planner, tool, WRITING[tool])
    assert refused.returncode == 2  # Claude Code gives stderr to the model; nothing runs
    assert "plan mode: submit a plan" in refused.stderr
    rid = actions.send(planner, TEAM, "lead", "1. write a.txt", sender="cc",
                       type_="plan_approval_request")["request_id"]
    assert hook(planner, tool, WRITING[tool]).returncode == 2  # pending is not approved
    requests.answer(planner, TEAM, rid, True)
    assert decision(hook(planner, tool, WRITING[tool])) == "allow"


def test_exit_plan_mode_is_asked_of_the_member_never_allowed_by_the_hook(
        planner: Workspace) -> None:
    assert decision(hook(planner, "ExitPlanMode", {})) == "ask"
    assert decision(hook(planner, "Read", {"file_path": "a.txt"})) == "allow"  # reads go
