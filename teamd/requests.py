"""Shutdown, plan-approval and permission requests (CONTRACT.md §6): their records, kept by
the store (the files: `.teams/{team}/requests/{request_id}.json`), and the plan state read
from them.

A record is opened `pending` and answered exactly once: the answer is a compare-and-set
from `pending` inside the request's unit (`Store.request_unit`), so a second answer is
refused.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

from teamd import events
from teamd.errors import BadInput
from teamd.files import Json
from teamd.layout import Workspace
from teamd.records import Request

KINDS = ("shutdown", "plan_approval", "permission")


def new_id(kind: str) -> str:
    prefix = {"plan_approval": "plan", "permission": "perm"}.get(kind, kind)
    return f"{prefix}-{secrets.token_hex(5)}"


def open_request(ws: Workspace, team: str, kind: str, sender: str, recipient: str, *,
                 reason: str | None = None, plan: str | None = None,
                 request_id: str | None = None, tool: str | None = None,
                 tool_input: Json | None = None, rule: str | None = None,
                 argument: str | None = None, answered: str | None = None) -> Request:
    """Write a new request record, `pending`, and journal `request_opened`; or, with
    `answered` (the answer's reason), already approved in the same write, and journaled by
    the caller with its messages (`on_behalf`): a shutdown answered on a non-live member's
    behalf is never seen, nor left by a crash, `pending` (CONTRACT §6, §17)."""
    if kind not in KINDS:
        raise BadInput(f"unknown request kind {kind!r}")
    rid = request_id or new_id(kind)
    record: Request = {"schema": 1, "request_id": rid, "kind": kind, "sender": sender,
                    "recipient": recipient, "status": "pending", "created_at": time.time(),
                    "resolved_at": None, "reason": reason or None, "plan": plan,
                    "feedback": None}
    if kind == "permission":
        # `input` is the whole tool input; `argument` what the rule matched (for listings)
        record.update({"tool": tool, "input": tool_input, "rule": rule, "argument": argument,
                       "ran": False, "asked": False})
    if answered is not None:
        record["status"] = "approved"
        record["resolved_at"] = record["created_at"]
        record["answer_reason"] = answered
    if not ws.store.create_request(team, cast(Json, record)):
        raise BadInput(f"request {rid!r} already exists")
    if answered is None:
        events.emit(ws, team, "request_opened", member=sender, request_id=rid, kind=kind,
                    status="pending", recipient=recipient)
    return record


def get(ws: Workspace, team: str, request_id: str) -> Json:
    record = ws.store.read_request(team, request_id)
    if record is None:
        raise unknown(team, request_id)
    return record


def unknown(team: str, request_id: str) -> BadInput:
    """The one error for a request that does not exist."""
    return BadInput(f"unknown request {request_id!r} in team {team!r}")


def answer(ws: Workspace, team: str, request_id: str, approve: bool, *,
           reason: str | None = None, feedback: str | None = None,
           expect_kind: str | None = None,
           before_write: Callable[[Json], None] | None = None) -> Json:
    """Resolve a pending request; BadInput if it is unknown, of another kind, or answered.
    `reason` is the answer's (`answer_reason`; the asker's stays in `reason`).

    `before_write(record)` runs under the record's lock once the answer is accepted and
    before the record says so: a write that must be on disk first (the roster of a member
    approving its own shutdown) goes there."""
    with ws.store.request_unit(team, request_id) as found:
        if not found:
            raise unknown(team, request_id)
        record = get(ws, team, request_id)
        if expect_kind and record["kind"] != expect_kind:
            raise BadInput(f"request {request_id!r} is a {record['kind']} request, "
                           f"not {expect_kind}")
        if record["status"] != "pending":
            raise BadInput(f"request {request_id!r} was already {record['status']}")
        if before_write is not None:
            before_write(record)
        record["status"] = "approved" if approve else "rejected"
        record["resolved_at"] = time.time()
        if reason is not None:
            record["answer_reason"] = reason  # the asker's own stays in `reason`
        if feedback is not None:
            record["feedback"] = feedback
        ws.store.write_request(team, record)
    journal_answer(ws, team, record)
    return record


def journal_answer(ws: Workspace, team: str, record: Mapping[str, Any]) -> None:
    """Journal `request_answered` for `record` (also by a re-run that finds the answer
    recorded and its line missing: `once.answered`)."""
    events.emit(ws, team, "request_answered", member=record["recipient"],
                request_id=record["request_id"], kind=record["kind"],
                status=record["status"])


def set_flag(ws: Workspace, team: str, request_id: str, key: str,
             when_status: str | None = None) -> Json:
    """Set `record[key] = True` under the record's lock (at most once: the returned record
    has `changed` False when it was set already, or the status is not `when_status`)."""
    with ws.store.request_unit(team, request_id) as found:
        if not found:
            raise unknown(team, request_id)
        record = get(ws, team, request_id)
        ok = not record.get(key) and (when_status is None or record["status"] == when_status)
        if ok:
            record[key] = True
            ws.store.write_request(team, record)
    return {**record, "changed": ok}


def list_requests(ws: Workspace, team: str, pending_only: bool = False) -> list[Request]:
    out = [cast(Request, r) for r in ws.store.list_requests(team)
           if not pending_only or r.get("status") == "pending"]
    return sorted(out, key=lambda r: r.get("created_at") or 0)


def plan_approved(ws: Workspace, team: str, member: str, since: float | None = None) -> bool:
    """The plan gate is open exactly when an approved plan request from `member` exists,
    made since it joined (`since`: its `joined_at`; a member removed and spawned again
    starts closed)."""
    return gate_open(list_requests(ws, team), member, since)


def plans_of(records: Iterable[Request], member: str, since: float | None = None
             ) -> list[Request]:
    """The plan requests `member` made since it joined (`since`: its `joined_at`): the
    plan state of CONTRACT §6 is read from these alone, so a plan of a removed member of
    that name is never the new member's."""
    return [r for r in records if r["kind"] == "plan_approval" and r["sender"] == member
            and (r.get("created_at") or 0) >= (since or 0)]


def gate_open(records: list[Request], member: str, since: float | None = None) -> bool:
    """`plan_approved` over records already read (`status` reads them once per team)."""
    return any(r["status"] == "approved" for r in plans_of(records, member, since))


def pending_plan(ws: Workspace, team: str, member: str, since: float | None = None
                 ) -> Request | None:
    """The plan request of `member` still waiting for the lead's answer, if any, made since
    it joined (`since`: its `joined_at`; a plan of a removed member of that name is not
    the new member's)."""
    return next(iter(plans_of(list_requests(ws, team, pending_only=True), member, since)),
                None)
