"""Messages and inboxes: `.teams/{team}/{name}_inbox.jsonl` (CONTRACT.md section 3).

Appending is the send. An inbox holds only what its owner has not yet taken in; draining
hands the messages to the consumer, which records them durably, before the inbox is cut.
Every delivery is also journalled as a `message` event so history survives draining.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from teamd import events, files
from teamd.errors import BadInput
from teamd.files import Json
from teamd.layout import Workspace

MAX_CONTENT = 256 * 1024
TYPES = ("message", "broadcast", "shutdown_request", "shutdown_response",
         "plan_approval_request", "plan_approval_response", "idle_notification",
         "member_failed", "permission_request", "permission_response")


def check_content(content: str) -> str:
    if not isinstance(content, str):
        raise BadInput("content must be text")
    try:
        size = len(content.encode("utf-8"))
    except UnicodeEncodeError:
        raise BadInput("content is not valid UTF-8") from None
    if size > MAX_CONTENT:
        raise BadInput(f"content is {size} bytes; the limit is {MAX_CONTENT} (256 KiB)")
    if "\x00" in content:
        raise BadInput("content must not contain NUL characters")
    return content


def make(type_: str, sender: str, recipient: str, content: str, **extra: Any) -> Json:
    """A message as it goes into an inbox. `extra` fields set to None are left out."""
    if type_ not in TYPES:
        raise BadInput(f"unknown message type {type_!r}; one of: {', '.join(TYPES)}")
    msg: Json = {"id": uuid.uuid4().hex, "type": type_, "sender": sender,
                 "recipient": recipient, "content": check_content(content),
                 "timestamp": time.time()}
    msg.update({k: v for k, v in extra.items() if v is not None})
    return msg


def deliver(ws: Workspace, team: str, messages: list[Json]) -> None:
    """Append each message to its recipient's inbox (one locked, fsynced write each),
    then journal them: one `message` event per distinct id (a broadcast is one event)."""
    for msg in messages:
        files.append_jsonl(ws.inbox(team, msg["recipient"]), [msg], durable=True)
    seen: set[str] = set()
    records = []
    for msg in messages:
        if msg["id"] in seen:
            continue
        seen.add(msg["id"])
        shown = dict(msg)
        if msg["type"] == "broadcast":
            shown["recipient"] = "*"
            shown["recipients"] = [m["recipient"] for m in messages if m["id"] == msg["id"]]
        records.append({"ts": time.time(), "event": "message", "member": msg["sender"],
                        "message": shown})
    events.emit_many(ws, team, records)


def is_message(record: Json) -> bool:
    """Shaped like a message: a line that is JSON but not this is a bad line, moved aside
    rather than handed to a teammate that would trip over it on every restart."""
    return (isinstance(record.get("id"), str) and bool(record["id"])
            and record.get("type") in TYPES
            and all(isinstance(record.get(k), str) for k in ("sender", "recipient", "content")))


def peek(ws: Workspace, team: str, name: str) -> list[Json]:
    """What is waiting in `name`'s inbox, without taking it."""
    return files.read_jsonl(ws.inbox(team, name), is_message).records


def drain(ws: Workspace, team: str, name: str,
          consume: Callable[[list[Json]], None]) -> list[Json]:
    """Take everything out of `name`'s inbox; `consume` must record it durably first.
    Lines that are not messages go to the inbox's `*.rejected.jsonl`."""
    return files.drain_jsonl(ws.inbox(team, name), consume, is_message)
