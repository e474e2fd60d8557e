"""A shutdown answered on a non-live member's behalf (CONTRACT §6, §17), as one change across
a crash: the roster (`desired=stopped`, `status=shutdown`), then the request record written
already approved, then its journal lines in one append — `request_opened`,
`request_answered`, and both messages (the answer's id derived from the request's). A
crash before the record leaves a member shut down and no request; a crash after it leaves
the lines missing, and the next `shutdown` of that member (refused: already shut down)
journals them first, once; a status line its writer never wrote is mended then too."""

from __future__ import annotations

import time
from typing import cast

from teamd import events, inbox, journal_gaps, once, requests
from teamd.errors import BadInput
from teamd.files import Json
from teamd.layout import Workspace
from teamd.records import Message, Request

#: the `answer_reason` of a shutdown answered on a member's behalf
NOT_RUNNING = "not running"


def asked(record: Request) -> Message:
    """The `shutdown_request` message of `record`, its id derived from the request's (the
    same message whenever it is made again)."""
    reason = record.get("reason") or ""
    return inbox.make("shutdown_request", record["sender"], record["recipient"],
                      reason or "Please shut down.", id=once.asked_id(record["request_id"]),
                      request_id=record["request_id"], reason=reason)


def pending(ws: Workspace, team: str, name: str) -> Request | None:
    """The oldest shutdown request to `name` still pending (one a crashed `shutdown` may
    have left undelivered), or None."""
    return next((r for r in requests.list_requests(ws, team, pending_only=True)
                 if r["kind"] == "shutdown" and r["recipient"] == name), None)


def settle(ws: Workspace, team: str, name: str) -> Request | None:
    """Answer on `name`'s behalf every shutdown request to it still pending, journaled;
    the first, or None when there was none."""
    first: Request | None = None
    while (record := pending(ws, team, name)) is not None:
        try:
            record = cast(Request, requests.answer(ws, team, record["request_id"], True,
                                                   reason=NOT_RUNNING))
        except BadInput:
            continue  # answered meanwhile (by the member, or a racing shutdown)
        journal(ws, team, record, opened=True)
        first = first or record
    return first


def journal(ws: Workspace, team: str, record: Request, *, opened: bool = False) -> None:
    """Journal the request opened and answered for `record`, with its two messages, unless
    the answer is journaled already. `opened`: a record opened `pending` and answered
    since, whose `request_opened` and `request_answered` lines are there already."""
    rid, name = record["request_id"], record["recipient"]
    answer = inbox.make("shutdown_response", name, record["sender"], NOT_RUNNING,
                        id=once.answer_id(rid), request_id=rid, approve=True,
                        reason=NOT_RUNNING)
    if once.journaled(ws, team, answer["id"]):
        return
    now = time.time()
    head = {"request_id": rid, "kind": "shutdown"}
    lines: list[Json] = [] if opened else [
        {"ts": now, "event": "request_opened", "member": record["sender"], **head,
         "status": "pending", "recipient": name},
        {"ts": now, "event": "request_answered", "member": name, **head,
         "status": "approved"}]
    if not once.journaled(ws, team, once.asked_id(rid)):
        lines.append({"ts": now, "event": "message", "member": record["sender"],
                      "message": asked(record)})
    lines.append({"ts": now, "event": "message", "member": name, "message": answer})
    events.emit_many(ws, team, lines)


def finish(ws: Workspace, team: str, name: str, since: float) -> None:
    """`name` exited for good (`teamd` read `desired=stopped`): what its approval of a
    shutdown left half-done when it was killed is finished — a request still pending is
    answered on its behalf; one it approved (since `since`, its last start) whose answer
    never reached the asker (or the journal) is delivered, once (its id is derived from
    the request's)."""
    settle(ws, team, name)
    for record in requests.list_requests(ws, team):
        if record["kind"] != "shutdown" or record["recipient"] != name \
                or record["status"] != "approved" or (record["resolved_at"] or 0) < since \
                or record.get("answer_reason") == NOT_RUNNING:
            continue
        rid = record["request_id"]
        once.answered(ws, team, record)  # its `request_answered`, if the kill cost it
        once.deliver(ws, team, [inbox.make(
            "shutdown_response", name, record["sender"], f"{name} is shutting down",
            id=once.answer_id(rid), request_id=rid, approve=True,
            reason=record.get("answer_reason") or "approved")])


def already_shut_down(ws: Workspace, team: str, name: str) -> BadInput:
    """The refusal of a shutdown asked of a member shut down already, once what a crash
    left half-done is finished: a request still pending answered, the journal lines of
    the last answer, its status line."""
    settle(ws, team, name)
    for record in requests.list_requests(ws, team):
        if record["kind"] == "shutdown" and record["recipient"] == name \
                and record.get("answer_reason") == NOT_RUNNING:
            journal(ws, team, record)
    journal_gaps.mend(ws, team, name)
    return BadInput(f"{name!r} is already shut down")
