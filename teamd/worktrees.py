"""Git worktrees for teammates (CONTRACT.md section 13): every git command the product runs.

This module owns the rules built on `git` (driven only through `teamd.gitcmd`: the real
binary, never with the API key or a caller's GIT_DIR in its environment, never while a
lock is held):
which repository a member works in, making a member's worktree and branch before it is
added, the commit a worktree member makes when it completes a task (found again after a
crash, so a task is never committed twice), `diff`, `merge` (refusing a dirty repository,
aborting a conflict cleanly), how far a branch is ahead of its base, and what happens to a
worktree when its member leaves for good: removed when clean and merged, kept and reported
otherwise. Nothing a person has not merged is ever deleted here.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from teamd import branches, crashpoints, events, files, roster
from teamd.errors import BadInput, TeamdError
from teamd.files import Json

# `X as X`: re-exported while teamd/agent/tool_handlers.py (GitError) and teamctl/cli.py
# (worktree_of) name them here; their owners in this round may import them from gitcmd
from teamd.gitcmd import GitError as GitError
from teamd.gitcmd import branch_exists, git, one_line, repo_of
from teamd.gitcmd import worktree_of as worktree_of
from teamd.layout import Workspace

log = logging.getLogger(__name__)

#: what a root inside the repository adds to `.git/info/exclude`
EXCLUDED = ("teamd.toml", ".teams/", ".tasks/", ".worktrees/")


# -- repositories ------------------------------------------------------------------------
def toplevel(path: Path | str) -> Path | None:
    """The top of the git work tree holding `path`, or None if it is in none."""
    where = Path(path)
    if not where.is_dir():
        return None
    done = git(where, "rev-parse", "--show-toplevel", check=False)
    if done.returncode != 0 or not done.stdout.strip():
        return None
    return Path(done.stdout.strip()).resolve()


def require_repo(path: Path | str, what: str) -> Path:
    """The work tree's top holding `path`; BadInput naming `what` if there is none."""
    top = toplevel(path)
    if top is None:
        raise BadInput(f"{what} {str(path)!r} is not inside a git work tree")
    return top


def resolve_commit(repo: Path, ref: str) -> str:
    """The commit id `ref` names in `repo`; BadInput if it names none."""
    if not ref or ref.startswith("-"):
        raise BadInput(f"--base {ref!r} is not a commit")
    done = git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}",
               check=False)
    if done.returncode != 0:
        if ref == "HEAD":
            raise BadInput(f"the repository {repo} has no commit yet: make a first commit")
        raise BadInput(f"--base {ref!r} is not a commit in {repo}")
    return done.stdout.strip()


def branch_name(team: str, name: str) -> str:
    return f"teamd/{team}/{name}"


def exclude_workspace(ws: Workspace, repo: Path) -> bool:
    """When the root lies inside `repo`, list teamd's files in its `info/exclude` (once).

    Returns True if the file changed. The file is git's: rewritten whole (temp file and
    rename) with its own mode, so two spawns at once both leave every line in it.
    """
    root = ws.root.resolve()
    try:
        rel = root.relative_to(repo)
    except ValueError:
        return False  # the root is outside the repository: nothing of ours shows in it
    prefix = "" if str(rel) == "." else f"{rel.as_posix()}/"
    wanted = [f"/{prefix}{name}" for name in EXCLUDED]
    path = Path(git(repo, "rev-parse", "--path-format=absolute", "--git-path",
                    "info/exclude").stdout.strip())
    try:
        text = path.read_text()
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        text, mode = "", 0o644
    have = set(text.splitlines())
    missing = [line for line in wanted if line not in have]
    if not missing:
        return False
    if text and not text.endswith("\n"):
        text += "\n"
    if missing == wanted:
        text += "# teamd's workspace files (added by teamd)\n"
    text += "".join(f"{line}\n" for line in missing)
    path.parent.mkdir(parents=True, exist_ok=True)
    files.atomic_write_bytes(path, text.encode())
    os.chmod(path, mode)
    return True


def repo_for_spawn(ws: Workspace, config: Json, cwd: Path) -> Path:
    """The repository a new worktree member works in: the team's `repo`, else the one that
    contains its working directory (CONTRACT §13)."""
    if config.get("repo"):
        return require_repo(config["repo"], "the team's repository")
    return require_repo(cwd, "the working directory")


# -- making one --------------------------------------------------------------------------
def add(ws: Workspace, team: str, name: str, repo: Path, base: str | None = None) -> Json:
    """Make `.worktrees/{team}/{name}` on a new branch `teamd/{team}/{name}` at `base`.

    Returns the roster record {path, branch, base, repo}. An existing branch is reused,
    reset to `base`, when merged (`branches.reuse`); BadInput (nothing made) when it is
    not, when the folder already exists or `base` names no commit; GitError otherwise.
    """
    branch = branch_name(team, name)
    commit = resolve_commit(repo, base or "HEAD")
    path = ws.worktree(team, name).resolve()
    if path.exists():
        raise BadInput(f"{path} already exists; move it away or pick another name")
    reused = branch_exists(repo, branch)
    if reused:
        branches.reuse(repo, branch, commit)
    try:
        exclude_workspace(ws, repo)
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TeamdError(f"cannot prepare {path}: {exc}") from None
    record = {"path": str(path), "branch": branch, "base": commit, "repo": str(repo)}
    # `worktree add -b` in two steps, so that a failure takes back exactly what this call
    # made: creating the ref is atomic, and a racing spawn of the same name fails here
    made = git(repo, "branch", "--no-track", branch, commit, check=False) if not reused \
        else None
    if made is not None and made.returncode != 0:
        if branch_exists(repo, branch):
            raise BadInput(f"branch {branch} already exists in {repo}")
        raise GitError(f"git branch: {one_line(made.stderr)}")
    try:
        git(repo, "worktree", "add", "--quiet", str(path), branch)
    except GitError:
        git(repo, "branch", "-D", branch, check=False)
        raise
    return record


def undo_add(record: Json) -> None:
    """Take back a worktree just made for a member that was then not added (no work in it)."""
    repo = Path(record["repo"])
    git(repo, "worktree", "remove", "--force", record["path"], check=False)
    git(repo, "branch", "-D", record["branch"], check=False)


# -- the commit per task -----------------------------------------------------------------
def identity(team: str, name: str) -> dict[str, str]:
    who, mail = f"{name}@{team}", f"{name}@{team}.teamd"
    return {"GIT_AUTHOR_NAME": who, "GIT_AUTHOR_EMAIL": mail,
            "GIT_COMMITTER_NAME": who, "GIT_COMMITTER_EMAIL": mail}


def task_message(task: Mapping[str, Any]) -> str:
    return f"Task #{task['id']}: {task['subject']}"


def task_commits(record: Mapping[str, Any], task_id: int) -> list[str]:
    """Commits on the member's branch past its base made for task `task_id`, oldest first."""
    mark = f"Task #{int(task_id)}: "
    done = git(record["path"], "log", "--reverse", "--format=%H %s",
               f"{record['base']}..HEAD")
    return [line.split(" ", 1)[0] for line in done.stdout.splitlines()
            if line.split(" ", 1)[-1].startswith(mark)]


def commit_task(team: str, name: str, record: Mapping[str, Any], task: Mapping[str, Any]
                ) -> list[str]:
    """Commit everything that changed in the worktree for `task`; return the commits the
    task should list that it does not yet (the new one, and any made by a process killed
    before it could record it). No change, no commit."""
    path = record["path"]
    git(path, "add", "-A")
    staged = git(path, "diff", "--cached", "--quiet", check=False)
    if staged.returncode not in (0, 1):
        raise GitError(f"git diff: {one_line(staged.stderr)}")
    if staged.returncode == 1:
        crashpoints.before("commit", Path(path))
        git(path, "commit", "--quiet", "--no-verify", "--no-gpg-sign",
            "--cleanup=whitespace", "-F", "-", env=identity(team, name),
            stdin=task_message(task) + "\n")
        crashpoints.after("commit", Path(path))
    known = set(task.get("commits") or [])
    return [c for c in task_commits(record, int(task["id"])) if c not in known]


# -- reviewing and merging ---------------------------------------------------------------
def diff(record: Json, stat: bool = False) -> str:
    """`git diff {base}...{branch}`: the member's committed work against its base."""
    args = ["diff", *(["--stat"] if stat else []), f"{record['base']}...{record['branch']}"]
    return git(repo_of(record), *args).stdout


def ahead(record: Json) -> int | None:
    """Commits on the member's branch past its base; None if git cannot tell."""
    done = git(repo_of(record), "rev-list", "--count", f"{record['base']}..{record['branch']}",
               check=False, quiet_locks=True)
    return int(done.stdout.strip()) if done.returncode == 0 else None


def uncommitted(path: Path | str) -> list[str]:
    """Paths with uncommitted changes in a work tree, untracked files included."""
    done = git(path, "status", "--porcelain", "--untracked-files=all", quiet_locks=True)
    return [line[3:] for line in done.stdout.splitlines() if line.strip()]


def _merge_here(where: Path, record: Json, message: str) -> str:
    """Merge the member's branch into what `where` has checked out; return the commit.
    On a conflict: abort (no merge left in progress) and GitError listing the files."""
    done = git(where, "merge", "--no-ff", "--no-edit", "-m", message, record["branch"],
               check=False)
    if done.returncode != 0:
        conflicts = git(where, "diff", "--name-only", "--diff-filter=U",
                        check=False).stdout.split()
        git(where, "merge", "--abort", check=False)
        if conflicts:
            raise GitError(f"merging {record['branch']} conflicts in {', '.join(conflicts)}; "
                           "merge aborted, nothing changed")
        raise GitError(f"git merge: {one_line(done.stderr or done.stdout)}")
    return git(where, "rev-parse", "HEAD").stdout.strip()


def merge(ws: Workspace, team: str, name: str, into: str | None = None) -> Json:
    """Merge a member's branch with --no-ff into the repository's checked-out branch, or
    into the local branch `into` in a temporary worktree. Journals `merged`.

    Returns {"branch", "into", "commit"}; commit is None when there was nothing to merge.
    """
    config = roster.load(ws, team)
    record = worktree_of(config, name)
    repo = repo_of(record)
    if not branch_exists(repo, record["branch"]):
        raise TeamdError(f"branch {record['branch']} no longer exists in {repo}")
    if into is None:
        head = git(repo, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
        if head.returncode != 0:
            raise TeamdError(f"{repo} has no branch checked out (detached HEAD); check one out "
                             "or use --into BRANCH")
        target = head.stdout.strip()
        dirty = [p for p in git(repo, "status", "--porcelain", "--untracked-files=no"
                                ).stdout.splitlines() if p.strip()]
        if dirty:
            raise TeamdError(f"{repo} has uncommitted changes ({len(dirty)} file(s)); commit "
                             "or stash them first, or merge with --into BRANCH")
    else:
        target = into
        if into.startswith("-") or not branch_exists(repo, into):
            raise BadInput(f"--into {into!r} is not a local branch of {repo}")
    if ahead(record) == 0 or git(repo, "merge-base", "--is-ancestor", record["branch"], target,
                                 check=False).returncode == 0:
        return {"branch": record["branch"], "into": target, "commit": None}
    message = f"Merge {record['branch']} ({name}@{team}) into {target}"
    if into is None:
        commit = _merge_here(repo, record, message)
    else:
        scratch = Path(tempfile.mkdtemp(prefix="teamd-merge-"))
        where = scratch / "wt"
        try:
            git(repo, "worktree", "add", "--quiet", str(where), into)
            commit = _merge_here(where, record, message)
        finally:
            git(repo, "worktree", "remove", "--force", str(where), check=False)
            shutil.rmtree(scratch, ignore_errors=True)
            git(repo, "worktree", "prune", check=False)
    events.emit(ws, team, "merged", member=name, path=record["path"],
                branch=record["branch"], commit=commit, into=target)
    return {"branch": record["branch"], "into": target, "commit": commit}


# -- leaving for good --------------------------------------------------------------------
def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def keep_reason(record: Json) -> str | None:
    """Why this worktree must be kept, or None when removing it loses nothing: nothing
    uncommitted (untracked files count) and its branch reachable from another local
    branch (CONTRACT §13)."""
    path = Path(record["path"])
    try:
        changes = uncommitted(path)
    except GitError as exc:
        return f"cannot tell whether it is clean ({exc})"
    if changes:
        return f"uncommitted changes in {_plural(len(changes), 'file')}: " + \
            ", ".join(changes[:5]) + (" …" if len(changes) > 5 else "")
    count = branches.member_unmerged(record)
    if count is None:
        return f"cannot tell whether {record['branch']} is merged"
    if count:
        return f"branch {record['branch']} has {_plural(count, 'commit')} not merged into " \
            "any other branch"
    return None


def release(ws: Workspace, team: str, member: Mapping[str, Any] | str) -> Json | None:
    """A member leaves for good (removed, or its team deleted): remove its worktree if that
    loses nothing (the branch is kept), else keep it. Journals `worktree_removed` or
    `worktree_kept`, and returns {"path", "branch", "removed", "reason"}; None for a member
    without a worktree. Call it with no lock held."""
    if isinstance(member, str):
        member = roster.get(roster.load(ws, team), member)
    record: Any = member.get("worktree")
    if not record:
        return None
    name = str(member["name"])
    report: Json = {"path": record["path"], "branch": record["branch"], "removed": False,
                    "reason": None}
    if not Path(record["path"]).exists():
        git(repo_of(record), "worktree", "prune", check=False)
        report["reason"] = "already gone"
        return report
    reason = keep_reason(record)
    if reason is None:
        done = git(repo_of(record), "worktree", "remove", record["path"], check=False)
        if done.returncode == 0:
            report["removed"] = True
            events.emit(ws, team, "worktree_removed", member=name, path=record["path"],
                        branch=record["branch"])
            if record.get("delete_branch"):  # `merge --delete-branch` waited for this
                report["branch_deleted"] = branches.delete(repo_of(record),
                                                           record["branch"]) is None
            _drop_empty_parents(ws, team)
            return report
        reason = f"git worktree remove: {one_line(done.stderr)}"
    report["reason"] = reason
    events.emit(ws, team, "worktree_kept", member=name, path=record["path"],
                branch=record["branch"], reason=reason)
    log.warning("kept worktree %s (%s): %s", record["path"], record["branch"], reason)
    return report


def release_all(ws: Workspace, team: str, members: Sequence[Json]) -> list[Json]:
    """`release` for every member of a team being deleted; the reports of those kept."""
    kept = []
    for m in members:
        try:
            report = release(ws, team, m)
        except TeamdError as exc:  # one bad worktree must not stop the deletion: keep it
            record = m.get("worktree") or {}
            report = {"path": record.get("path"), "branch": record.get("branch"),
                      "removed": False, "reason": str(exc)}
            events.emit(ws, team, "worktree_kept", member=m["name"], path=report["path"],
                        branch=report["branch"], reason=report["reason"])
        if report is not None and not report["removed"] and report["reason"] != "already gone":
            kept.append(report)
    return kept


def _drop_empty_parents(ws: Workspace, team: str) -> None:
    for folder in (ws.worktrees_root / team, ws.worktrees_root):
        try:
            folder.rmdir()
        except OSError:
            return  # not empty (other members' worktrees) or already gone
