"""`teamctl demo` offline works in a git repository with worktrees and ends with the
branches, each task's commit, and the merges (issue 13): the real CLI, a real `teamd run`,
the built-in scripted model, the real git."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from teamd import board, gitcmd
from teamd.layout import Workspace
from tests.gitrepo import branches, git, status
from tests.harness import paste_back
from tests.helpers_proc import clean_env

TEAM = "rest-to-graphql"
MEMBERS = ("analyst", "backend", "frontend")


def test_demo_commits_each_task_on_its_branch_and_merges(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("teamctl")
    env = clean_env()  # no key, and no TEAMD_ROOT: a new ./teamd-demo
    done = subprocess.run([str(exe), "demo", "--timeout", "120"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    out = done.stdout
    found = re.search(r"^Workspace: (.+)$", out, re.M)
    assert found is not None, out
    ws = Workspace.at(found.group(1))
    repo = ws.root / "app"
    assert branches(repo) == [f"teamd/{TEAM}/{n}" for n in MEMBERS]
    tasks = board.list_tasks(ws, TEAM)
    assert len(tasks) == 4
    for task in tasks:
        assert task["status"] == "completed" and len(task["commits"]) == 1
        commit = task["commits"][0]
        assert f"task #{task['id']} ({task['owner']}): {commit[:10]}" in out
        assert git(repo, "log", "-1", "--format=%s", commit).strip() == \
            f"Task #{task['id']}: {task['subject']}"
        # merged: the commit is on main, and so is the file it made
        assert gitcmd.git(repo, "merge-base", "--is-ancestor", commit, "main",
                             check=False).returncode == 0
        assert (repo / "notes" / f"task-{task['id']}.md").is_file()
    # who claimed which task is the supervisor's choice: each one that worked is merged
    workers = {t["owner"] for t in tasks}
    for name in MEMBERS:
        merged = f"merged teamd/{TEAM}/{name} into main" in out
        assert merged == (name in workers), name
    assert git(repo, "rev-list", "--merges", "--count", "main").strip() == str(len(workers))
    assert status(repo) == ""
    # what it printed works when pasted, from where it was run: the default root is shown
    # as ./teamd-demo, relative to the current directory
    assert "Everything the team did is in plain files under teamd-demo:" in out
    ran = paste_back(out, tmp_path, env)
    assert any(c.startswith("git -C teamd-demo/app log") for c in ran), ran
    assert any(".worktrees" in line for line in out.splitlines()[-14:])
