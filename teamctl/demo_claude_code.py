"""`teamctl demo --runtime claude-code`: the demo's team with Claude Code teammates
(CONTRACT §14), offline against the scripted model server.

The same story as `teamctl.demo` — four chained tasks worked by analyst, backend and
frontend, each in its own worktree — but each teammate runs the Claude Code CLI
(`claude_code` in teamd.toml, or TEAMD_CLAUDE_CODE), checked before anything is made: the
demo exits 2 with `spawn`'s one line when it cannot run. Offline, the scripted model
drives Claude Code's own tools and the team's: for each task it writes notes with `Bash`,
reads them with `Read`, marks them done with `Edit`, then completes the task and tells the
lead with `mcp__teamd__TaskUpdate` and `mcp__teamd__SendMessage`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from teamd import runtimes, settings
from teamd.layout import Workspace

DONE = "Done for now; waiting for work."


def check(root: Path) -> None:
    """Before the demo makes anything: Claude Code can run here (BadInput, one line)."""
    runtimes.check_spawn(runtimes.CLAUDE_CODE, settings.load(Workspace.at(root)))


def scenario(ws: Workspace, team: str) -> dict[str, Any]:
    """What the scripted model has Claude Code do with each auto-claimed task."""
    notes = f"{ws.worktrees_root}/{team}/{{agent}}/notes/task-{{tid}}.md"
    lines = ["# {subject}", "", "Notes on task #{tid} by {agent}.", "Status: in progress"]
    write = ("mkdir -p notes && printf '%s\\n' " + " ".join(f"'{line}'" for line in lines)
             + " > notes/task-{tid}.md && echo wrote notes/task-{tid}.md")
    edited = r"(?:task-|task #)(?P<tid>\d+)"
    finish = [tool("mcp__teamd__TaskUpdate", task_id="{int:tid}", status="completed"),
              tool("mcp__teamd__SendMessage", recipient="lead",
                   content="Task #{tid} is done: notes/task-{tid}.md", summary="#{tid} done")]
    return {"rules": [
        {"name": "work", "regex": r"<auto-claimed>Task #(?P<tid>\d+): (?P<subject>[^\n<]+)",
         "reply": {"content": [{"type": "text", "text": "Taking task #{tid}: {subject}."},
                               tool("Bash", command=write, description="write the notes")]}},
        {"name": "read", "tool_result": "Bash", "regex": r"wrote notes/task-(?P<tid>\d+)\.md",
         "reply": {"content": [tool("Read", file_path=notes)]}},
        {"name": "edit", "tool_result": "Read", "regex": r"Notes on task #(?P<tid>\d+)",
         "reply": {"content": [tool("Edit", file_path=notes, old_string="Status: in progress",
                                    new_string="Status: done")]}},
        {"name": "schema-ready", "agent": "backend", "tool_result": "Edit", "regex": edited,
         "reply": {"content": [*finish, tool(
             "mcp__teamd__SendMessage", recipient="frontend",
             content="Backend #{tid} is done; see notes/task-{tid}.md")]}},
        {"name": "finish", "tool_result": "Edit", "regex": edited,
         "reply": {"content": finish}},
    ], "default": {"content": [{"type": "text", "text": DONE}]}}


def tool(name: str, **given: Any) -> dict[str, Any]:
    return {"type": "tool_use", "name": name, "input": given}
