"""`teamctl demo --runtime claude-code` as a person runs it (CONTRACT §14): the real console
script, a real `teamd run`, the demo's team with Claude Code teammates (the pinned CLI)
offline against the scripted model — Claude Code's own Bash, Read and Edit and the team
tools through MCP — each task committed in its teammate's worktree and merged, and nothing
left running. Without a Claude Code to run, it exits 2 with spawn's line, making nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from teamctl.demo import TASKS, TEAM
from teamd import board, roster
from teamd.layout import Workspace
from tests.e2e.test_demo import assert_nothing_left, started_pids
from tests.harness import events_of
from tests.helpers_proc import TEAMCTL, clean_env

#: three Claude Code teammates, five model calls a task: slower than the built-in demo
TIMEOUT = 400


@pytest.mark.timeout(TIMEOUT + 60)
def test_demo_runs_claude_code_teammates_offline(tmp_path: Path, claude: Path) -> None:
    root = tmp_path / "cc-demo"
    done = subprocess.run(
        [str(TEAMCTL), "--root", str(root), "demo", "--runtime", "claude-code", "--timeout",
         str(TIMEOUT - 60)], env={**clean_env(), "TEAMD_CLAUDE_CODE": str(claude)},
        cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr + done.stdout[-3000:]
    assert "scripted model server" in done.stdout  # offline, and it says so
    ws = Workspace.at(root)
    members = roster.load(ws, TEAM)["members"]
    assert {(m["name"], m["runtime"]) for m in members} == {
        ("analyst", "claude-code"), ("backend", "claude-code"), ("frontend", "claude-code")}
    tasks = board.list_tasks(ws, TEAM)
    assert [(t["subject"], t["status"]) for t in tasks] == [
        (subject, "completed") for subject, _ in TASKS]
    # each task done with Claude Code's own tools and completed through the team's
    for task in tasks:
        assert len(task["commits"]) == 1, task  # committed in its teammate's worktree
    used = {e["tool"] for e in events_of(ws, "*", "tool_call", team=TEAM) if e["ok"]}
    assert {"Bash", "Read", "Edit", "TaskUpdate", "SendMessage"} <= used
    assert "merged teamd/rest-to-graphql/" in done.stdout
    notes = sorted(p.name for p in (root / "app" / "notes").glob("task-*.md"))
    assert notes == [f"task-{i}.md" for i in range(1, len(TASKS) + 1)]
    assert all("Status: done" in (root / "app" / "notes" / n).read_text() for n in notes)
    assert_nothing_left(ws, started_pids(ws))


def test_demo_without_claude_code_exits_2_and_makes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "cc-demo"
    done = subprocess.run(
        [str(TEAMCTL), "--root", str(root), "demo", "--runtime", "claude-code"],
        env={**clean_env(), "TEAMD_CLAUDE_CODE": str(tmp_path / "no-claude")},
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"teamctl: error: {tmp_path / 'no-claude'} not found (set claude_code in teamd.toml)"]
    assert not root.exists()
