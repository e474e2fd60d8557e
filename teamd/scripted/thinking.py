"""Thinking as today's models return it, for the scripted server.

This module owns the reply's content blocks as the API returns them: `thinking` blocks
(readable text only when the request asks for it with adaptive thinking's `display:
"summarized"`, empty otherwise, and always signed) and `redacted_thinking` blocks (opaque
`data`), put before the text and tool calls; a thinking block is added to every reply unless
the request turns thinking off or the scenario's reply says `"thinking": false` (a string
there is the thinking's text). A signature is an HMAC over the text shown, so the server can
tell a block sent back unchanged from one altered; the `Ledger` remembers which thinking
came with which tool call, so it can tell one dropped (`teamd.scripted.checks`). It also
says how each kind of block streams (its opening and its deltas).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import threading
import uuid
from collections.abc import Mapping
from typing import Any

Block = dict[str, Any]
THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})
# A fixed key: a signature must still verify when the server is started again (a test
# that restarts it, a demo run twice); what it proves is "unchanged", not "secret".
_KEY = b"teamd-scripted-thinking"
_NONCE = 16


def _mac(data: bytes) -> bytes:
    return hmac.new(_KEY, data, hashlib.sha256).digest()


def sign(text: str) -> str:
    """The signature of a thinking block whose text is `text`."""
    return base64.b64encode(_mac(text.encode("utf-8"))).decode("ascii")


def redacted_data() -> str:
    """Fresh opaque `data` for a redacted_thinking block, checkable by `verify`."""
    nonce = os.urandom(_NONCE)
    return base64.b64encode(nonce + _mac(nonce)).decode("ascii")


def verify(block: Mapping[str, Any]) -> bool:
    """A thinking or redacted_thinking block exactly as this server made it."""
    if block.get("type") == "thinking":
        text, signature = block.get("thinking"), block.get("signature")
        return isinstance(text, str) and isinstance(signature, str) and \
            hmac.compare_digest(signature, sign(text))
    data = block.get("data")
    try:
        raw = base64.b64decode(str(data), validate=True)
    except ValueError:
        return False
    return len(raw) > _NONCE and hmac.compare_digest(raw[_NONCE:], _mac(raw[:_NONCE]))


def readable(body: Mapping[str, Any]) -> bool:
    """The request asks for readable thinking (`display: "summarized"`)."""
    config = body.get("thinking")
    return isinstance(config, Mapping) and config.get("display") == "summarized"


def enabled(body: Mapping[str, Any]) -> bool:
    """Thinking is on unless the request turns it off, as for today's default model."""
    config = body.get("thinking")
    return not (isinstance(config, Mapping) and config.get("type") == "disabled")


def _default_text(content: list[Block]) -> str:
    tools = [str(b.get("name")) for b in content if b.get("type") == "tool_use"]
    if tools:
        return f"The next step needs {', '.join(tools)}; I call it now."
    return "Nothing to call: I answer in words."


def reply_content(content: list[Block], body: Mapping[str, Any], thinking: Any) -> list[Block]:
    """The content blocks of a reply, as the API returns them: fresh tool_use ids, thinking
    signed (its text shown only when asked for), and a thinking block first unless there
    is one already, the request turned thinking off, or `thinking` (the reply's own key)
    is False; a string `thinking` is that block's text."""
    out: list[Block] = []
    shown = readable(body)
    for block in content:
        kind = block["type"]
        if kind == "tool_use":
            out.append({"type": "tool_use", "id": block.get("id") or _new_id("toolu"),
                        "name": block["name"], "input": block.get("input", {})})
        elif kind == "thinking":
            out.append(_thinking(block.get("thinking", ""), shown))
        elif kind == "redacted_thinking":
            out.append({"type": "redacted_thinking", "data": redacted_data()})
        else:
            out.append({"type": "text", "text": block["text"]})
    if thinking is not False and enabled(body) and not any(
            b["type"] in THINKING_TYPES for b in out):
        text = thinking if isinstance(thinking, str) else _default_text(out)
        out.insert(0, _thinking(text, shown))
    return out


def _thinking(text: str, shown: bool) -> Block:
    text = text if shown else ""
    return {"type": "thinking", "thinking": text, "signature": sign(text)}


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


def streamed(block: Block) -> tuple[Block, list[Block]]:
    """How a block streams: its `content_block_start` block and its deltas, whole (the
    caller cuts them with `pieces`)."""
    kind = block["type"]
    if kind == "tool_use":
        opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        return opening, [{"type": "input_json_delta",
                          "partial_json": json.dumps(block["input"], ensure_ascii=False)}]
    if kind == "thinking":
        return {"type": "thinking", "thinking": "", "signature": ""}, [
            {"type": "thinking_delta", "thinking": block["thinking"]},
            {"type": "signature_delta", "signature": block["signature"]}]
    if kind == "redacted_thinking":
        return dict(block), []
    return {"type": "text", "text": ""}, [{"type": "text_delta", "text": block["text"]}]


_SPLIT = {"input_json_delta": "partial_json", "thinking_delta": "thinking",
          "text_delta": "text"}


def pieces(delta: Block, size: int) -> list[Block]:
    """A delta cut into pieces of `size` characters (a signature goes whole, as the API
    sends it), so a client has to accumulate them; an empty text sends no delta."""
    key = _SPLIT.get(str(delta["type"]))
    if key is None:
        return [delta]
    text = str(delta[key])
    return [{"type": delta["type"], key: text[at:at + size]} for at in range(0, len(text), size)]


class Ledger:
    """Which thinking blocks came with which tool call (thread-safe): a tool loop must send
    them back, unchanged, with the call (`teamd.scripted.checks`)."""

    def __init__(self) -> None:
        self._by_call: dict[str, list[Block]] = {}
        self._lock = threading.Lock()

    def remember(self, content: list[Block]) -> None:
        thoughts = [b for b in content if b["type"] in THINKING_TYPES]
        if not thoughts:
            return
        with self._lock:
            for block in content:
                if block["type"] == "tool_use":
                    self._by_call[str(block["id"])] = thoughts

    def thinking_of(self, tool_use_id: str) -> list[Block] | None:
        """The thinking this server sent with tool call `tool_use_id`, if it sent any."""
        with self._lock:
            return self._by_call.get(tool_use_id)
