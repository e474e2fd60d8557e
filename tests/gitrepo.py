"""Real git repositories for tests: `git init`, a first commit, and a `git` that answers."""

from __future__ import annotations

import subprocess
from pathlib import Path

from teamd import gitcmd


def git(repo: Path | str, *args: str, check: bool = True) -> str:
    """Run the real git in `repo` (with the product's environment) and return stdout."""
    done = gitcmd.git(repo, *args, check=check)
    return done.stdout


def make_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    """A fresh repository on branch main with one commit holding `files` (and a README).
    A person's identity is set in the repository, as `teamctl merge` needs one."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    for key, value in (("user.name", "Pat Person"), ("user.email", "pat@example.com"),
                       ("commit.gpgsign", "false")):
        git(path, "config", key, value)
    for name, text in {"README.md": "# app\n", **(files or {})}.items():
        (path / name).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "first commit")
    return path


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def branches(repo: Path, pattern: str = "teamd/*") -> list[str]:
    return git(repo, "branch", "--list", "--format=%(refname:short)", pattern).split()


def commits(repo: Path, since: str, branch: str) -> list[dict[str, str]]:
    """Commits in since..branch, oldest first: id, author, committer, subject, files."""
    out = git(repo, "log", "--reverse", "--format=%H%x1f%an <%ae>%x1f%cn <%ce>%x1f%s",
              f"{since}..{branch}")
    found = []
    for line in out.splitlines():
        cid, author, committer, subject = line.split("\x1f")
        names = git(repo, "show", "--name-only", "--format=", cid).split()
        found.append({"id": cid, "author": author, "committer": committer,
                      "subject": subject, "files": " ".join(names)})
    return found


def status(repo: Path) -> str:
    return git(repo, "status", "--porcelain", "--untracked-files=all")


def merging(repo: Path) -> bool:
    """Is a merge in progress (MERGE_HEAD present)?"""
    return git(repo, "rev-parse", "-q", "--verify", "MERGE_HEAD", check=False).strip() != ""
