"""Worktrees (CONTRACT.md section 13) without a model: the real `git` binary on real
temporary repositories, the real `teamctl`, and the members' real tools (issue 13)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from teamd import actions, board, events, gitcmd, roster, worktrees
from teamd.agent.tools import Toolbox, ToolResult
from teamd.layout import Workspace
from tests import gitrepo
from tests.gitrepo import branches, commits, git, head
from tests.harness import ok
from tests.helpers_proc import ctl, teamctl_text

TEAM = "crew"


def box(ws: Workspace, member: str, cwd: Path, kind: str = "teammate") -> Toolbox:
    return Toolbox(ws, TEAM, member, kind=kind, cwd=cwd, bash_timeout=10,
                   plan_mode_required=False)


def snapshot(ws: Workspace) -> dict[str, bytes]:
    """Every file under the root except the repository's own: to prove nothing changed."""
    return {str(p.relative_to(ws.root)): p.read_bytes() for p in sorted(ws.root.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(ws.root).parts}


@pytest.fixture
def team(ws: Workspace, repo: Path) -> str:
    ctl(ws, "create", TEAM, "--worktrees", "--repo", str(repo))
    return TEAM


def completed_by(ws: Workspace, name: str, subject: str) -> tuple[dict[str, Any], ToolResult]:
    """A task that `name` claims and completes through its own TaskUpdate tool."""
    me = roster.get(roster.load(ws, TEAM), name)
    task = board.create(ws, TEAM, subject)
    assert board.claim(ws, TEAM, name, task["id"]) is not None
    result = box(ws, name, Path(me["cwd"])).run(
        "TaskUpdate", {"task_id": task["id"], "status": "completed"})
    return board.get(ws, TEAM, task["id"]), result


# -- create and spawn ---------------------------------------------------------------------
def test_create_records_the_repository_and_keeps_teamd_out_of_it(
        ws: Workspace, repo: Path, team: str) -> None:
    config = roster.load(ws, TEAM)
    assert (config["repo"], config["worktrees"]) == (str(repo.resolve()), True)
    exclude = (repo / ".git" / "info" / "exclude").read_text()
    for line in ("/teamd.toml", "/.teams/", "/.tasks/", "/.worktrees/"):
        assert exclude.splitlines().count(line) == 1
    ctl(ws, "spawn", TEAM, "alice", "--prompt", "work")
    ctl(ws, "create", "other", "--worktrees", "--repo", str(repo))  # idempotent
    assert (repo / ".git" / "info" / "exclude").read_text() == exclude
    (ws.root / "teamd.toml").write_text("")
    assert gitrepo.status(repo) == ""  # .teams/, .tasks/, .worktrees/, teamd.toml unseen


def test_create_with_a_repo_that_is_not_one_exits_2_and_makes_nothing(
        ws: Workspace, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    done = teamctl_text(ws, "create", TEAM, "--worktrees", "--repo", str(plain))
    assert done.returncode == 2
    assert "not inside a git work tree" in done.stderr and len(done.stderr.splitlines()) == 1
    assert not ws.store.team_exists(TEAM) and not ws.store.paths.teams_dir.exists()


def test_spawn_makes_the_worktree_and_branch_before_the_member(
        ws: Workspace, repo: Path, team: str) -> None:
    base = head(repo)
    out = ctl(ws, "spawn", TEAM, "alice", "--prompt", "work", "--json")
    alice = json.loads(out)
    path = ws.worktree(TEAM, "alice").resolve()
    assert alice["cwd"] == str(path)
    assert alice["worktree"] == {"path": str(path), "branch": "teamd/crew/alice",
                                 "base": base, "repo": str(repo.resolve())}
    assert (path / "shared.txt").read_text() == "original line\n"
    assert git(path, "rev-parse", "--abbrev-ref", "HEAD").strip() == "teamd/crew/alice"
    kinds = [e["event"] for e in events.read(ws, TEAM)]
    assert kinds.index("worktree_created") < kinds.index("member_added")
    # --base is resolved to a commit id; --no-worktree opts out in a worktrees team
    git(repo, "commit", "-q", "--allow-empty", "-m", "second")
    bob = json.loads(ctl(ws, "spawn", TEAM, "bob", "--prompt", "w", "--base", "HEAD~1",
                         "--json"))
    assert bob["worktree"]["base"] == base
    carol = json.loads(ctl(ws, "spawn", TEAM, "carol", "--prompt", "w", "--no-worktree",
                           "--json"))
    assert carol["worktree"] is None and carol["cwd"] == str(ws.root.resolve())
    lead = json.loads(ctl(ws, "spawn", TEAM, "lead", "--lead", "--prompt", "lead",
                          "--json"))
    assert lead["worktree"] is None  # the lead works in the repository itself
    assert branches(repo) == ["teamd/crew/alice", "teamd/crew/bob"]


def test_spawn_worktree_outside_a_repository_exits_2_and_adds_nothing(
        ws: Workspace, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    ctl(ws, "create", TEAM)
    before = snapshot(ws)
    done = teamctl_text(ws, "spawn", TEAM, "alice", "--prompt", "w", "--worktree", "--cwd",
                        str(plain))
    assert done.returncode == 2, done.stderr
    assert "not inside a git work tree" in done.stderr and len(done.stderr.splitlines()) == 1
    assert snapshot(ws) == before  # no member, no event, no worktree folder
    assert roster.load(ws, TEAM)["members"] == []
    assert not ws.worktrees_root.exists() and list(plain.iterdir()) == []


def test_spawn_refuses_an_existing_branch_and_reports_other_git_failures(
        ws: Workspace, repo: Path, team: str) -> None:
    # a branch with a commit no other branch has (a merged one is reused: test_branches.py)
    work = git(repo, "commit-tree", "HEAD^{tree}", "-p", "HEAD", "-m", "unmerged").strip()
    git(repo, "branch", "teamd/crew/alice", work)
    before = snapshot(ws)
    done = teamctl_text(ws, "spawn", TEAM, "alice", "--prompt", "w")
    assert done.returncode == 2 and "already exists" in done.stderr
    done = teamctl_text(ws, "spawn", TEAM, "bob", "--prompt", "w", "--base", "no-such-ref")
    assert done.returncode == 2 and "not a commit" in done.stderr
    # any other git failure: exit 1, git's message on one line, nothing added (not even
    # the branch git would have made first)
    (repo / ".git" / "worktrees").write_text("not a folder")
    done = teamctl_text(ws, "spawn", TEAM, "carol", "--prompt", "w")
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("teamctl: error: git worktree:")
    assert len(done.stderr.splitlines()) == 1
    assert snapshot(ws) == before
    assert branches(repo) == ["teamd/crew/alice"]


# -- the commit per task -------------------------------------------------------------------
def test_completing_a_task_commits_the_worktree_as_the_member(
        ws: Workspace, repo: Path, team: str) -> None:
    # the repository's hooks and signing settings must not get in the way of the record
    hooks = repo / ".git" / "hooks"
    for hook in ("pre-commit", "commit-msg", "prepare-commit-msg"):
        (hooks / hook).write_text("#!/bin/sh\necho refused by hook >&2\nexit 1\n")
        (hooks / hook).chmod(0o755)
    git(repo, "config", "commit.gpgsign", "true")
    git(repo, "config", "gpg.program", "/bin/false")
    alice = actions.spawn(ws, TEAM, "alice", "work")
    path = Path(alice["cwd"])
    (path / "new.txt").write_text("new\n")  # untracked files are included
    (path / "shared.txt").write_text("changed by alice\n")
    task, result = completed_by(ws, "alice", "Write the new file")
    out = ok(result)
    made = commits(repo, alice["worktree"]["base"], "teamd/crew/alice")
    assert len(made) == 1
    assert made[0]["subject"] == f"Task #{task['id']}: Write the new file"
    assert made[0]["author"] == made[0]["committer"] == "alice@crew <alice@crew.teamd>"
    assert made[0]["files"] == "new.txt shared.txt"
    assert task["status"] == "completed" and task["commits"] == [made[0]["id"]]
    assert made[0]["id"][:12] in out
    assert gitrepo.status(path) == ""
    assert (repo / "shared.txt").read_text() == "original line\n"  # main tree untouched
    done = [e for e in events.read(ws, TEAM) if e["event"] == "task_completed"]
    assert done[-1]["commits"] == [made[0]["id"]]
    # nothing changed: no commit, and the task lists none
    task2, result = completed_by(ws, "alice", "Think about it")
    ok(result)
    assert task2["commits"] == []
    assert len(commits(repo, alice["worktree"]["base"], "teamd/crew/alice")) == 1


def test_a_commit_made_just_before_a_crash_is_recorded_not_made_again(
        ws: Workspace, repo: Path, team: str) -> None:
    """The kill -9 window between the commit and the task write: the commit exists, the
    task still says in_progress. The next completion records it and makes no second."""
    alice = actions.spawn(ws, TEAM, "alice", "work")
    path = Path(alice["cwd"])
    task = board.create(ws, TEAM, "Port the login page")
    board.claim(ws, TEAM, "alice", task["id"])
    (path / "login.txt").write_text("ported\n")
    orphan = worktrees.commit_task(TEAM, "alice", alice["worktree"], task)  # then "killed"
    assert board.get(ws, TEAM, task["id"])["status"] == "in_progress"
    out = ok(box(ws, "alice", path).run("TaskUpdate", {"task_id": task["id"],
                                                       "status": "completed"}))
    made = commits(repo, alice["worktree"]["base"], "teamd/crew/alice")
    assert [c["id"] for c in made] == orphan
    assert board.get(ws, TEAM, task["id"])["commits"] == orphan
    assert "committed" in out


def test_a_failed_commit_leaves_the_task_in_progress_with_gits_message(
        ws: Workspace, repo: Path, team: str) -> None:
    alice = actions.spawn(ws, TEAM, "alice", "work")
    path = Path(alice["cwd"])
    (path / "wip.txt").write_text("wip\n")
    gitdir = Path(git(path, "rev-parse", "--absolute-git-dir").strip())
    (gitdir / "index.lock").write_text("")  # another git (or a dead one) holds the index
    task, result = completed_by(ws, "alice", "Half done")
    assert result.is_error and "\n" not in result.content
    assert "stays in_progress" in result.content and "index.lock" in result.content
    assert task["status"] == "in_progress" and task["commits"] == []
    (gitdir / "index.lock").unlink()
    result = box(ws, "alice", path).run("TaskUpdate", {"task_id": task["id"],
                                                       "status": "completed"})
    ok(result)
    assert len(board.get(ws, TEAM, task["id"])["commits"]) == 1


def test_git_never_sees_the_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "fake-secret-0123456789")
    monkeypatch.setenv("GIT_DIR", "/elsewhere")
    env = gitcmd.git_env()
    assert "ANTHROPIC_API_KEY" not in env and "GIT_DIR" not in env
    assert worktrees.toplevel(Path.cwd()) is None  # GIT_DIR did not leak into the call


# -- the lead's Task tool ------------------------------------------------------------------
def test_the_leads_task_tool_spawns_into_a_worktree(ws: Workspace, repo: Path,
                                                    tmp_path: Path) -> None:
    actions.create_team(ws, TEAM)  # no --worktrees: the tool asks for one
    actions.spawn(ws, TEAM, "lead", "lead the team", lead=True, cwd=str(repo))
    lead = box(ws, "lead", repo, kind="lead")
    out = ok(lead.run("Task", {"name": "dev", "prompt": "code", "team_name": TEAM,
                               "worktree": True}))
    dev = roster.get(roster.load(ws, TEAM), "dev")
    assert dev["cwd"] == str(ws.worktree(TEAM, "dev").resolve()) and dev["cwd"] in out
    assert dev["worktree"]["branch"] == "teamd/crew/dev"
    plain = tmp_path / "plain"
    plain.mkdir()
    elsewhere = box(ws, "lead", plain, kind="lead")
    before = snapshot(ws)
    result = elsewhere.run("Task", {"name": "ops", "prompt": "x", "team_name": TEAM,
                                    "worktree": True})
    assert result.is_error and "not inside a git work tree" in result.content
    # nothing added (the lead's own tool_call event is the only new line)
    after = snapshot(ws)
    assert {k for k in after if after[k] != before.get(k)} <= {".teams/crew/events.jsonl"}
    assert roster.find(roster.load(ws, TEAM), "ops") is None


# -- diff, merge ---------------------------------------------------------------------------
def test_merge_refuses_a_dirty_repository_and_merges_into_another_branch(
        ws: Workspace, repo: Path, team: str) -> None:
    alice = actions.spawn(ws, TEAM, "alice", "work")
    (Path(alice["cwd"]) / "feature.txt").write_text("feature\n")
    completed_by(ws, "alice", "Add the feature")
    stat = ctl(ws, "diff", TEAM, "alice", "--stat")
    assert "feature.txt" in stat and "1 insertion" in stat
    assert "+feature" in ctl(ws, "diff", TEAM, "alice")
    (repo / "README.md").write_text("edited, not committed\n")
    main_before = head(repo)
    done = teamctl_text(ws, "merge", TEAM, "alice")
    assert done.returncode == 1 and "uncommitted changes" in done.stderr
    assert head(repo) == main_before
    # --into: merged in a temporary worktree; the checkout (dirty as it is) is left alone
    git(repo, "branch", "release", main_before)
    merged = json.loads(ctl(ws, "merge", TEAM, "alice", "--into", "release", "--json"))
    assert merged["into"] == "release" and merged["commit"] == head_of(repo, "release")
    assert git(repo, "rev-parse", f"{merged['commit']}^2").strip() == \
        head_of(repo, "teamd/crew/alice")
    assert head(repo) == main_before and not (repo / "feature.txt").exists()
    assert (repo / "README.md").read_text() == "edited, not committed\n"
    assert len(git(repo, "worktree", "list").splitlines()) == 2  # repo + alice, no scratch
    done = teamctl_text(ws, "merge", TEAM, "alice", "--into", "no-such-branch")
    assert done.returncode == 2
    journal = [e for e in events.read(ws, TEAM) if e["event"] == "merged"]
    assert [(e["branch"], e["commit"]) for e in journal] == [("teamd/crew/alice",
                                                              merged["commit"])]
    assert "nothing to merge" in ctl(ws, "merge", TEAM, "alice", "--into", "release")


def head_of(repo: Path, ref: str) -> str:
    return git(repo, "rev-parse", ref).strip()


# -- leaving for good ----------------------------------------------------------------------
def test_release_removes_only_what_loses_nothing(ws: Workspace, repo: Path,
                                                 team: str) -> None:
    for name in ("idle", "unmerged", "merged", "dirty"):
        actions.spawn(ws, TEAM, name, "work")
    for name in ("unmerged", "merged"):
        (ws.worktree(TEAM, name) / f"{name}.txt").write_text(name)
        completed_by(ws, name, f"{name} work")
    ctl(ws, "merge", TEAM, "merged")
    (ws.worktree(TEAM, "dirty") / "scratch.txt").write_text("not committed")
    reports = {name: worktrees.release(ws, TEAM, name)
               for name in ("idle", "unmerged", "merged", "dirty")}
    assert reports["idle"] is not None and reports["idle"]["removed"]  # at base: on main
    assert reports["merged"] is not None and reports["merged"]["removed"]
    assert reports["unmerged"] is not None and not reports["unmerged"]["removed"]
    assert "not merged" in reports["unmerged"]["reason"]
    assert reports["dirty"] is not None and "uncommitted" in reports["dirty"]["reason"]
    assert "scratch.txt" in reports["dirty"]["reason"]
    assert not ws.worktree(TEAM, "idle").exists() and not ws.worktree(TEAM, "merged").exists()
    assert (ws.worktree(TEAM, "dirty") / "scratch.txt").read_text() == "not committed"
    assert (ws.worktree(TEAM, "unmerged") / "unmerged.txt").read_text() == "unmerged"
    assert branches(repo) == [f"teamd/crew/{n}" for n in ("dirty", "idle", "merged",
                                                          "unmerged")]
    journal = [(e["event"], e["member"]) for e in events.read(ws, TEAM)
               if e["event"] in ("worktree_removed", "worktree_kept")]
    assert sorted(journal) == [("worktree_kept", "dirty"), ("worktree_kept", "unmerged"),
                               ("worktree_removed", "idle"), ("worktree_removed", "merged")]
    assert worktrees.release(ws, TEAM, roster.get(roster.load(ws, TEAM), "idle")) == {
        "path": str(ws.worktree(TEAM, "idle").resolve()), "branch": "teamd/crew/idle",
        "removed": False, "reason": "already gone"}


def test_status_shows_branch_and_commits_ahead(ws: Workspace, repo: Path, team: str) -> None:
    actions.spawn(ws, TEAM, "alice", "work")
    actions.spawn(ws, TEAM, "carol", "work", worktree=False)
    for n in (1, 2):
        (ws.worktree(TEAM, "alice") / f"f{n}.txt").write_text(str(n))
        completed_by(ws, "alice", f"step {n}")
    doc = json.loads(ctl(ws, "status", TEAM, "--json"))
    rows = {m["name"]: m for m in doc["teams"][0]["members"]}
    assert (rows["alice"]["branch"], rows["alice"]["ahead"]) == ("teamd/crew/alice", 2)
    assert (rows["carol"]["branch"], rows["carol"]["ahead"]) == (None, None)
    table = ctl(ws, "status", TEAM)
    assert "BRANCH" in table and "teamd/crew/alice +2" in table


def test_a_planted_fsmonitor_or_external_diff_never_runs(tmp_path: Path) -> None:
    """Besides hooks, a model's `bash` could plant commands in the shared `.git/config` that
    git runs by itself: `core.fsmonitor` at every `status`, `diff.external` at every
    `diff`. The product's git commands run neither (plain git, for the proof, runs both)."""
    repo = gitrepo.make_repo(tmp_path / "repo")
    fsmon, extdiff = tmp_path / "FSMONITOR-RAN", tmp_path / "EXTDIFF-RAN"
    git(repo, "config", "core.fsmonitor", f"touch {fsmon}; false")
    git(repo, "config", "diff.external", f"sh -c 'touch {extdiff}'")
    (repo / "README.md").write_text("# changed\n")
    git(repo, "status", "--porcelain")  # the product's git (tests/gitrepo.git)
    assert "# changed" in git(repo, "diff", "HEAD")
    assert not fsmon.exists() and not extdiff.exists()
    for args in (["status", "--porcelain"], ["diff", "HEAD"]):  # plain git runs them
        subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False)
    assert fsmon.exists() and extdiff.exists()
