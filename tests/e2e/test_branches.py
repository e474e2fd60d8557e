"""A member's branch once its work is merged (CONTRACT.md section 13, issue 19): the LLM lead
in the repository itself, a team created again over merged branches, `status`'s `+N` of
commits not yet merged, `merge --delete-branch` and what `delete` says could be pruned.
Real git repositories (tests/gitrepo.py), the real `teamctl`, a real `teamd` for the lead."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from teamd import actions, roster
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.gitrepo import branches, git, head, make_repo
from tests.harness import T, running_teamd, tool_use, wait_until
from tests.helpers_proc import ctl, teamctl_text
from tests.unit.test_worktrees import completed_by, snapshot

TEAM = "crew"


@pytest.fixture
def team(ws: Workspace, repo: Path) -> str:
    ctl(ws, "create", TEAM, "--worktrees", "--repo", str(repo))
    return TEAM


def unmerged_of(ws: Workspace, name: str) -> tuple[str, int]:
    doc = json.loads(ctl(ws, "status", TEAM, "--json"))
    row = {m["name"]: m for m in doc["teams"][0]["members"]}[name]
    return row["branch"], row["ahead"]


def work(ws: Workspace, name: str, *steps: str) -> None:
    """`name` writes a file and completes a task for each step: one commit each."""
    for step in steps:
        (ws.worktree(TEAM, name) / f"{step}.txt").write_text(step)
        completed_by(ws, name, step)


# -- 1. the LLM lead works in the repository ------------------------------------------------
def test_the_llm_lead_of_a_worktrees_team_works_in_the_repository(
        ws: Workspace, tmp_path: Path, server: ScriptedServer) -> None:
    app = make_repo(tmp_path / "app", {"main.py": "print('hi')\n"})  # not the root
    (app / "src").mkdir()
    ctl(ws, "create", TEAM, "--worktrees", "--repo", str(app / "src"))  # its top is the repo
    lead = json.loads(ctl(ws, "spawn", TEAM, "lead", "--lead", "--prompt", "lead", "--json"))
    assert lead["cwd"] == str(app.resolve()) != str(ws.root.resolve())
    assert lead["worktree"] is None
    alice = json.loads(ctl(ws, "spawn", TEAM, "alice", "--prompt", "work", "--json"))
    assert alice["cwd"] == str(ws.worktree(TEAM, "alice").resolve())
    # and its tools really run there: its bash says where it is
    where = tmp_path / "where.txt"
    server.add_rule({"agent": "lead", "times": 1, "reply": {"content": [
        tool_use("bash", command=f"pwd > {where}")]}})
    with running_teamd(ws, server.url):
        wait_until(lambda: where.exists() and where.read_text().strip(), T,
                   "the lead's bash to run")
    assert Path(where.read_text().strip()).resolve() == app.resolve()


# -- 2. a team created again over its merged branches ---------------------------------------
def test_spawn_again_reuses_a_merged_branch_at_the_new_base(
        ws: Workspace, repo: Path, team: str) -> None:
    actions.spawn(ws, TEAM, "alice", "work")
    work(ws, "alice", "first")
    ctl(ws, "merge", TEAM, "alice")
    ctl(ws, "delete", TEAM, "--force")
    assert branches(repo) == ["teamd/crew/alice"]  # merged, kept by delete
    (repo / "later.txt").write_text("main moved on\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "later")
    ctl(ws, "create", TEAM, "--worktrees", "--repo", str(repo))
    alice = json.loads(ctl(ws, "spawn", TEAM, "alice", "--prompt", "again", "--json"))
    assert alice["worktree"]["base"] == head(repo)
    assert git(repo, "rev-parse", "teamd/crew/alice").strip() == head(repo)  # reset
    assert (ws.worktree(TEAM, "alice") / "later.txt").exists()
    assert unmerged_of(ws, "alice") == ("teamd/crew/alice", 0)


def test_spawn_over_an_unmerged_branch_exits_2_adds_nothing_and_suggests_d(
        ws: Workspace, repo: Path, team: str) -> None:
    git(repo, "checkout", "-q", "-b", "teamd/crew/alice")
    (repo / "mine.txt").write_text("work nobody merged\n")
    git(repo, "add", "mine.txt")
    git(repo, "commit", "-q", "-m", "unmerged work")
    tip = head(repo)
    git(repo, "checkout", "-q", "main")
    before = snapshot(ws)
    done = teamctl_text(ws, "spawn", TEAM, "alice", "--prompt", "w")
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert "1 commit not merged" in done.stderr
    assert "git -C" in done.stderr and "branch -d teamd/crew/alice" in done.stderr
    assert "-D" not in done.stderr
    assert snapshot(ws) == before and roster.load(ws, TEAM)["members"] == []
    assert git(repo, "rev-parse", "teamd/crew/alice").strip() == tip  # untouched


# -- 3. status's +N: commits not yet merged -------------------------------------------------
def test_status_counts_only_commits_not_yet_merged(ws: Workspace, repo: Path,
                                                   team: str) -> None:
    actions.spawn(ws, TEAM, "alice", "work")
    work(ws, "alice", "one", "two")
    assert unmerged_of(ws, "alice") == ("teamd/crew/alice", 2)
    assert "teamd/crew/alice +2" in ctl(ws, "status", TEAM)
    ctl(ws, "merge", TEAM, "alice")
    assert unmerged_of(ws, "alice") == ("teamd/crew/alice", 0)
    assert "teamd/crew/alice +0" in ctl(ws, "status", TEAM)
    work(ws, "alice", "three")
    assert unmerged_of(ws, "alice") == ("teamd/crew/alice", 1)
    # merged into another local branch (not the checked-out one) counts as merged too
    git(repo, "branch", "release", "main")
    ctl(ws, "merge", TEAM, "alice", "--into", "release")
    assert unmerged_of(ws, "alice") == ("teamd/crew/alice", 0)


# -- 4. merge --delete-branch, and what delete could prune ----------------------------------
def test_merge_delete_branch_deletes_it_when_the_worktree_goes(
        ws: Workspace, repo: Path, team: str) -> None:
    actions.spawn(ws, TEAM, "alice", "work")
    work(ws, "alice", "one")
    out = ctl(ws, "merge", TEAM, "alice", "--delete-branch")
    assert "merged teamd/crew/alice into main" in out
    assert "alice still uses teamd/crew/alice" in out and "when that worktree goes" in out
    assert branches(repo) == ["teamd/crew/alice"]  # the member still works in it
    out = ctl(ws, "remove", TEAM, "alice", "--force")
    assert "deleted branch teamd/crew/alice" in out
    assert branches(repo) == [] and not ws.worktree(TEAM, "alice").exists()
    assert "one.txt" in git(repo, "ls-files")  # the work is on main


def test_merge_delete_branch_at_once_when_no_worktree_holds_it(
        ws: Workspace, repo: Path, team: str) -> None:
    actions.spawn(ws, TEAM, "alice", "work")
    work(ws, "alice", "one")
    git(repo, "worktree", "remove", str(ws.worktree(TEAM, "alice")))  # by hand
    doc = json.loads(ctl(ws, "merge", TEAM, "alice", "--delete-branch", "--json"))
    assert doc["commit"] and doc["delete_branch"] == {
        "branch": "teamd/crew/alice", "deleted": True, "deferred": False, "reason": None}
    assert branches(repo) == []


def test_a_branch_with_work_after_the_merge_is_kept_not_forced(
        ws: Workspace, repo: Path, team: str) -> None:
    actions.spawn(ws, TEAM, "alice", "work")
    work(ws, "alice", "one")
    ctl(ws, "merge", TEAM, "alice", "--delete-branch")
    work(ws, "alice", "two")  # committed after the merge: not merged anywhere
    out = ctl(ws, "remove", TEAM, "alice", "--force")
    assert "kept worktree" in out and "1 commit not merged" in out
    assert branches(repo) == ["teamd/crew/alice"]


def test_delete_names_the_merged_branches_it_could_prune(
        ws: Workspace, repo: Path, team: str) -> None:
    for name in ("alice", "bob", "carol"):
        actions.spawn(ws, TEAM, name, "work")
    work(ws, "alice", "a")
    work(ws, "bob", "b")
    ctl(ws, "merge", TEAM, "alice")
    out = ctl(ws, "delete", TEAM, "--force")
    lines = [line for line in out.splitlines() if "prune" in line]
    # alice merged, carol never moved from main: both prunable; bob's work is not merged
    assert lines == [f"merged branches you can prune: git -C {repo.resolve()} branch -d "
                     "teamd/crew/alice teamd/crew/carol"]
    assert "kept worktree" in out and "teamd/crew/bob" in out
    subprocess.run(lines[0].split(": ", 1)[1], shell=True, check=True)  # pasted, it works
    assert branches(repo) == ["teamd/crew/bob"]
