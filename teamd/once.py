"""Delivering a message once across a crash (CONTRACT §6, §17): a message whose id is known
before it is sent — `send --id`, `broadcast --id`, the answer to a request (its id derived
from the request's) — is delivered again by a re-run only where it has not landed, so a
command killed half-way and run again delivers it once.

A delivery appends to each inbox, then journals the `message` event: a journaled id landed
everywhere; a copy still in its inbox is not appended twice; a copy already taken in by a
member is known to its session, which never shows an id twice (CONTRACT §3, Delivery).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from teamd import inbox, requests
from teamd.errors import BadInput
from teamd.files import Json
from teamd.layout import Workspace
from teamd.records import Message

#: what a caller may choose as a message id (`send --id`): a word of its own, not a path
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")


def check_id(message_id: str) -> str:
    """A message id a caller chose, or BadInput saying what one may be."""
    if not ID_RE.match(message_id):
        raise BadInput(f"bad message id {message_id!r}: 1 to 128 letters, digits, '.', '_', "
                       "':' or '-', starting with a letter or digit")
    return message_id


def answer_id(request_id: str) -> str:
    """The id of the message answering request `request_id` (one answer, one id)."""
    return f"{request_id}.answer"


def asked_id(request_id: str) -> str:
    """The id of the message asking request `request_id` (a shutdown request)."""
    return f"{request_id}.request"


def _in_journal(ws: Workspace, team: str, value: str, match: Callable[[Json], bool]) -> bool:
    """Whether a line of the team's journal (its current part) is one `match` accepts.
    (`value`: what the line must hold, a quick test before `match`.)"""
    return any(value in json.dumps(record, ensure_ascii=False) and match(record)
               for record in ws.store.read_journal(team))


def journaled(ws: Workspace, team: str, message_id: str) -> bool:
    """Whether the team's journal holds the `message` event of `message_id`."""
    def mine(record: Json) -> bool:
        message = record.get("message")
        return record.get("event") == "message" and isinstance(message, dict) \
            and message.get("id") == message_id
    return _in_journal(ws, team, message_id, mine)


def answered(ws: Workspace, team: str, record: Mapping[str, Any]) -> None:
    """A re-run found `record` answered as it would answer it: journal the
    `request_answered` a crash after the record may have cost."""
    rid = record["request_id"]
    if not _in_journal(ws, team, rid, lambda r: r.get("event") == "request_answered"
                       and r.get("request_id") == rid):
        requests.journal_answer(ws, team, record)


def deliver(ws: Workspace, team: str, copies: Sequence[Message]) -> bool:
    """Deliver `copies` (of one message: one id) where they have not landed yet; False
    when the journal says all of them had (nothing done)."""
    message_id = copies[0]["id"]
    if journaled(ws, team, message_id):
        return False
    landed = {m["recipient"] for m in copies
              if any(r.get("id") == message_id
                     for r in inbox.peek(ws, team, m["recipient"]))}
    inbox.deliver(ws, team, copies, landed=landed)
    return True
