"""What a Messages API request says, read into the facts scenario rules test.

This module owns reading a request body: who is asking (the harness's identity line, in
the system prompt or at the head of a compacted conversation), the last user text, the
whole conversation as text, and which tools' results came back. It knows nothing about
rules (`teamd.scripted.scenario`) or HTTP (`teamd.scripted.server`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from teamd.scripted.claude_code import system_turns

# The harness writes this line into the system prompt and again at the head of a compacted
# conversation (CONTRACT section 6, "Context"), so it is the one reliable way to tell which
# agent process sent a request.
IDENTITY_RE = re.compile(
    r"You are (?:teammate '(?P<teammate>[^']+)'|the lead '(?P<lead>[^']+)')"
    r" in team '(?P<team>[^']+)'\."
)

def system_text(system: Any) -> str:
    """The system prompt as plain text (a string, or the text blocks of a list joined)."""
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "\n".join(
            b["text"] for b in system if isinstance(b, dict) and isinstance(b.get("text"), str)
        )
    return ""


def content_text(content: Any) -> str:
    """Text of a message's content: text blocks and tool_result contents, joined by newlines."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "tool_result":
            text = content_text(block.get("content"))
            if text:
                parts.append(text)
    return "\n".join(parts)


def _conversation_text(system: str, messages: list[Any]) -> str:
    parts = [system] if system else []
    for message in messages:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        text = content_text(content)
        if text:
            parts.append(text)
        # Tool inputs are part of what the model "said"; `any_contains` should see them.
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    parts.append(json.dumps(block.get("input"), ensure_ascii=False))
    return "\n".join(parts)


def _last_index(messages: list[Any], role: str, before: int | None = None) -> int | None:
    end = len(messages) if before is None else before
    for i in range(end - 1, -1, -1):
        message = messages[i]
        if isinstance(message, dict) and message.get("role") == role:
            return i
    return None


def _answered_tools(messages: list[Any], user_index: int | None) -> frozenset[str]:
    """Names of the tools whose results the last user message carries.

    A tool_result names only a tool_use id, so the name comes from the assistant turn
    before it; a result whose id no earlier tool_use carries is ignored.
    """
    if user_index is None:
        return frozenset()
    content = messages[user_index].get("content")
    if not isinstance(content, list):
        return frozenset()
    result_ids = {
        b.get("tool_use_id")
        for b in content
        if isinstance(b, dict) and b.get("type") == "tool_result"
    }
    if not result_ids:
        return frozenset()
    assistant_index = _last_index(messages, "assistant", before=user_index)
    if assistant_index is None:
        return frozenset()
    assistant_content = messages[assistant_index].get("content")
    if not isinstance(assistant_content, list):
        return frozenset()
    return frozenset(
        b["name"]
        for b in assistant_content
        if isinstance(b, dict)
        and b.get("type") == "tool_use"
        and b.get("id") in result_ids
        and isinstance(b.get("name"), str)
    )


@dataclass(frozen=True)
class Identity:
    """Who sent a request, from the harness's identity line."""

    name: str
    team: str
    kind: str  # "teammate" or "lead"


def parse_identity(system: Any, messages: Any = None) -> Identity | None:
    """Find the identity line in the system prompt, else at the head of the conversation."""
    texts = [system_text(system), system_turns(messages)]  # Claude Code's system turns too
    if isinstance(messages, list) and messages and isinstance(messages[0], dict):
        texts.append(content_text(messages[0].get("content")))
    for text in texts:
        found = IDENTITY_RE.search(text)
        if found:
            if found.group("lead") is not None:
                return Identity(found.group("lead"), found.group("team"), "lead")
            return Identity(found.group("teammate"), found.group("team"), "teammate")
    return None


@dataclass(frozen=True)
class RequestView:
    """The facts about one request that rules test."""

    body: dict[str, Any]
    system_text: str
    last_user_text: str
    conversation_text: str
    n_messages: int
    agent: str | None = None
    team: str | None = None
    kind: str | None = None
    # Tool names whose tool_result is in the last user message.
    tool_results: frozenset[str] = frozenset()
    # 1-based count of requests from this agent, including this one (set by the server,
    # which is the one that sees every request).
    n: int = 0

    @classmethod
    def from_body(cls, body: Mapping[str, Any], n: int = 0) -> RequestView:
        messages = body.get("messages")
        if not isinstance(messages, list):
            messages = []
        # a `system` turn inside `messages` (Claude Code's) is part of the system prompt
        system = "\n".join(t for t in (system_text(body.get("system")),
                                       system_turns(messages)) if t)
        user_index = _last_index(messages, "user")
        last_user = (
            content_text(messages[user_index].get("content")) if user_index is not None else ""
        )
        if user_index is not None and (late := system_turns(messages[user_index + 1:])):
            # Claude Code gives input written while it works as `system` turns after its
            # next tool result: part of the request's new input, as rules see it
            last_user = f"{last_user}\n{late}"
        identity = parse_identity(body.get("system"), messages)
        return cls(
            body=dict(body),
            system_text=system,
            last_user_text=last_user,
            conversation_text=_conversation_text(system, messages),
            n_messages=len(messages),
            agent=identity.name if identity else None,
            team=identity.team if identity else None,
            kind=identity.kind if identity else None,
            tool_results=_answered_tools(messages, user_index),
            n=n,
        )
