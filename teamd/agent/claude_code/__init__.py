"""The Claude Code runtime (CONTRACT §14): a member whose agent is the Claude Code CLI,
headless, driven over stream-json.

- `runtime`: `ClaudeCodeRuntime`, the second runtime behind `teamd.agent.runtime.Runtime`;
- `process`: the CLI's process (its command, environment and state folder), its events;
- `transcript`: what Claude Code's own transcript says it took in (exactly-once delivery
  across a crash of either process);
- `mcp_server`: the team tools of section 8 as the MCP server `teamd`, acting as the member;
- `pretool`: the PreToolUse hook that puts Claude Code's own tools through section 11.

`claude_dir` is the one place that says where a member's Claude Code state lives.
"""

from __future__ import annotations

from pathlib import Path

from teamd.layout import Workspace


def claude_dir(ws: Workspace, team: str, name: str) -> Path:
    """A member's Claude Code state (its HOME: settings, transcripts), archived with the
    team: `.teams/{team}/claude/{name}/`, never the user's `~/.claude`."""
    return ws.team_dir(team) / "claude" / name
