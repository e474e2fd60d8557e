"""Messages: who may send what to whom, routing a message by its type (a protocol type
opens or answers its request record), broadcasts, and whose inbox the person reads
(CONTRACT §2, §3)."""

from __future__ import annotations

from typing import Any, cast

from teamd import (
    inbox,
    requests,
    roster,
)
from teamd.actions.answers import (
    answer_request,
    check_answer_fields,
    check_answerer,
    check_shutdown_refusal,
)
from teamd.actions.members import shutdown
from teamd.actions.teams import WINDING_DOWN, require_team
from teamd.errors import BadInput
from teamd.files import Json
from teamd.layout import LEAD, SUPERVISOR, USER, Workspace, validate_member_name, validate_name
from teamd.records import Message


def _check_party(config: Json, name: str, what: str) -> None:
    if name == USER:
        if not roster.has_llm_lead(config):
            raise BadInput(f"unknown {what} {name!r} in team {config['name']!r}: 'user' is "
                           "the person beside an LLM lead, and this team has none")
        return
    if name in (LEAD, SUPERVISOR) and what == "sender":
        return
    if name == LEAD:
        return
    validate_member_name(name)
    if roster.find(config, name) is None:
        raise roster.unknown_member(config, name, what)


def send(ws: Workspace, team: str, recipient: str, content: str, *, type_: str = "message",
         sender: str | None = None, request_id: str | None = None,
         approve: bool | None = None, reason: str | None = None,
         feedback: str | None = None, summary: str | None = None) -> Message:
    """Send one message; protocol types also open or answer their request record.
    `sender` defaults to the person (`lead`, or `user` beside an LLM lead)."""
    if sender is not None:
        validate_name(sender, "sender")
    validate_name(recipient, "recipient")
    if type_ == "broadcast":
        return broadcast(ws, team, content, sender=sender, summary=summary)[0]
    config = require_team(ws, team, accepting=type_ not in WINDING_DOWN)
    me = roster.person(config)
    sender = sender or me
    _check_party(config, sender, "sender")
    _check_party(config, recipient, "recipient")
    if sender == recipient:
        raise BadInput("sending a message to oneself is refused")
    inbox.check_content(content)
    if type_ == "permission_request":
        raise BadInput("permission_request is sent by the harness, for a tool call that "
                       "waits; answer one with permission_response")
    check_answer_fields(type_, request_id, approve)
    if type_ in ("permission_response", "plan_approval_response"):
        assert request_id is not None and approve is not None  # check_answer_fields
        if type_ == "permission_response":
            return answer_request(ws, team, request_id, approve, feedback or reason,
                                  only="permission", sender=sender, recipient=recipient)
        return answer_request(ws, team, request_id, approve, feedback,
                              only="plan_approval", sender=sender, recipient=recipient,
                              content=content)
    if type_ == "shutdown_request":
        if sender not in (LEAD, me):
            raise BadInput(f"only the lead or the person ({me}) sends shutdown_request")
        return cast(Message, shutdown(ws, team, recipient, reason=reason or content,
                                      sender=sender)["message"])
    if type_ == "shutdown_response":
        assert request_id is not None and approve is not None
        check_answerer(requests.get(ws, team, request_id), "shutdown", sender, recipient, me)
        check_shutdown_refusal(approve, reason, content)
        requests.answer(ws, team, request_id, approve, reason=reason, feedback=feedback)
    elif type_ == "plan_approval_request":
        if recipient != LEAD:
            raise BadInput("plan_approval_request goes to the lead")
        request_id = requests.open_request(ws, team, "plan_approval", sender, recipient,
                                           plan=content)["request_id"]
    elif type_ == "member_failed" and sender != SUPERVISOR:
        raise BadInput("member_failed is sent by teamd only")
    extra: dict[str, Any] = {"summary": summary, "request_id": request_id}
    if type_ == "shutdown_response":
        extra["approve"] = approve
        extra["reason"] = reason
    if type_ == "plan_approval_request":
        extra["plan"] = content
    if type_ == "idle_notification":
        extra["reason"] = reason
    msg = inbox.make(type_, sender, recipient, content, **extra)
    inbox.deliver(ws, team, [msg])
    return msg


def inbox_owner(config: Json, name: str | None) -> tuple[str, bool]:
    """Whose inbox `teamctl inbox` shows (`name`, default: the person's), and whether the
    person drains it: only the person's own (`lead_inbox.jsonl`, or `user_inbox.jsonl`
    beside an LLM lead). Any other belongs to a member's process, which drains it itself:
    the person only peeks (CONTRACT §3, Delivery)."""
    me = roster.person(config)
    name = name or me
    if name == USER and me != USER:
        raise BadInput(f"unknown member {USER!r} in team {config['name']!r}: 'user' is the "
                       "person beside an LLM lead, and this team has none")
    if name not in (LEAD, USER):
        roster.get(config, name)
    return name, name == me


def broadcast(ws: Workspace, team: str, content: str, *, sender: str | None = None,
              summary: str | None = None) -> list[Message]:
    """One copy per running member and the lead, except the sender; same id on each.
    `sender` defaults to the person."""
    if sender is not None:
        validate_name(sender, "sender")
    config = require_team(ws, team, accepting=True)
    sender = sender or roster.person(config)
    _check_party(config, sender, "sender")
    inbox.check_content(content)
    targets = [m["name"] for m in config["members"] if m.get("desired") == "running"]
    if LEAD not in targets:
        targets.append(LEAD)
    targets = [t for t in targets if t != sender]
    if not targets:
        raise BadInput(f"team {team!r} has nobody to broadcast to")
    first = inbox.make("broadcast", sender, targets[0], content, summary=summary)
    copies: list[Message] = [{**first, "recipient": t} for t in targets]
    inbox.deliver(ws, team, copies)
    return copies
