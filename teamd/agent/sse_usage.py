"""What a forwarded answer says about its call (CONTRACT §14): the usage, the stop reason
and, for an error, its type — read from the bytes as they pass through, without holding
them back or parsing the whole stream.

An SSE answer reports its usage in two events: `message_start` (the input side) and
`message_delta` (totals, the output included); only the lines of those events (and of an
`error` event) are parsed, so the many deltas in between cost a byte search each. A JSON
answer (not streamed, or an error) is kept whole, up to `KEEP` bytes, and read at the end.
"""

from __future__ import annotations

import json
from typing import Any

from teamd import prices
from teamd.files import Json

#: the most of a JSON answer kept to read its usage or error (a Message is far smaller)
KEEP = 4 * 1024 * 1024
_WANTED = (b'"message_start"', b'"message_delta"', b'"error"')


class UsageReader:
    """Fed an answer's bytes in the order they came; says what they reported."""

    def __init__(self) -> None:
        self.partial = b""
        self.kept = bytearray()
        self.streamed: bool | None = None
        self.found: Json = {}  # the latest usage reported (message_delta's are totals)
        self.stop_reason: str | None = None
        self.error: Json | None = None

    def feed(self, chunk: bytes) -> None:
        if self.streamed is None:
            self.streamed = not chunk.lstrip().startswith(b"{")
        if not self.streamed:
            if len(self.kept) < KEEP:
                self.kept += chunk[: KEEP - len(self.kept)]
            return
        lines = (self.partial + chunk).split(b"\n")
        self.partial = lines.pop()
        for line in lines:
            if line.startswith(b"data:") and any(w in line for w in _WANTED):
                self.event(line[5:])

    def event(self, data: bytes) -> None:
        try:
            found = json.loads(data)
        except ValueError:
            return
        if not isinstance(found, dict):
            return
        kind = found.get("type")
        if kind == "message_start" and isinstance(found.get("message"), dict):
            self.found.update(found["message"].get("usage") or {})
        elif kind == "message_delta":
            self.found.update(found.get("usage") or {})
            delta = found.get("delta")
            if isinstance(delta, dict) and delta.get("stop_reason"):
                self.stop_reason = str(delta["stop_reason"])
        elif kind == "error" and isinstance(found.get("error"), dict):
            self.error = found["error"]

    def whole(self) -> Any:
        try:
            return json.loads(bytes(self.kept))
        except ValueError:
            return None

    def usage(self) -> dict[str, int] | None:
        """The call's usage as teamd records it; None when the answer reported none."""
        if not self.streamed:
            message = self.whole()
            if not isinstance(message, dict) or not isinstance(message.get("usage"), dict):
                return None
            self.stop_reason = message.get("stop_reason")
            return prices.usage_of(message["usage"])
        if self.error is not None or not self.found:
            return None
        return prices.usage_of(self.found)

    def error_type(self) -> str | None:
        """An error answer's type (`overloaded_error`, …), from its event or its body."""
        error = self.error
        if error is None and not self.streamed:
            whole = self.whole()
            error = whole.get("error") if isinstance(whole, dict) else None
        kind = error.get("type") if isinstance(error, dict) else None
        return str(kind) if kind else None
