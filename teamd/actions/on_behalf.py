"""A shutdown answered on a non-live member's behalf (CONTRACT §6, §17), as one change across
a crash: the roster (`desired=stopped`, `status=shutdown`), then the request record written
already approved, then its journal lines in one append — `request_opened`,
`request_answered`, and both messages (the answer's id derived from the request's). A
crash before the record leaves a member shut down and no request; a crash after it leaves
the lines missing, and the next `shutdown` of that member (refused: already shut down)
journals them first, once; a status line its writer never wrote is mended then too."""

from __future__ import annotations

import time

from teamd import events, inbox, once, requests, status_gaps
from teamd.errors import BadInput
from teamd.layout import Workspace
from teamd.records import Message, Request

#: the `answer_reason` of a shutdown answered on a member's behalf
NOT_RUNNING = "not running"


def journal(ws: Workspace, team: str, record: Request, asked: Message | None = None) -> None:
    """Journal the request opened and answered for `record`, with its two messages, unless
    the answer is journaled already. `asked`: the request message (made again if None)."""
    rid, name = record["request_id"], record["recipient"]
    answer = inbox.make("shutdown_response", name, record["sender"], NOT_RUNNING,
                        id=once.answer_id(rid), request_id=rid, approve=True,
                        reason=NOT_RUNNING)
    if once.journaled(ws, team, answer["id"]):
        return
    if asked is None:
        reason = record.get("reason") or ""
        asked = inbox.make("shutdown_request", record["sender"], name,
                           reason or "Please shut down.", request_id=rid, reason=reason)
    now = time.time()
    head = {"request_id": rid, "kind": "shutdown"}
    events.emit_many(ws, team, [
        {"ts": now, "event": "request_opened", "member": record["sender"], **head,
         "status": "pending", "recipient": name},
        {"ts": now, "event": "request_answered", "member": name, **head,
         "status": "approved"},
        {"ts": now, "event": "message", "member": record["sender"], "message": asked},
        {"ts": now, "event": "message", "member": name, "message": answer}])


def already_shut_down(ws: Workspace, team: str, name: str) -> BadInput:
    """The refusal of a shutdown asked of a member shut down already, once what a crash
    left half-done of the last one is finished (its journal lines, its status line)."""
    for record in requests.list_requests(ws, team):
        if record["kind"] == "shutdown" and record["recipient"] == name \
                and record.get("answer_reason") == NOT_RUNNING:
            journal(ws, team, record)
    status_gaps.mend(ws, team, name)
    return BadInput(f"{name!r} is already shut down")
