"""What Claude Code sends the scripted server beyond what teamd's own loop sends (CONTRACT
§14, "Tested for real"), and how the server reads it.

Claude Code (2.1.x, headless) calls `POST /v1/messages?beta=true`, streaming, with its
betas in the `anthropic-beta` header, adaptive `thinking` (`display: "updates"` or
`"summarized"`), `output_config.effort`, `context_management` edits, and — besides the
`system` parameter — turns of role `system` inside `messages` (its environment notes); an
interactive one also probes `HEAD /api/hello`. This module owns reading those: the betas
of a request, the text of its `system` turns (rules' `system_contains` and the identity
line see it as part of the system prompt; those after the last user turn — input written
while Claude Code worked — are also that request's new input for `contains` and `regex`),
and the 400s the API gives for a malformed
`output_config` or `context_management`. Its tools (`Bash`, `Read`, `Edit`, `Write`,
`mcp__teamd__SendMessage`, …) are scripted like any other: a `tool_use` block by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

BETA_HEADER = "anthropic-beta"
#: the endpoint an interactive Claude Code probes to see whether the API is reachable
HELLO = "/api/hello"
EFFORTS = frozenset({"low", "medium", "high", "xhigh", "max"})
ROLES = frozenset({"user", "assistant", "system"})


def betas(header: str | None) -> list[str]:
    """The betas a request asks for in its `anthropic-beta` header, in their order."""
    return [b.strip() for b in (header or "").split(",") if b.strip()]


def system_turns(messages: Any) -> str:
    """The text of the `system` turns inside `messages`, joined by newlines."""
    if not isinstance(messages, list):
        return ""
    parts: list[str] = []
    for message in messages:
        if not isinstance(message, Mapping) or message.get("role") != "system":
            continue
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(b["text"] for b in content
                         if isinstance(b, Mapping) and isinstance(b.get("text"), str))
    return "\n".join(parts)


def refusal(body: Mapping[str, Any]) -> str | None:
    """Why the API would refuse this request's Claude Code parts (one line), or None."""
    messages = body.get("messages")
    if isinstance(messages, list):
        for i, message in enumerate(messages):
            role = message.get("role") if isinstance(message, Mapping) else None
            if role not in ROLES:
                return (f"messages.{i}.role: must be one of {', '.join(sorted(ROLES))}, "
                        f"not {role!r}")
    config = body.get("output_config")
    if config is not None:
        if not isinstance(config, Mapping):
            return "output_config: must be an object"
        effort = config.get("effort")
        if effort is not None and effort not in EFFORTS:
            return (f"output_config.effort: must be one of {', '.join(sorted(EFFORTS))}, "
                    f"not {effort!r}")
    management = body.get("context_management")
    if management is not None:
        edits = management.get("edits") if isinstance(management, Mapping) else None
        if not isinstance(edits, list):
            return "context_management.edits: must be a list"
        for i, edit in enumerate(edits):
            if not isinstance(edit, Mapping) or not isinstance(edit.get("type"), str):
                return f"context_management.edits.{i}.type: Field required"
    return None
