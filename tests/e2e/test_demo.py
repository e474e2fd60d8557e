"""`teamctl demo` as a person runs it: the real console script, a real `teamd run`, the
scripted model offline (CONTRACT.md §9: every command honours `--root` and `TEAMD_ROOT`,
`demo` included; `demo --lead` tells the seeds' story with an LLM lead)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import psutil
import pytest

from teamctl.demo import TASKS, TEAM
from teamd import board, inbox, requests, roster
from teamd.layout import Workspace
from tests.harness import journal, paste_back
from tests.helpers_proc import TEAMCTL, clean_env

TIMEOUT = 180


def run_demo(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(TEAMCTL), *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=TIMEOUT, check=False)


def started_pids(ws: Workspace) -> list[int]:
    """Every process the demo started: the supervisor and each member it forked."""
    records = journal(ws, TEAM)
    return [int(r["pid"]) for r in records if r["event"] in ("spawned", "supervisor_started")]


def assert_nothing_left(ws: Workspace, pids: list[int]) -> None:
    assert pids
    for pid in pids:
        try:
            alive = psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            alive = False
        assert not alive, f"process {pid} of the demo is still running"
    for m in roster.load(ws, TEAM)["members"]:
        assert not roster.is_live(m) and m["status"] == "shutdown", m


@pytest.mark.timeout(TIMEOUT + 30)
def test_demo_honours_the_global_root_and_teamd_root(tmp_path: Path, ws: Workspace) -> None:
    env = {**clean_env(), "TEAMD_ROOT": str(ws.root)}
    there = tmp_path / "there"
    done = run_demo("--root", str(there), "demo", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    assert f"Workspace: {there}" in done.stdout
    assert Workspace.at(there).store.team_exists(TEAM)
    assert not (ws.root / ".teams").exists() and not (tmp_path / "teamd-demo").exists()
    assert_nothing_left(Workspace.at(there), started_pids(Workspace.at(there)))
    assert_pasted_back(done.stdout, there, tmp_path, env)
    # without --root, $TEAMD_ROOT
    done = run_demo("demo", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    assert ws.store.team_exists(TEAM) and not (tmp_path / "teamd-demo").exists()
    # a root that already holds the demo team is refused, nothing touched
    before = ws.store.paths.config(TEAM).read_bytes()
    again = run_demo("demo", env=env, cwd=tmp_path)
    assert again.returncode == 1 and "already holds" in again.stderr
    assert ws.store.paths.config(TEAM).read_bytes() == before


@pytest.mark.timeout(TIMEOUT + 30)
def test_demo_lead_tells_the_whole_story_offline(tmp_path: Path) -> None:
    root = tmp_path / "story"
    done = run_demo("--root", str(root), "demo", "--lead", "--timeout", "120",
                    env=clean_env(), cwd=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    assert "scripted model server" in done.stdout  # offline, and it says so
    ws = Workspace.at(root)
    # every task completed: the lead's four, chained
    tasks = board.list_tasks(ws, TEAM)
    assert [(t["subject"], t["blocked_by"], t["status"]) for t in tasks] == [
        (subject, [i] if i else [], "completed") for i, (subject, _) in enumerate(TASKS)]
    assert {t["created_by"] for t in tasks} == {"lead"}
    assert [(t["id"], t["owner"]) for t in tasks] == [
        (1, "analyst"), (2, "backend"), (3, "backend"), (4, "frontend")]
    # the lead spawned the team with its Task tool; backend in plan mode
    config = roster.load(ws, TEAM)
    kinds = {m["name"]: (m["kind"], m["plan_mode_required"]) for m in config["members"]}
    assert kinds == {"lead": ("lead", False), "analyst": ("teammate", False),
                     "backend": ("teammate", True), "frontend": ("teammate", False)}
    spawned_by_lead = [r["input"]["name"] for r in journal(ws, TEAM)
                       if r["event"] == "tool_call" and r["member"] == "lead"
                       and r["tool"] == "Task"]
    assert spawned_by_lead == ["analyst", "backend", "frontend"]
    # backend's plan: rejected, then the revision approved
    plans = [r for r in requests.list_requests(ws, TEAM) if r["kind"] == "plan_approval"]
    assert [(r["sender"], r["status"]) for r in plans] == [
        ("backend", "rejected"), ("backend", "approved")]
    # the lead shut its team down with the handshake; the person stopped the lead
    shutdowns = [r for r in requests.list_requests(ws, TEAM) if r["kind"] == "shutdown"]
    assert sorted((r["sender"], r["recipient"], r["status"]) for r in shutdowns) == [
        ("lead", name, "approved") for name in ("analyst", "backend", "frontend")]
    assert {m["name"]: m["desired"] for m in config["members"]} == dict.fromkeys(
        kinds, "stopped")
    # the person (`user`) spoke to the lead and heard back
    messages: list[dict[str, Any]] = [r["message"] for r in journal(ws, TEAM)
                                      if r["event"] == "message"]
    assert any(m["sender"] == "user" and m["recipient"] == "lead" for m in messages)
    told = inbox.peek(ws, TEAM, "user")
    assert told and {m["sender"] for m in told} == {"lead"}
    assert any("migration is done" in m["content"] for m in told)
    # shown live: the story is on stdout as it happened
    for line in ("backend → lead [plan_approval_request]", "[plan_approval_response]",
                 "lead → user:", "task_completed task_id=4"):
        assert line in done.stdout, line
    assert_nothing_left(ws, started_pids(ws))
    ran = assert_pasted_back(done.stdout, root, tmp_path, clean_env())
    # no repository and no worktrees in this story: the work is in the lead's folder
    assert "app/" not in done.stdout and ".worktrees" not in done.stdout
    assert f"{root}/work/notes/" in done.stdout
    said = next(c for c in ran if " send " in c)  # the person's line, as the demo showed it
    assert said.endswith(f"--root {root} send {TEAM} lead 'Keep the REST endpoints up until "
                         "the frontend has moved, please.'")


def assert_pasted_back(out: str, root: Path, cwd: Path, env: dict[str, str]
                       ) -> dict[str, str]:
    """Every path and command the demo printed works when pasted (CONTRACT §9, issue 19):
    named the way the root was given (absolute here), and the live state read where it
    is, `members/*.json`, not `config.json`."""
    assert f"Everything the team did is in plain files under {root}:" in out
    ran = paste_back(out, cwd, env)
    members = next(o for c, o in ran.items() if "members/*.json" in c)
    states = json.loads(members)
    assert {m["name"] for m in states} >= {"analyst", "backend", "frontend"}
    assert all(m["status"] == "shutdown" and m["usage"]["output_tokens"] > 0
               for m in states), states
    assert not any("config.json" in c for c in ran if c.startswith("jq"))
    assert any("task list" in c and "#4" in o for c, o in ran.items()), ran
    return ran
