"""Messages and inboxes (CONTRACT.md section 3): what a message is, and how it is sent and
taken. The inbox's records are the store's (`ws.store.deliver`, `peek`, `take`).

Appending is the send. An inbox holds only what its owner has not yet taken in; draining
hands the messages to the consumer, which records them durably, before the inbox is cut.
Every delivery is also journalled as a `message` event so history survives draining.

Readers refuse what a writer would have refused (CONTRACT §3, "What a reader refuses"): a
line that is not UTF-8 or not JSON, a message missing a field or of an unknown type, a
`content` over 256 KiB, any line over 1 MiB, and a second line with an id already in the
inbox. A drain moves such lines to `*.rejected.jsonl` and journals `message_rejected`; a
peek only skips them.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Collection, Sequence
from numbers import Real
from typing import Any, cast

from teamd import events, files, linescan
from teamd.errors import BadInput
from teamd.files import Json
from teamd.layout import Workspace
from teamd.records import Message

log = logging.getLogger(__name__)

MAX_CONTENT = 256 * 1024
#: a teammate takes in at most this many messages, or MAX_CONTENT of content, per model
#: call (a shutdown_request always among them); the rest waits for the next call
BATCH_MESSAGES = 100
#: every message type, with the extra fields it must carry (CONTRACT §3)
EXTRA_FIELDS: dict[str, tuple[str, ...]] = {
    "message": (),
    "broadcast": (),
    "shutdown_request": ("request_id", "reason"),
    "shutdown_response": ("request_id", "approve", "reason"),
    "plan_approval_request": ("request_id", "plan"),
    "plan_approval_response": ("request_id", "approve", "feedback"),
    "idle_notification": ("reason", "summary"),
    "member_failed": ("member", "reason"),
    "task_assigned": ("task_id",),
    "permission_request": ("request_id", "tool", "input", "rule"),
    "permission_response": ("request_id", "approve", "feedback"),
    "budget_reached": ("member", "spent_usd", "budget_usd", "scope"),
}
TYPES = tuple(EXTRA_FIELDS)
#: extra fields that are words; a sender that has none to say writes "" (never leaves
#: the field out: a reader refuses a message missing one)
TEXT_FIELDS = ("reason", "plan", "feedback", "summary", "rule")
COMMON_TEXT = ("sender", "recipient", "content")


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


def make(type_: str, sender: str, recipient: str, content: str, **extra: Any) -> Message:
    """A message as it goes into an inbox. `extra` fields set to None are left out, except
    the type's own text fields, which become "" (a reader refuses a message missing one)."""
    if type_ not in TYPES:
        raise BadInput(f"unknown message type {type_!r}; one of: {', '.join(TYPES)}")
    msg: Json = {"id": uuid.uuid4().hex, "type": type_, "sender": sender,
                 "recipient": recipient, "content": check_content(content),
                 "timestamp": time.time()}
    msg.update({k: v for k, v in extra.items() if v is not None})
    for key in EXTRA_FIELDS[type_]:
        if msg.get(key) is None and key in TEXT_FIELDS:
            msg[key] = ""
    why = refusal(msg)
    if why is not None:
        raise BadInput(f"{type_}: {why}")
    size = len(files.dumps_line(msg))
    if size > linescan.MAX_LINE:
        raise BadInput(f"the message is {size} bytes as a line; the limit is "
                       f"{linescan.MAX_LINE} (1 MiB)")
    return cast(Message, msg)


def deliver(ws: Workspace, team: str, messages: Sequence[Message],
            landed: Collection[str] = ()) -> None:
    """Append each message to its recipient's inbox (one locked, fsynced write each),
    then journal them: one `message` event per distinct id (a broadcast is one event).
    `landed`: recipients whose copy is in their inbox already (a re-run: `teamd.once`)."""
    for msg in (m for m in messages if m["recipient"] not in landed):
        ws.store.deliver(team, msg["recipient"], [cast(Json, msg)])
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


def refusal(record: Json) -> str | None:
    """Why `record` is not a message a reader may hand over, or None when it is one."""
    if not isinstance(record.get("id"), str) or not record["id"]:
        return "missing field id"
    kind = record.get("type")
    if not isinstance(kind, str) or not kind:
        return "missing field type"
    if kind not in EXTRA_FIELDS:
        return f"unknown type {kind[:100]!r}"
    for key in COMMON_TEXT:
        if not isinstance(record.get(key), str):
            return f"missing field {key}"
    stamp = record.get("timestamp")
    if not isinstance(stamp, Real) or isinstance(stamp, bool):
        return "missing field timestamp"
    for key in EXTRA_FIELDS[kind]:
        value = record.get(key)
        if value is None:
            return f"missing field {key}"
        if key == "approve" and not isinstance(value, bool):
            return "approve is not true or false"
    try:
        size = len(record["content"].encode("utf-8"))
    except UnicodeEncodeError:
        return "content is not valid UTF-8"
    if size > MAX_CONTENT:
        return f"content over 256 KiB ({size} bytes)"
    return None


def judge() -> linescan.Judge:
    """A reader's verdict on each line of one inbox, read oldest first: the message, or
    why it is refused. Stateful: a second line with an id already accepted is a
    `duplicate id` (the first is the message)."""
    seen: set[str] = set()

    def verdict(line: linescan.RawLine) -> Json | linescan.Refusal:
        if line.long:
            return linescan.Refusal(f"line over 1 MiB ({line.length} bytes)")
        try:
            text = line.data.decode("utf-8")
        except UnicodeDecodeError:
            return linescan.Refusal("not UTF-8")
        try:
            record = json.loads(text)
        except ValueError:
            return linescan.Refusal("not JSON")
        if not isinstance(record, dict):
            return linescan.Refusal("not a JSON object")
        mid = record.get("id") if isinstance(record.get("id"), str) else None
        why = refusal(record)
        if why is not None:
            return linescan.Refusal(why, mid)
        if record["id"] in seen:
            return linescan.Refusal("duplicate id", mid)
        seen.add(record["id"])
        return record

    return verdict


def peek(ws: Workspace, team: str, name: str) -> list[Json]:
    """What is waiting in `name`'s inbox, without taking it. Lines a reader refuses are
    skipped and reported, not moved (only a drain, which holds the lock, moves them)."""
    return ws.store.peek(team, name, judge())


def drain(ws: Workspace, team: str, name: str, consume: Callable[[list[Json]], None], *,
          max_messages: int | None = None, max_content: int | None = None) -> list[Json]:
    """Take messages out of `name`'s inbox, oldest first; `consume` must record them
    durably first. With limits, at most `max_messages` messages and `max_content` bytes of
    content are taken (a shutdown_request always is); the rest stays for the next drain.
    Refused lines go to the inbox's `*.rejected.jsonl`, each journalled `message_rejected`."""
    return take(ws, team, name, consume, max_messages=max_messages,
                max_content=max_content).taken


def take(ws: Workspace, team: str, name: str, consume: Callable[[list[Json]], None], *,
         max_messages: int | None = None, max_content: int | None = None,
         hold: Callable[[Json], bool] | None = None) -> linescan.Sorted:
    """`drain`, saying also what it refused and how much it left in the inbox. `hold`,
    asked of each message in turn (oldest first), leaves one for a later drain when True
    (never a shutdown_request)."""
    count = content = 0
    full = False

    def take(msg: Json) -> bool:
        nonlocal count, content, full
        size = len(msg["content"].encode("utf-8"))
        over = full or (max_messages is not None and count >= max_messages) or \
            (max_content is not None and content + size > max_content)
        if over and msg["type"] != "shutdown_request":
            full = True  # oldest first: nothing later overtakes what is left
            return False
        if hold is not None and msg["type"] != "shutdown_request" and hold(msg):
            return False
        count += 1
        content += size
        return True

    found = ws.store.take(team, name, consume, judge(), keep=take)
    if found.refused:
        rel = ws.store.describe_inbox(team, name)
        now = time.time()
        records = [{"ts": now, "event": "message_rejected", "member": name, "file": rel,
                    "reason": r.reason, **({"id": r.id} if r.id is not None else {})}
                   for r, _ in found.refused]
        try:
            events.emit_many(ws, team, records)
        except OSError as exc:  # the lines are aside already; the journal is the lesser loss
            log.warning("cannot journal %d rejected line(s) of %s: %s", len(records), rel, exc)
    return found
