"""Running git, and the facts about a repository the rest of teamd asks of it.

This module owns the one place a git command line is made (`git`: no repository hook ever
runs, no variable points git at another repository, no API key reaches it, a timeout, and
git's message as a `GitError`), whether a branch exists, and a member's worktree record and
the repository it belongs to. What teamd does with worktrees is `teamd.worktrees`'s, what
"merged" means `teamd.branches`'.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from teamd import hostname, roster
from teamd.errors import BadInput, TeamdError
from teamd.files import Json
from teamd.pgroup import child_env

#: variables that would point git at another repository than the `-C` one
_REDIRECTS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR",
              "GIT_OBJECT_DIRECTORY", "GIT_PREFIX", "GIT_NAMESPACE")
#: before every git command's own arguments: no repository hook ever runs, whoever set
#: `core.hooksPath` (a model's `bash` could have, in the shared `.git`: CONTRACT §11, §13);
#: nor any other command a planted config names for the commands the product runs:
#: `core.fsmonitor` runs at every `status`; `diff.external` and a textconv driver at a
#: `diff`, `log` or `show`, which therefore get `NO_EXTERNAL_DIFF`
NO_HOOKS = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")
NO_EXTERNAL_DIFF = ("--no-ext-diff", "--no-textconv")
_DIFFING = frozenset({"diff", "log", "show"})
GIT_TIMEOUT = 120.0


class GitError(TeamdError):
    """A git command failed: exit 1 with git's own message on one line."""


def git_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """A tool's environment (no API key: `child_env`) less any GIT_DIR-like redirection."""
    env = {k: v for k, v in child_env().items() if k not in _REDIRECTS}
    env["GIT_TERMINAL_PROMPT"] = "0"  # never wait on a password prompt nobody sees
    env.update(extra or {})
    return env


def one_line(text: str) -> str:
    return " ".join(text.split()) or "failed"


def git(repo: Path | str, *args: str, check: bool = True, quiet_locks: bool = False,
        env: dict[str, str] | None = None, stdin: str | None = None
        ) -> subprocess.CompletedProcess[str]:
    """Run `git -C repo -c core.hooksPath=/dev/null ARGS` (the one place a git command
    line is made); GitError with git's message when `check` and it fails."""
    extra = dict(env or {})
    if quiet_locks:
        extra["GIT_OPTIONAL_LOCKS"] = "0"  # a read (status) must not take index.lock
    if args and args[0] in _DIFFING:
        args = (args[0], *NO_EXTERNAL_DIFF, *args[1:])
    argv = ["git", "-C", str(repo), *NO_HOOKS, *args]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, env=git_env(extra),
                              input=stdin, timeout=GIT_TIMEOUT,
                              stdin=None if stdin is not None else subprocess.DEVNULL)
    except FileNotFoundError:
        raise GitError("git is not installed (no `git` on PATH)") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} did not finish within {GIT_TIMEOUT:g} s") from None
    if check and done.returncode != 0:
        raise GitError(f"git {args[0]}: {one_line(done.stderr or done.stdout)}")
    return done


def branch_exists(repo: Path, branch: str) -> bool:
    return git(repo, "show-ref", "--verify", "--quiet", f"refs/heads/{branch}",
               check=False).returncode == 0


def repo_of(record: Json) -> Path:
    """The repository a member's worktree belongs to."""
    if record.get("repo"):
        return Path(record["repo"])
    # a record without `repo` (written by hand): ask the worktree itself
    done = git(record["path"], "worktree", "list", "--porcelain")
    first = done.stdout.splitlines()[0]
    return Path(first.removeprefix("worktree "))


def worktree_of(config: Json, name: str) -> Json:
    """A member's worktree record; BadInput if the member has none, or has it on another
    host."""
    member = roster.get(config, name)
    record = member.get("worktree")
    if not record:
        raise BadInput(f"{name!r} has no worktree (spawn it with --worktree)")
    pin = member.get("pinned_host")
    if pin and pin != hostname.here():  # CONTRACT §15: its worktree is that host's files
        raise BadInput(f"{name!r} works in a worktree on host {pin}: run this there")
    return dict(record)
