"""Prompt caching as the Messages API reports it, for the scripted server.

A request's prefix is its blocks in the order the API caches them — tools, system, then
each message's content blocks — and a `cache_control` breakpoint on a block marks the prefix
ending there for caching. As the API does: a prefix shorter than `min_tokens` is not cached;
a request reads the longest cached prefix it shares with an earlier one, looked for at each
of its breakpoints and up to LOOKBACK blocks before each; the prefix up to its last
breakpoint, beyond what was read, is written (cache creation); entries live `ttl` seconds
from their last use. A request without breakpoints neither reads nor writes.

Tokens are the server's usual estimate (four characters each), so a benchmark can compare
a session's cost with and without breakpoints; only proportions are meaningful.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Mapping
from typing import Any

MIN_TOKENS = 1024  # the API's minimum cacheable prompt for Sonnet-class models
LOOKBACK = 20  # blocks before a breakpoint the API checks for an earlier cached prefix
TTL = 300.0  # the default ("ephemeral") cache lifetime, refreshed on each hit


def _block(role: str, block: Any) -> tuple[bytes, bool]:
    """A block as cached bytes (without its cache_control) and whether it is a breakpoint."""
    if isinstance(block, Mapping):
        marked = block.get("cache_control") is not None
        block = {k: v for k, v in block.items() if k != "cache_control"}
    else:
        marked = False
    data = json.dumps([role, block], ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return data.encode("utf-8"), marked


def prefix_blocks(body: Mapping[str, Any]) -> list[tuple[bytes, bool]]:
    """Every block of the request in caching order: tools, system, messages."""
    out = [_block("tool", tool) for tool in body.get("tools") or []]
    system = body.get("system")
    if isinstance(system, str) and system:
        out.append(_block("system", {"type": "text", "text": system}))
    elif isinstance(system, list):
        out.extend(_block("system", b) for b in system)
    for message in body.get("messages") or []:
        if not isinstance(message, Mapping):
            continue
        role, content = str(message.get("role")), message.get("content")
        if isinstance(content, list):
            out.extend(_block(role, b) for b in content)
        else:
            out.append(_block(role, {"type": "text", "text": content}))
    return out


class PromptCache:
    """The cache entries one server has seen (thread-safe); `usage` reads and writes them."""

    def __init__(self, min_tokens: int = MIN_TOKENS, ttl: float = TTL) -> None:
        self.min_tokens = min_tokens
        self.ttl = ttl
        self._entries: dict[str, float] = {}  # prefix digest -> last used (monotonic)
        self._lock = threading.Lock()

    def usage(self, body: Mapping[str, Any]) -> dict[str, int] | None:
        """`cache_read_input_tokens` and `cache_creation_input_tokens` for this request,
        or None if it has no breakpoint."""
        blocks = prefix_blocks(body)
        marks = [i for i, (_, marked) in enumerate(blocks) if marked]
        if not marks:
            return None
        digest = hashlib.sha256(str(body.get("model")).encode())
        keys, tokens, size = [], [], 0
        for data, _ in blocks:
            digest.update(len(data).to_bytes(8, "big"))
            digest.update(data)
            size += len(data)
            keys.append(digest.hexdigest())  # the running digest of the prefix so far
            tokens.append(size // 4)
        now = time.monotonic()
        with self._lock:
            self._entries = {k: t for k, t in self._entries.items() if now - t < self.ttl}
            hit = -1
            for mark in marks:
                for i in range(mark, max(-1, mark - LOOKBACK - 1), -1):
                    if keys[i] in self._entries:
                        hit = max(hit, i)
                        break
            read = tokens[hit] if hit >= 0 else 0
            if hit >= 0:
                self._entries[keys[hit]] = now
            for mark in marks:
                if tokens[mark] >= self.min_tokens:
                    self._entries[keys[mark]] = now
        last = marks[-1]
        written = tokens[last] - read if last > hit and tokens[last] >= self.min_tokens else 0
        return {"cache_read_input_tokens": read, "cache_creation_input_tokens": written}

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
