"""The reply format of a scenario: what a rule's `reply` (and the scenario's `default`) may
hold — content blocks (`text`, `tool_use`, `thinking`, `redacted_thinking`), a stop reason of
today's API, usage figures to report, and `thinking` (False: no thinking block is added;
a string: the added block's text) — and the check that refuses anything else by name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from teamd import prices

STOP_REASONS = frozenset({"end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn",
                          "refusal", "model_context_window_exceeded"})
_REPLY_KEYS = frozenset({"content", "stop_reason", "usage", "thinking"})
BLOCK_TYPES = ("text", "tool_use", "thinking", "redacted_thinking")


def check_keys(data: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    # A typo such as "contians" would silently make a rule match everything; refuse it.
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ValueError(
            f"{where}: unknown key {unknown[0]!r} (expected one of {', '.join(sorted(allowed))})"
        )


def check_reply(data: Any, where: str) -> dict[str, Any]:
    """The reply, its content as a list of blocks; a ValueError names what is wrong."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: must be an object with a content list")
    check_keys(data, _REPLY_KEYS, where)
    content = data.get("content", [])
    if isinstance(content, str):
        # Shorthand: a bare string is one text block.
        content = [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise ValueError(f"{where}.content: must be a list of blocks")
    for i, block in enumerate(content):
        at = f"{where}.content[{i}]"
        if not isinstance(block, dict):
            raise ValueError(f"{at}: must be an object")
        kind = block.get("type")
        if kind == "text":
            if not isinstance(block.get("text"), str):
                raise ValueError(f"{at}.text: must be a string")
        elif kind == "tool_use":
            if not isinstance(block.get("name"), str):
                raise ValueError(f"{at}.name: must be a string")
            if not isinstance(block.get("input", {}), dict):
                raise ValueError(f"{at}.input: must be an object")
            if "id" in block and not isinstance(block["id"], str):
                raise ValueError(f"{at}.id: must be a string")
        elif kind == "thinking":
            if not isinstance(block.get("thinking", ""), str):
                raise ValueError(f"{at}.thinking: must be a string")
        elif kind != "redacted_thinking":
            raise ValueError(f"{at}.type: must be one of {', '.join(BLOCK_TYPES)}, not {kind!r}")
    if not isinstance(data.get("thinking", True), bool | str) or data.get("thinking") is True:
        raise ValueError(f"{where}.thinking: must be false or the thinking's text")
    stop_reason = data.get("stop_reason")
    if stop_reason is not None and stop_reason not in STOP_REASONS:
        raise ValueError(f"{where}.stop_reason: must be one of {', '.join(sorted(STOP_REASONS))}")
    usage = data.get("usage")
    if usage is not None:
        if not isinstance(usage, dict):
            raise ValueError(f"{where}.usage: must be an object")
        check_keys(usage, frozenset(prices.TOKEN_KEYS), f"{where}.usage")
        for key, value in usage.items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{where}.usage.{key}: must be an integer >= 0")
    result = dict(data)
    result["content"] = content
    return result
