"""What the scripted server puts on the wire: the Message object and its SSE events.

This module owns the bytes' shapes, in the forms the `anthropic` SDK parses: a reply's
Message object (fresh ids, content made by `teamd.scripted.thinking`, usage estimated and
split into cache reads and writes by `teamd.scripted.cache`), the server-sent events that
stream it, the API's error body, and whether a body is a Messages API request at all.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

from teamd.scripted import thinking
from teamd.scripted.cache import PromptCache
from teamd.scripted.cache import split as cache_split
from teamd.scripted.scenario import Decision

# Deltas are cut this small so a client really has to accumulate text and tool JSON.
_DELTA_CHARS = 16


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


def _estimate_tokens(value: Any) -> int:
    # Four characters per token is the usual rule of thumb; exact counts do not matter,
    # only that bigger conversations look bigger (compaction thresholds key off it).
    return len(json.dumps(value, ensure_ascii=False)) // 4


def input_tokens(body: Mapping[str, Any]) -> int:
    return _estimate_tokens(
        {"system": body.get("system"), "messages": body.get("messages"), "tools": body.get("tools")}
    )


def error_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def validate(body: Any) -> str | None:
    """Why the request body is not a Messages API request, or None if it looks fine."""
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    if not isinstance(body.get("model"), str) or not body.get("model"):
        return "model: Field required"
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
        return "max_tokens: Field required"
    if max_tokens < 1:
        return "max_tokens: must be at least 1"
    if not isinstance(body.get("messages"), list):
        return "messages: Field required"
    return None


def build_message(body: Mapping[str, Any], decision: Decision,
                  cache: PromptCache | None = None) -> dict[str, Any]:
    """The Message object for a reply decision, with fresh ids and estimated usage; with a
    `cache`, the input splits into cache reads, cache writes and the rest as the API's
    prompt caching would report it for the request's `cache_control` breakpoints."""
    content = thinking.reply_content(decision.content, body, decision.thinking)
    stop_reason = decision.stop_reason or (
        "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
    )
    total = input_tokens(body)
    usage = cache.usage(body, total) if cache is not None else cache_split(total)
    usage["output_tokens"] = max(1, _estimate_tokens(content))
    usage.update(decision.usage)
    return {
        "id": new_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": body.get("model"),
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }


def stream_events(message: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events (name, data) that stream `message`, in the API's order."""
    usage = message["usage"]
    start = dict(message)
    start["content"] = []
    start["stop_reason"] = None
    start["usage"] = {**usage, "output_tokens": 1}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(message["content"]):
        opening, deltas = thinking.streamed(block)
        events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                               "content_block": opening}))
        events.extend(("content_block_delta", {"type": "content_block_delta", "index": index,
                                               "delta": piece})
                      for delta in deltas for piece in thinking.pieces(delta, _DELTA_CHARS))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                # Totals, not increments: the SDK overwrites its snapshot with these.
                "usage": dict(usage),
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events
