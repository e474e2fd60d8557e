"""A Claude Code teammate in its own git worktree (CONTRACT §13, §14), with the real CLI:
spawned with a worktree, it works in it with Claude Code's own `Bash`, completes its task
through the team tools (`mcp__teamd__TaskUpdate`), and the harness commits that work on its
branch — one commit, under the member's name, the repository's own checkout untouched."""

from __future__ import annotations

from pathlib import Path

from teamd import actions, board
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.claude_code_team import CC, SLOW, mcp
from tests.gitrepo import commits, status
from tests.harness import TEAM, member, running_teamd, tool_use, wait_status, wait_until


def test_a_claude_code_teammate_commits_its_task_in_its_worktree(
        ws: Workspace, repo: Path, server: ScriptedServer, claude: Path) -> None:
    for rule in (
        {"agent": CC, "contains": "<auto-claimed>Task #1: write the result",
         "reply": {"content": [tool_use("Bash", command="echo result by cc > result.txt",
                                        description="write it")]}},
        {"agent": CC, "tool_result": "Bash", "reply": mcp(
            "TaskUpdate", task_id=1, status="completed")},
        {"name": "done", "agent": CC, "tool_result": "mcp__teamd__TaskUpdate",
         "reply": {"content": "committed"}},
    ):
        server.add_rule(rule)
    (ws.root / "teamd.toml").write_text(f'claude_code = "{claude}"\n')
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, CC, "Do the tasks you are given.", cwd=str(repo),
                  runtime="claude-code", worktree=True)
    record = member(ws, TEAM, CC)["worktree"]
    assert record["branch"] == f"teamd/{TEAM}/{CC}"
    with running_teamd(ws, server.url):
        wait_status(ws, CC, "idle", SLOW)
        board.create(ws, TEAM, "write the result", owner=CC)
        wait_until(lambda: board.get(ws, TEAM, 1)["status"] == "completed", SLOW,
                   "task 1 completed by cc")
        server.wait_for(lambda r: r["rule"] == "done", SLOW)
    made = commits(repo, record["base"], record["branch"])
    assert [(c["subject"], c["author"], c["files"]) for c in made] == [
        ("Task #1: write the result", f"{CC}@{TEAM} <{CC}@{TEAM}.teamd>", "result.txt")]
    assert board.get(ws, TEAM, 1)["commits"] == [made[0]["id"]]
    assert (Path(record["path"]) / "result.txt").read_text() == "result by cc\n"
    # the work is in its worktree's commit: the repository's checkout is as it was
    assert not (repo / "result.txt").exists() and status(repo) == ""
    assert status(Path(record["path"])) == ""  # nothing left uncommitted
