"""The team tools as the MCP server `teamd` a Claude Code member is given (CONTRACT §14,
"The team's tools"): `SendMessage`, `TaskCreate`, `TaskGet`, `TaskUpdate`, `TaskList`,
`SubmitPlan`, and the lead's `TeamCreate`, `TeamDelete` and `Task` — section 8's tools,
with their specs, checks, results and side effects: each call goes through the member's
own `Toolbox.run` (schema, handler, `tool_call` event), the same code the built-in loop
runs. Claude Code's own tools stand in for the file tools and `bash`, so those are not
served.

A call's writes and its `tool_call` line are one step (`Store.together`: on PostgreSQL one
transaction), as for the built-in loop; its result, though, is recorded by Claude Code in
its own transcript, a file on the member's host that no store transaction can include (a
`claude-code` member is pinned to that host: it never fails over). A Claude Code killed
after a team tool's step committed and before it recorded the result resumes with the call
cut short, which the member's note calls not re-run (`runtime.cut_turn`): it was done, once.

Claude Code starts it over stdio from `--mcp-config`:
`python -m teamd.agent.claude_code.mcp_server ROOT TEAM NAME MEMBER_PID`. It acts as the
member and writes under the member's pid (what only "the teammate itself" may write,
CONTRACT §4). It needs the optional `mcp` package (the `claude-code` extra).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

#: section 8's tools Claude Code's own tools stand in for
REPLACED = frozenset({"bash", "read_file", "write_file", "edit_file"})


def toolbox(root: str, team: str, name: str, pid: int) -> Any:
    """The member's toolbox, as its own process builds it."""
    from teamd import roster, settings
    from teamd.agent.tools import Toolbox
    from teamd.layout import Workspace

    ws = Workspace(Path(root))
    member = roster.get(roster.load(ws, team, only=name), name)
    conf = settings.load(ws)
    return Toolbox(ws, team, name, kind=member.get("kind", "teammate"),
                   cwd=Path(member["cwd"]), bash_timeout=conf.bash_timeout,
                   plan_mode_required=bool(member.get("plan_mode_required")),
                   joined_at=member.get("joined_at"), conf=conf, pid=pid)


def served(kind: str) -> list[dict[str, Any]]:
    """The specs of the tools served to a member of `kind`."""
    from teamd.agent.tool_specs import specs_for

    return [spec for spec in specs_for(kind) if spec["name"] not in REPLACED]


def serve(root: str, team: str, name: str, pid: int) -> None:
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    from teamd.store.errors import StoreUnreachable

    box = toolbox(root, team, name, pid)
    specs = served(box.kind)
    names = {spec["name"] for spec in specs}

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(
            name=s["name"], description=s["description"], input_schema=s["input_schema"])
            for s in specs])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams
                        ) -> types.CallToolResult:
        if params.name not in names:
            text, error = (f"unknown tool {params.name!r}; available: "
                           f"{', '.join(sorted(names))}"), True
        else:
            try:
                result = await anyio.to_thread.run_sync(
                    box.run, params.name, dict(params.arguments or {}))
                text, error = result.content, result.is_error
            except StoreUnreachable as exc:  # the step's commit: done whole, or not at all
                text, error = (f"{exc}; it may have been done or not: look (TaskList, "
                               "TaskGet) before calling it again"), True
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    is_error=error)

    server = Server("teamd", on_list_tools=list_tools, on_call_tool=call_tool)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit("usage: python -m teamd.agent.claude_code.mcp_server ROOT TEAM NAME PID")
    serve(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
