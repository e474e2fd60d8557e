"""What the model sees: identity, system prompt, trimmed history, caching breakpoints,
and the compaction that replaces a long history with the model's own summary.

Stable prefixes (system prompt, tool definitions) carry `cache_control` breakpoints, and so
does the conversation tail, so each call re-reads the previous call's prefix from cache;
their TTLs are the member's `cache_ttl` (`teamd.agent.cache_ttl`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from teamd import prices, runtimes
from teamd.files import Json
from teamd.model_limits import adaptive_thinking

KEEP_TOOL_RESULTS = 3  # the most recent tool-result turns are shown in full
TRIM_OVER = 400  # older results longer than this many characters are cut down
SUMMARY_REQUEST = (
    "Your context is nearly full. Write a summary of this whole conversation that lets you "
    "carry on without it: your task and who gave it, decisions made, files changed, tasks "
    "claimed or completed (with ids), messages still to answer, and your next steps. "
    "Reply with the summary only; do not call any tool."
)


def identity(name: str, team: str, kind: str) -> str:
    if kind == "lead":
        return f"You are the lead '{name}' in team '{team}'."
    return f"You are teammate '{name}' in team '{team}'."


def system_prompt(member: Mapping[str, Any], team: str, cwd: str) -> str:
    """The member's system prompt. Identity first: the scripted server and compaction
    both rely on that line."""
    name, kind = member["name"], member.get("kind", "teammate")
    lines = [identity(name, team, kind)]
    if member.get("role"):
        lines.append(f"Your role: {member['role']}.")
    if runtimes.of(member) == runtimes.CLAUDE_CODE:  # its own tools reach past the cwd
        lines.append(
            f"Your working directory is {cwd}. Every tool call of yours passes the team's "
            "rules first; your writing tools (Write, Edit, MultiEdit, NotebookEdit) may not "
            "touch teamd's own files (teamd.toml, .teams/, .tasks/) or another member's "
            "worktree.")
    else:
        lines.append(
            f"Your working directory is {cwd}; file tools and bash are confined to it.")
    lines.append(
        "Messages from your team arrive as <teammate-message sender=… type=…> blocks. "
        "Reply with the SendMessage tool; plain text in your reply is seen by nobody.")
    if kind == "lead":
        lines.append(
            "You lead the team: create teammates with the Task tool, give out work on the "
            "task board (TaskCreate, TaskUpdate), answer plan_approval_request messages "
            "with SendMessage type plan_approval_response (request_id, approve, feedback), "
            "and shut teammates down with SendMessage type shutdown_request when done. "
            "The person running the team writes to you as `user`; answer them, and tell "
            "them when the work is done, with SendMessage to recipient `user`.")
        lines.append(
            "A permission_request message is a teammate's tool call (the tool and its "
            "argument, the rule that asks, the request_id) waiting for your go: answer it "
            "with SendMessage type permission_response, that request_id, approve true or "
            "false, and feedback saying why when refusing. The teammate waits until then.")
    else:
        lines.append(
            "Work from the shared task board: TaskList to see it, TaskUpdate to mark your "
            "task completed when it is done. When you end your turn without a tool call you "
            "go idle, the lead is told, and you are woken by a new message or a claimable "
            "task (given to you as <auto-claimed>).")
        lines.append(
            "A shutdown_request must be answered with SendMessage type shutdown_response, "
            "its request_id, and approve true (then stop) or false with a reason.")
        lines.append(
            "The team's rules may deny a tool call (`denied by rule`: do not retry it, find "
            "another way) or make it wait for the lead's permission (`permission refused` "
            "carries the lead's feedback).")
        if member.get("plan_mode_required"):
            lines.append(
                "You are in plan mode: bash, write_file and edit_file are refused until the "
                "lead approves a plan you submit with SubmitPlan. Explore read-only, then "
                "submit; if rejected, revise using the feedback and submit again.")
    return "\n\n".join(lines)


def micro_compact(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Trim old tool results (all but the last KEEP_TOOL_RESULTS turns that carry any)."""
    result_turns = [i for i, m in enumerate(messages) if m["role"] == "user"
                    and any(b.get("type") == "tool_result" for b in m["content"])]
    old = set(result_turns[:-KEEP_TOOL_RESULTS]) if KEEP_TOOL_RESULTS else set(result_turns)
    if not old:
        return messages
    out = []
    for i, m in enumerate(messages):
        if i not in old:
            out.append(m)
            continue
        blocks = []
        for b in m["content"]:
            text = b.get("content")
            if b.get("type") == "tool_result" and isinstance(text, str) and \
                    len(text) > TRIM_OVER:
                b = {**b, "content": f"{text[:200]}\n[… older tool output trimmed: "
                     f"{len(text)} characters …]"}
            blocks.append(b)
        out.append({"role": m["role"], "content": blocks})
    return out


#: readable thinking, asked for on every call, the summary call included (CONTRACT §6)
THINKING: Json = {"type": "adaptive", "display": "summarized"}


def model_options(model: str, effort: str) -> dict[str, Any]:
    """What every call asks besides the conversation: readable thinking (from the models
    that take adaptive thinking: 4.6 on), and the member's `effort` when set. Never
    `temperature`, `top_p`, `top_k` or a forced `tool_choice`: today's models refuse them."""
    options: dict[str, Any] = {"thinking": THINKING} if adaptive_thinking(model) else {}
    if effort:
        options["output_config"] = {"effort": effort}
    return options


def thinking_text(content: list[Json], width: int = 1000) -> str | None:
    """A reply's readable thinking, joined and cut to `width` characters (what the journal's
    `model_call` carries for `teamctl logs -v`), or None when it shows none."""
    text = "\n".join(str(b.get("thinking") or "") for b in content
                     if b.get("type") == "thinking").strip()
    return None if not text else text if len(text) <= width else text[:width - 1] + "…"


def cache_control(ttl: str) -> Json:
    """A breakpoint: the API's default TTL (5 minutes) says none; "1h" says it."""
    return {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}


def with_cache_breakpoints(system: str, tools: list[Json], messages: list[dict[str, Any]],
                           prefix_ttl: str = "5m", tail_ttl: str = "5m"
                           ) -> tuple[list[Json], list[Json], list[dict[str, Any]]]:
    """System, tools and messages with cache_control on the stable prefix (`prefix_ttl`)
    and the tail (`tail_ttl`; the API wants a 1-hour breakpoint before any 5-minute one)."""
    sys_blocks = [{"type": "text", "text": system, "cache_control": cache_control(prefix_ttl)}]
    tools = [dict(t) for t in tools]
    if tools:
        tools[-1]["cache_control"] = cache_control(prefix_ttl)
    # Only the tail block changes: copy that one and share the rest (the SDK copies the
    # whole request again anyway; a deep copy here cost a millisecond per call on a long
    # conversation, on the path from a new message to the model).
    messages = list(messages)
    # the tail of the user's turn; a paused reply sent back as the last message (its
    # thinking may not carry cache_control) goes as it is
    if messages and messages[-1]["role"] == "user" and messages[-1]["content"] and \
            isinstance(messages[-1]["content"][-1], dict):
        last = messages[-1]
        tail = {**last["content"][-1], "cache_control": cache_control(tail_ttl)}
        messages[-1] = {**last, "content": [*last["content"][:-1], tail]}
    return sys_blocks, tools, messages


def context_size(usage: Json) -> int:
    """The real size of the context: uncached + cache-read + cache-write input tokens."""
    return prices.input_tokens(usage)
