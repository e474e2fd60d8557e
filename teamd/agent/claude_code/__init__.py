"""The Claude Code runtime (CONTRACT §14): a member whose agent is the Claude Code CLI,
headless, driven over stream-json.

- `runtime`: `ClaudeCodeRuntime`, the second runtime behind `teamd.agent.runtime.Runtime`;
- `process`: the CLI's process (its command, environment and state folder), its events;
- `transcript`: what Claude Code's own transcript says it took in (exactly-once delivery
  across a crash of either process);
- `mcp_server`: the team tools of section 8 as the MCP server `teamd`, acting as the member;
- `pretool`: the PreToolUse hook that puts Claude Code's own tools through section 11;
- `plan`: Claude Code's plan mode bound to the plan protocol (`ExitPlanMode`, `SubmitPlan`).
"""
