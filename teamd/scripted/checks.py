"""What today's Messages API refuses with 400 `invalid_request_error`, for the scripted
server: sampling parameters (`temperature`, `top_p`, `top_k`) sent to a 5.x model, a forced
`tool_choice` (`any` or `tool`) sent to a 5.5 model, a thinking block that is not as this
server made it (its signature does not verify), and a tool loop in progress whose thinking
was dropped or altered: each assistant turn of the turn in progress that carries a tool call
must carry, unchanged, the thinking blocks the server sent with that call. The turn in
progress begins after the last user turn that carries no tool result."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from teamd.model_limits import version
from teamd.scripted.thinking import THINKING_TYPES, Ledger, verify

SAMPLING = ("temperature", "top_p", "top_k")
FORCED_CHOICES = frozenset({"any", "tool"})


def refusal(body: Mapping[str, Any], ledger: Ledger) -> str | None:
    """Why the API would refuse this request (one line, as its error message), or None."""
    model = body.get("model")
    release = version(str(model)) or (0, 0)
    if release >= (5, 0):
        for key in SAMPLING:
            if key in body:
                return f"{key}: is not supported by {model}; remove it"
    choice = body.get("tool_choice")
    if release >= (5, 5) and isinstance(choice, Mapping) and choice.get("type") in FORCED_CHOICES:
        return (f"tool_choice: forcing tool use (type {choice.get('type')!r}) is not "
                f"supported by {model}; use 'auto' or 'none'")
    messages = body.get("messages")
    return _thinking(messages, ledger) if isinstance(messages, list) else None


def _bare(block: Any) -> Any:
    """A block as compared: without the `cache_control` a client may add to any block."""
    if isinstance(block, Mapping):
        return {k: v for k, v in block.items() if k != "cache_control"}
    return block


def _turn_start(messages: list[Any]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if not isinstance(message, Mapping) or message.get("role") != "user":
            continue
        content = message.get("content")
        if not isinstance(content, list) or not any(
                isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content):
            return i + 1
    return 0


def _thinking(messages: list[Any], ledger: Ledger) -> str | None:
    start = _turn_start(messages)
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            continue
        content = message.get("content")
        if not isinstance(content, list):
            continue
        blocks = [_bare(b) for b in content]
        for j, block in enumerate(blocks):
            if not isinstance(block, Mapping):
                continue
            if block.get("type") in THINKING_TYPES and not verify(block):
                return (f"messages.{i}.content.{j}: invalid `signature` in "
                        f"`{block.get('type')}` block: thinking must be sent back unchanged")
            if i < start or block.get("type") != "tool_use":
                continue
            sent = ledger.thinking_of(str(block.get("id")))
            if sent and not _contains(blocks[:j], sent):
                return (f"messages.{i}.content: the thinking that came with tool call "
                        f"{block.get('id')} ({block.get('name')}) was dropped or altered; "
                        "in a tool loop every assistant turn must send its thinking blocks "
                        "back unchanged")
    return None


def _contains(blocks: list[Any], run: list[dict[str, Any]]) -> bool:
    """`run` appears in `blocks` as consecutive, identical blocks."""
    n = len(run)
    return any(blocks[at:at + n] == run for at in range(len(blocks) - n + 1))
