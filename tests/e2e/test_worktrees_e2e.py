"""Worktree teammates end to end (CONTRACT.md section 13; issue 13): a real temporary git
repository, the real `git` binary, a real `teamd run`, the real SDK against the scripted
model server, and the real `teamctl`."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest

from teamd import actions, board, events, files, roster
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.gitrepo import branches, commits, git, head, merging, status
from tests.harness import live_pid, member, running_teamd, wait_until
from tests.helpers_proc import ctl, teamctl_text

TEAM = "crew"
T = 30.0

# A claimed task's description says which file to write: `FILE=name`.
CLAIMED = (r"<auto-claimed>Task #(?P<tid>\d+): (?P<subject>[^\n<]+)\nFILE=(?P<file>[^\s<]+)")


def write_and_complete() -> dict[str, Any]:
    """The model writes the task's file and completes the task in one turn."""
    return {"name": "work", "regex": CLAIMED, "reply": {"content": [
        {"type": "tool_use", "name": "write_file",
         "input": {"path": "{file}", "content": "{agent} wrote this for task {tid}\n"}},
        {"type": "tool_use", "name": "TaskUpdate",
         "input": {"task_id": "{int:tid}", "status": "completed"}}]}}


@pytest.fixture
def script() -> dict[str, Any]:
    return {"rules": [], "default": {"content": [
            {"type": "text", "text": "Done; waiting for work."}]}}


def give(ws: Workspace, name: str, subject: str, file: str) -> int:
    """A task for `name` alone (owner set, so no other teammate can claim it)."""
    task = board.create(ws, TEAM, subject, f"FILE={file}")
    board.update(ws, TEAM, task["id"], owner=name)
    return int(task["id"])


def all_completed(ws: Workspace) -> bool:
    tasks = board.list_tasks(ws, TEAM)
    return bool(tasks) and all(t["status"] == "completed" for t in tasks)


@pytest.fixture
def git_spy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `git` first on PATH that notes, for every call, whether ANTHROPIC_API_KEY was in
    its environment, then runs the real git."""
    real = shutil.which("git")
    assert real is not None
    spy_dir = tmp_path / "spy"
    spy_dir.mkdir()
    log = tmp_path / "git-calls.log"
    (spy_dir / "git").write_text(
        "#!/bin/sh\n"
        f'if [ -n "${{ANTHROPIC_API_KEY+set}}" ]; then k=KEY; else k=clean; fi\n'
        f'echo "$k $*" >> {log}\n'
        f'exec {real} "$@"\n')
    (spy_dir / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{spy_dir}{os.pathsep}{os.environ['PATH']}")
    return log


# -- three teammates, three branches, three commits ----------------------------------------
def test_three_teammates_three_branches_three_commits(
        ws: Workspace, repo: Path, server: ScriptedServer, git_spy: Path) -> None:
    server.add_rule(write_and_complete())
    ctl(ws, "create", TEAM, "--worktrees", "--repo", str(repo))
    for name in ("alice", "bob", "carol"):
        ctl(ws, "spawn", TEAM, name, "--prompt", "Do the tasks you are given.")
    main_head = head(repo)
    ids = {name: give(ws, name, f"Write {name}'s page", f"{name}.txt")
           for name in ("alice", "bob", "carol")}
    with running_teamd(ws, server.url):
        wait_until(lambda: all_completed(ws), T, "the three tasks to be completed")
        doc = json.loads(ctl(ws, "status", TEAM, "--json"))
    assert branches(repo) == ["teamd/crew/alice", "teamd/crew/bob", "teamd/crew/carol"]
    for name, tid in ids.items():
        record = member(ws, TEAM, name)["worktree"]
        made = commits(repo, record["base"], record["branch"])
        assert len(made) == 1, made
        assert made[0]["subject"] == f"Task #{tid}: Write {name}'s page"
        assert made[0]["author"] == f"{name}@crew <{name}@crew.teamd>"
        assert made[0]["files"] == f"{name}.txt"
        assert board.get(ws, TEAM, tid)["commits"] == [made[0]["id"]]
        assert (Path(record["path"]) / f"{name}.txt").read_text() == \
            f"{name} wrote this for task {tid}\n"
        assert not (repo / f"{name}.txt").exists()  # the main tree is untouched
    rows = {m["name"]: m for m in doc["teams"][0]["members"]}
    assert {n: (rows[n]["branch"], rows[n]["ahead"]) for n in ids} == {
        n: (f"teamd/crew/{n}", 1) for n in ids}
    assert head(repo) == main_head and status(repo) == ""  # nor do .teams/ etc. show
    assert "alice.txt | 1 +" in ctl(ws, "diff", TEAM, "alice", "--stat")
    # merged one by one: each a --no-ff merge commit, journaled with its id
    for name in ids:
        out = ctl(ws, "merge", TEAM, name)
        assert out.strip().endswith(head(repo))
        assert (repo / f"{name}.txt").exists()
        assert len(git(repo, "rev-list", "--parents", "-n1", "HEAD").split()) == 3
    merged = [e for e in events.read(ws, TEAM) if e["event"] == "merged"]
    assert [e["member"] for e in merged] == list(ids)
    assert merged[-1]["commit"] == head(repo)
    # every git the teammates ran (their commits included) ran without the API key
    calls = git_spy.read_text().splitlines()
    assert sum(" commit " in c for c in calls) == 3
    assert calls and not [c for c in calls if c.startswith("KEY")]


# -- two teammates, one line ---------------------------------------------------------------
def test_second_merge_of_the_same_line_conflicts_and_leaves_no_merge(
        ws: Workspace, repo: Path, server: ScriptedServer) -> None:
    server.add_rule(write_and_complete())
    actions.create_team(ws, TEAM, repo=str(repo), worktrees_on=True)
    for name in ("alice", "bob"):
        actions.spawn(ws, TEAM, name, "Do the tasks you are given.")
        give(ws, name, f"{name} rewrites the shared line", "shared.txt")
    with running_teamd(ws, server.url):
        wait_until(lambda: all_completed(ws), T, "both tasks to be completed")
    ctl(ws, "merge", TEAM, "alice")
    after_first = head(repo)
    assert (repo / "shared.txt").read_text().startswith("alice wrote this")
    done = teamctl_text(ws, "merge", TEAM, "bob")
    assert done.returncode == 1
    assert "shared.txt" in done.stderr and "conflict" in done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert status(repo) == "" and not merging(repo)
    assert head(repo) == after_first
    assert (repo / "shared.txt").read_text().startswith("alice wrote this")
    assert [e["member"] for e in events.read(ws, TEAM) if e["event"] == "merged"] == ["alice"]


# -- delete keeps what is not merged -------------------------------------------------------
def test_delete_removes_the_merged_clean_worktree_and_keeps_the_dirty_one(
        ws: Workspace, repo: Path, server: ScriptedServer) -> None:
    server.add_rule({"agent": "alice", **write_and_complete()})
    # bob writes his file but never completes the task: the change stays uncommitted
    server.add_rule({"agent": "bob", "regex": CLAIMED, "reply": {"content": [
        {"type": "tool_use", "name": "write_file",
         "input": {"path": "{file}", "content": "bob's unfinished work\n"}}]}})
    actions.create_team(ws, TEAM, repo=str(repo), worktrees_on=True)
    for name in ("alice", "bob"):
        actions.spawn(ws, TEAM, name, "Do the tasks you are given.")
    give(ws, "alice", "Finish the page", "alice.txt")
    give(ws, "bob", "Start the other page", "bob.txt")
    bob_file = ws.worktree(TEAM, "bob") / "bob.txt"
    with running_teamd(ws, server.url) as daemon:
        wait_until(lambda: board.get(ws, TEAM, 1)["status"] == "completed", T, "alice done")
        wait_until(bob_file.exists, T, "bob's file")
        wait_until(lambda: member(ws, TEAM, "bob")["status"] == "idle", T, "bob idle")
        ctl(ws, "merge", TEAM, "alice")
        out = ctl(ws, "delete", TEAM, "--timeout", "60")
        # the supervisor removed the team, releasing the worktrees first (its log says so
        # beside the `worktree_kept` it journaled before the folders went)
        assert "kept worktree" in daemon.output()
    assert not ws.store.team_exists(TEAM)
    assert not ws.worktree(TEAM, "alice").exists()
    assert bob_file.read_text() == "bob's unfinished work\n"
    kept = [line for line in out.splitlines() if line.startswith("kept worktree")]
    assert len(kept) == 1 and "teamd/crew/bob" in kept[0] and "bob.txt" in kept[0]
    assert "uncommitted" in kept[0]
    assert branches(repo) == ["teamd/crew/alice", "teamd/crew/bob"]
    # the post-mortem keeps the story: both releases in the archived journal, before the end
    archived = files.read_jsonl(ws.store.paths.archives(TEAM)[-1] / "events.jsonl").records
    names = [r["event"] for r in archived]
    kept_events = [r for r in archived if r["event"] == "worktree_kept"]
    assert [r["member"] for r in kept_events] == ["bob"] and kept_events[0]["reason"]
    assert "worktree_removed" in names and names[-1] == "team_deleted"
    listed = git(repo, "worktree", "list", "--porcelain")
    assert str(ws.worktree(TEAM, "bob").resolve()) in listed
    assert str(ws.worktree(TEAM, "alice").resolve()) not in listed


# -- kill -9 between the file write and the completion ---------------------------------------
def test_kill_between_write_and_completion_commits_once_after_restart(
        ws: Workspace, repo: Path, server: ScriptedServer) -> None:
    write = {"type": "tool_use", "name": "write_file",
             "input": {"path": "{file}", "content": "written before the kill\n"}}
    complete = {"content": [{"type": "tool_use", "name": "TaskUpdate",
                             "input": {"task_id": "{int:tid}", "status": "completed"}}]}
    server.add_rule({"agent": "alice", "regex": CLAIMED, "reply": {"content": [write]}})
    # the call after the write is held long enough to kill the teammate during it
    server.add_rule({"name": "held", "agent": "alice", "tool_result": "write_file",
                     "regex": r"work-(?P<tid>\d+)\.txt", "times": 1, "delay": 60,
                     "reply": complete})
    server.add_rule({"name": "complete", "agent": "alice", "tool_result": "write_file",
                     "regex": r"work-(?P<tid>\d+)\.txt", "reply": complete})
    actions.create_team(ws, TEAM, repo=str(repo), worktrees_on=True)
    alice = actions.spawn(ws, TEAM, "alice", "Do the tasks you are given.")
    record, path = alice["worktree"], Path(alice["cwd"])
    tid = give(ws, "alice", "Write the work file", "work-1.txt")
    with running_teamd(ws, server.url, backoff_initial=0.1):
        server.wait_for(lambda r: r["rule"] == "held", T)
        pid = live_pid(ws, TEAM, "alice")
        assert pid is not None
        # the window: the file is written, the completion not yet asked for
        assert (path / "work-1.txt").read_text() == "written before the kill\n"
        assert status(path) == "?? work-1.txt\n"
        assert board.get(ws, TEAM, tid)["status"] == "in_progress"
        assert commits(repo, record["base"], record["branch"]) == []
        os.kill(pid, signal.SIGKILL)
        # the journal line follows the task file: wait for the line itself
        wait_until(lambda: [e for e in events.read(ws, TEAM) if e["event"] == "task_completed"],
                   T, "the task to be completed after a restart")
        assert member(ws, TEAM, "alice")["restarts"] == 1
        assert member(ws, TEAM, "alice")["last_exit"]["signal"] == signal.SIGKILL
    assert len([r for r in server.requests if r["rule"] == "complete"]) == 1
    made = commits(repo, record["base"], record["branch"])
    assert len(made) == 1
    assert made[0]["subject"] == f"Task #{tid}: Write the work file"
    assert made[0]["files"] == "work-1.txt"
    assert git(repo, "show", f"{made[0]['id']}:work-1.txt") == "written before the kill\n"
    assert board.get(ws, TEAM, tid)["commits"] == [made[0]["id"]]
    assert status(path) == ""
    completions = [e for e in events.read(ws, TEAM) if e["event"] == "task_completed"]
    assert len(completions) == 1 and completions[0]["commits"] == [made[0]["id"]]
    assert roster.get(roster.load(ws, TEAM), "alice")["worktree"] == record
