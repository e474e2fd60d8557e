"""A member's branch once its work is merged (CONTRACT.md section 13): the one rule of what
"merged" means, and what follows from it.

A branch is merged when it is reachable from a local branch other than itself: then
removing it, or resetting it, loses nothing. From that rule: how many of a member's commits
are not merged yet (`status`'s BRANCH `+N`), reusing a merged branch when a team is created
again, `merge --delete-branch` (at once, or when the member's worktree goes), and the
merged branches `delete` could prune. A branch is only ever deleted with `git branch -d`,
which refuses one that is not merged: `-D` loses work, and is never run here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from teamd import gitcmd, roster
from teamd.errors import BadInput
from teamd.files import Json
from teamd.layout import Workspace


def _others(branch: str) -> tuple[str, ...]:
    """rev-list arguments for "every local branch but `branch`" (names hold no glob)."""
    return ("--not", f"--exclude={branch}", "--branches")


def unmerged(repo: Path, branch: str) -> int | None:
    """Commits of `branch` not reachable from any other local branch; None if git cannot
    tell (the branch is gone, the repository moved)."""
    done = gitcmd.git(repo, "rev-list", "--count", f"refs/heads/{branch}", *_others(branch),
               check=False, quiet_locks=True)
    return int(done.stdout.strip()) if done.returncode == 0 else None


def is_merged(repo: Path, branch: str) -> bool:
    """Is `branch` reachable from a local branch other than itself (nothing lost without it)?"""
    return unmerged(repo, branch) == 0


def member_unmerged(record: Mapping[str, Any]) -> int | None:
    """`unmerged` for a member's worktree record."""
    return unmerged(gitcmd.repo_of(dict(record)), str(record["branch"]))


def reuse(repo: Path, branch: str, commit: str) -> None:
    """A member spawned again where its branch already exists: a merged branch is moved to
    `commit` (the new base); an unmerged one is refused (BadInput), with the safe way out."""
    count = unmerged(repo, branch)
    if count != 0:
        what = f"{count} commit{'' if count == 1 else 's'}" if count else "commits"
        raise BadInput(f"branch {branch} already exists in {repo} with {what} not merged "
                       f"into any other branch; merge it, or delete it with "
                       f"`git -C {repo} branch -d {branch}` once merged, or pick another name")
    gitcmd.git(repo, "branch", "--force", "--no-track", branch, commit)


def delete(repo: Path, branch: str) -> str | None:
    """`git branch -d`: None once deleted (or already gone), else why not (git's words)."""
    if not gitcmd.branch_exists(repo, branch):
        return None
    done = gitcmd.git(repo, "branch", "-d", branch, check=False)
    return None if done.returncode == 0 else " ".join(done.stderr.split()) or "failed"


def delete_after_merge(ws: Workspace, team: str, name: str) -> Json:
    """`merge --delete-branch`: delete the member's merged branch now if no worktree holds
    it, else mark it to go with the worktree (`worktree.delete_branch`, carried out by
    `worktrees.release`). Returns {"branch", "deleted", "deferred", "reason"}."""
    record = gitcmd.worktree_of(roster.load(ws, team), name)
    report: Json = {"branch": record["branch"], "deleted": False, "deferred": False,
                    "reason": None}
    repo = gitcmd.repo_of(record)
    if Path(record["path"]).exists():
        def mark(config: Json) -> None:
            held = roster.find(config, name)
            tree = held.get("worktree") if held is not None else None
            if held is not None and tree is not None:
                held["worktree"] = {**tree, "delete_branch": True}

        roster.update(ws, team, mark)
        report["deferred"] = True
        return report
    gitcmd.git(repo, "worktree", "prune", check=False)
    report["reason"] = delete(repo, record["branch"])
    report["deleted"] = report["reason"] is None
    return report


def prunable(members: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """The members' branches that still exist and are merged, by repository: what
    `git branch -d` could prune once their worktrees are gone."""
    found: dict[str, list[str]] = {}
    for m in members:
        record = m.get("worktree")
        if not record:
            continue
        repo = gitcmd.repo_of(dict(record))
        if gitcmd.branch_exists(repo, record["branch"]) and is_merged(repo, record["branch"]):
            found.setdefault(str(repo), []).append(record["branch"])
    return found
