"""What no rule can open (CONTRACT §11, §13), with an LLM lead working in the repository
that holds the root: its file tools cannot rewrite `teamd.toml`, `.teams/` or another
member's worktree whatever the rules say; a symlink to `.git` does not get past a rule on
`.git/*`; and a `core.hooksPath` its `bash` sets in the shared `.git` runs no hook during
the product's own git commands (a worktree made, a task's commit, `teamctl merge`).
Real `teamd`, real forked members, real git, the real SDK over HTTP to the scripted model."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from teamd import actions, board, files
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.gitrepo import git
from tests.harness import T, cli, events_of, running_teamd, tool_use, wait_until

TEAM = "crew"
SETTINGS = """[permissions]
default = "allow"
deny = ["write_file(.git/*)", "edit_file(.git/*)"]
"""
ALWAYS = '{"schema": 1, "allow": []}\n'
#: every hook git could run for what the product does, each writing its name to the log
HOOK_NAMES = ("pre-commit", "prepare-commit-msg", "commit-msg", "post-commit",
              "post-checkout", "pre-merge-commit", "post-merge", "reference-transaction")


def evil_hooks(folder: Path, log: Path) -> Path:
    folder.mkdir()
    for name in HOOK_NAMES:
        hook = folder / name
        hook.write_text(f'#!/bin/sh\necho {name} >> "${{HOOK_LOG:-{log}}}"\nexit 1\n')
        hook.chmod(0o755)
    return folder


def tool_results(record: dict[str, Any]) -> list[tuple[bool, str]]:
    """(is_error, text) of each tool result in a request's last turn."""
    out = []
    for block in record["body"]["messages"][-1]["content"]:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            content = block.get("content")
            text = content if isinstance(content, str) else json.dumps(content)
            out.append((bool(block.get("is_error")), text))
    return out


def test_the_lead_cannot_rewrite_its_rules_and_git_runs_no_planted_hook(
        ws: Workspace, repo: Path, server: ScriptedServer, tmp_path: Path) -> None:
    log = tmp_path / "hooks-ran.log"
    hooks_dir = evil_hooks(tmp_path / "evil-hooks", log)
    files.atomic_write_bytes(ws.settings_file, SETTINGS.encode())
    actions.create_team(ws, TEAM, repo=str(repo), worktrees_on=True)
    always = ws.store.paths.team_dir(TEAM) / "permissions.json"
    files.atomic_write_bytes(always, ALWAYS.encode())
    server.add_rule({"agent": "lead", "nth": 1, "reply": {"content": [
        tool_use("write_file", path="teamd.toml", content='[permissions]\ndefault = "allow"\n'),
        tool_use("write_file", path=f".teams/{TEAM}/permissions.json",
                 content='{"schema": 1, "allow": ["write_file"]}'),
        tool_use("edit_file", path="teamd.toml", old_text="deny", new_text="allow"),
        tool_use("bash", command="ln -s .git x"),
        tool_use("write_file", path="x/config", content="[core]\n"),
        tool_use("bash", command=f"git config core.hooksPath {hooks_dir}")]}})
    server.add_rule({"agent": "lead", "contains": "GO ON", "times": 1, "reply": {"content": [
        {"type": "tool_use", "name": "Task", "input": {
            "name": "bob", "team_name": TEAM, "prompt": "Do the tasks you are given."}},
        tool_use("TaskCreate", subject="Write notes.txt"),
        tool_use("write_file", path=f".worktrees/{TEAM}/bob/planted.txt", content="x")]}})
    server.add_rule({"agent": "bob", "regex": r"<auto-claimed>Task #(?P<tid>\d+)",
                     "reply": {"content": [
                         tool_use("write_file", path="notes.txt", content="notes\n"),
                         tool_use("TaskUpdate", task_id="{int:tid}", status="completed")]}})
    actions.spawn(ws, TEAM, "lead", "Run the team.", lead=True, cwd=str(repo))
    with running_teamd(ws, server.url):
        first = server.wait_for(lambda r: r["agent"] == "lead" and r["n"] == 2, T)
        results = tool_results(first)
        assert [r[0] for r in results] == [True, True, True, False, True, False], results
        for _, text in results[:3]:
            assert text.startswith("refused: teamd's own files"), text
        assert 'denied by rule "write_file(.git/*)"' in results[4][1]
        # the fault landed: the shared .git names the planted hooks, and plain git runs them
        assert git(repo, "config", "--file", ".git/config",
                   "core.hooksPath").strip() == str(hooks_dir)
        probe = tmp_path / "probe.log"
        subprocess.run(["git", "-C", str(repo), "hook", "run", "post-commit"],
                       env={**os.environ, "HOOK_LOG": str(probe)}, check=False)
        assert probe.read_text() == "post-commit\n"

        cli(ws, "send", TEAM, "lead", "GO ON")  # bob's worktree made, a task committed
        wait_until(
            lambda: ws.store.paths.task(TEAM, 1).exists() and board.get(ws, TEAM, 1)["commits"],
            T,
            "the task's commit",
        )
        second = server.wait_for(lambda r: r["agent"] == "lead" and "TaskCreate"
                                 in json.dumps(r["body"]["messages"][-2:-1]), T)
        planted = tool_results(second)[-1]
        assert planted[0] and planted[1].startswith("refused: another member's worktree")
        done = cli(ws, "merge", TEAM, "bob")
        assert "merged" in done.output.lower()
    assert (repo / "notes.txt").read_text() == "notes\n"  # merged into the checkout
    assert not log.exists(), log.read_text()  # no hook ran for any of it
    assert not (repo / ".worktrees" / TEAM / "bob" / "planted.txt").exists()
    assert ws.settings_file.read_text() == SETTINGS
    assert always.read_text() == ALWAYS
    assert "[user]" in (repo / ".git" / "config").read_text()  # not overwritten through x
    assert [e["rule"] for e in events_of(ws, "lead", "tool_denied")] == ["write_file(.git/*)"]
