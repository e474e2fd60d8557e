"""Prompt caching as the Messages API reports it, for the scripted server.

A request's prefix is its blocks in the order the API caches them — tools, system, then
each message's content blocks — and a `cache_control` breakpoint on a block marks the prefix
ending there for caching, for its `ttl` (`"5m"`, the default, or `"1h"`). As the API does: a
prefix shorter than `min_tokens` is not cached; a request reads the longest cached prefix it
shares with an earlier one, looked for at each of its breakpoints and up to LOOKBACK blocks
before each; the prefix up to its last breakpoint, beyond what was read, is written (cache
creation), each part with the TTL of the breakpoint that ends it (`usage.cache_creation`:
`ephemeral_5m_input_tokens`, `ephemeral_1h_input_tokens`); an entry lives its TTL from its
last use, and a read refreshes it for the reading breakpoint's TTL (so a 1-hour breakpoint
reads what a 5-minute one wrote). A request without breakpoints neither reads nor writes.
The clock is the server's: `advance` moves it on, so a test can live an hour in a second.

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
TTLS = {"5m": 300.0, "1h": 3600.0}  # cache_control's ttl; "5m" when it names none
TTL = TTLS["5m"]


def _block(role: str, block: Any) -> tuple[bytes, str | None]:
    """A block as cached bytes (without its cache_control) and its breakpoint's TTL (None:
    not a breakpoint)."""
    ttl = None
    if isinstance(block, Mapping):
        control = block.get("cache_control")
        if control is not None:
            asked = control.get("ttl") if isinstance(control, Mapping) else None
            ttl = asked if asked in TTLS else "5m"
        block = {k: v for k, v in block.items() if k != "cache_control"}
    data = json.dumps([role, block], ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return data.encode("utf-8"), ttl


def prefix_blocks(body: Mapping[str, Any]) -> list[tuple[bytes, str | None]]:
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


def split(total: int, read: int = 0, written: Mapping[str, int] | None = None
          ) -> dict[str, Any]:
    """A request's input fields of `usage`: `total` tokens of which `read` came from the
    cache and `written` (by TTL) went into it; the rest uncached (the same total with
    caching or without: compaction keys off it)."""
    read = min(read, total)
    five = min((written or {}).get("5m", 0), total - read)
    hour = min((written or {}).get("1h", 0), total - read - five)
    return {"input_tokens": total - read - five - hour, "cache_read_input_tokens": read,
            "cache_creation_input_tokens": five + hour,
            "cache_creation": {"ephemeral_5m_input_tokens": five,
                               "ephemeral_1h_input_tokens": hour}}


class PromptCache:
    """The cache entries one server has seen (thread-safe); `usage` reads and writes them."""

    def __init__(self, min_tokens: int = MIN_TOKENS) -> None:
        self.min_tokens = min_tokens
        self._entries: dict[str, float] = {}  # prefix digest -> expires at (the clock's)
        self._skew = 0.0  # seconds `advance` moved the clock on
        self._lock = threading.Lock()

    def now(self) -> float:
        """The cache's clock: monotonic time, moved on by `advance`."""
        return time.monotonic() + self._skew

    def advance(self, seconds: float) -> None:
        """Move the clock on: entries whose TTL runs out meanwhile expire."""
        with self._lock:
            self._skew += seconds

    def usage(self, body: Mapping[str, Any], total: int) -> dict[str, Any]:
        """The usage fields of a request whose input is `total` tokens: the cache reads and
        writes its breakpoints make (writes split by TTL), the rest uncached."""
        return split(total, *self._read_write(body))

    def _read_write(self, body: Mapping[str, Any]) -> tuple[int, dict[str, int]]:
        """Tokens read from the cache, and tokens written by TTL."""
        blocks = prefix_blocks(body)
        marks = [(i, ttl) for i, (_, ttl) in enumerate(blocks) if ttl is not None]
        if not marks:
            return 0, {}
        digest = hashlib.sha256(str(body.get("model")).encode())
        keys, tokens, size = [], [], 0
        for data, _ in blocks:
            digest.update(len(data).to_bytes(8, "big"))
            digest.update(data)
            size += len(data)
            keys.append(digest.hexdigest())  # the running digest of the prefix so far
            tokens.append(size // 4)
        with self._lock:
            now = self.now()
            self._entries = {k: t for k, t in self._entries.items() if t > now}
            hit, hit_ttl = -1, 0.0
            for mark, ttl in marks:
                for i in range(mark, max(-1, mark - LOOKBACK - 1), -1):
                    if keys[i] in self._entries:
                        if i > hit or (i == hit and TTLS[ttl] > hit_ttl):
                            hit, hit_ttl = i, TTLS[ttl]
                        break
            if hit >= 0:  # a read refreshes the entry, for the reading breakpoint's TTL
                self._entries[keys[hit]] = max(self._entries[keys[hit]], now + hit_ttl)
            for mark, ttl in marks:
                if tokens[mark] >= self.min_tokens:
                    self._entries[keys[mark]] = max(self._entries.get(keys[mark], 0.0),
                                                    now + TTLS[ttl])
        read = tokens[hit] if hit >= 0 else 0
        written: dict[str, int] = {}
        if marks[-1][0] > hit and tokens[marks[-1][0]] >= self.min_tokens:
            done = read  # each part beyond what was read goes with the breakpoint ending it
            for mark, ttl in marks:
                if mark > hit and tokens[mark] > done:
                    written[ttl] = written.get(ttl, 0) + tokens[mark] - done
                    done = tokens[mark]
        return read, written

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
