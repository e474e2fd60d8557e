"""Messages: who may send what to whom, routing a message by its type (a protocol type
opens or answers its request record), broadcasts, and whose inbox the person reads
(CONTRACT §2, §3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from teamd import (
    inbox,
    once,
    requests,
    roster,
)
from teamd.actions.answers import (
    ANSWERS,
    FLAGS,
    Spelling,
    answer_request,
    check_answer_fields,
    check_answerer,
    check_shutdown_refusal,
)
from teamd.actions.members import approve_shutdown, shutdown
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


@dataclass(frozen=True)
class Sent:
    """What `route` did: the messages that landed (a broadcast: one per inbox, same id),
    and for a `shutdown_request` whether it was answered at once on the member's behalf
    (it had no live process)."""

    messages: list[Message]
    answered: bool = False


def send(ws: Workspace, team: str, recipient: str, content: str, *, type_: str = "message",
         sender: str | None = None, request_id: str | None = None,
         approve: bool | None = None, reason: str | None = None,
         feedback: str | None = None, summary: str | None = None,
         message_id: str | None = None) -> Message:
    """Send one message (`route`), and return it (a broadcast's first copy)."""
    return route(ws, team, recipient, content, type_=type_, sender=sender,
                 request_id=request_id, approve=approve, reason=reason, feedback=feedback,
                 summary=summary, message_id=message_id).messages[0]


def route(ws: Workspace, team: str, recipient: str | None, content: str, *,
          type_: str = "message", sender: str | None = None, request_id: str | None = None,
          approve: bool | None = None, reason: str | None = None,
          feedback: str | None = None, summary: str | None = None,
          words: Spelling = FLAGS, pid: int | None = None,
          message_id: str | None = None) -> Sent:
    """The one dispatcher by message type, for `teamctl send` and the SendMessage tool:
    a broadcast is expanded, a protocol type also opens or answers its request record
    (CONTRACT §3, §6). `sender` defaults to the person (`lead`, or `user` beside an LLM
    lead). `recipient` None: whoever asked (a response), everyone (a broadcast). `pid`: the member
    approving a shutdown asked of it, from its own process (`approve_shutdown`).
    `words` spells the fields in a refusal. `message_id` (a message or broadcast only):
    the id to give it, so that a re-run delivers it once (`teamd.once`)."""
    if sender is not None:
        validate_name(sender, "sender")
    if message_id is not None and type_ not in ("message", "broadcast"):
        raise BadInput(f"--id applies to a message or a broadcast, not {type_}")
    if recipient is not None:
        validate_name(recipient, "recipient")
    elif type_ not in (*ANSWERS, "broadcast"):
        raise BadInput(f"{type_} needs a recipient")
    if type_ == "broadcast":
        return Sent(broadcast(ws, team, content, sender=sender, summary=summary,
                              message_id=message_id))
    config = require_team(ws, team, accepting=type_ not in WINDING_DOWN)
    me = roster.person(config)
    sender = sender or me
    _check_party(config, sender, "sender")
    if recipient is not None:
        _check_party(config, recipient, "recipient")
    if sender == recipient and type_ != "shutdown_request":  # that one says why itself
        raise BadInput("sending a message to oneself is refused")
    inbox.check_content(content)
    if type_ == "permission_request":
        raise BadInput("permission_request is sent by the harness, for a tool call that "
                       "waits; answer one with permission_response")
    check_answer_fields(type_, request_id, approve, words=words)
    if type_ in ("permission_response", "plan_approval_response"):
        assert request_id is not None and approve is not None  # check_answer_fields
        if type_ == "permission_response":
            return Sent([answer_request(ws, team, request_id, approve, feedback or reason,
                                        only="permission", sender=sender,
                                        recipient=recipient, words=words)])
        return Sent([answer_request(ws, team, request_id, approve, feedback,
                                    only="plan_approval", sender=sender, recipient=recipient,
                                    content=content, words=words)])
    if type_ == "shutdown_request":
        assert recipient is not None
        if sender not in (LEAD, me):
            raise BadInput(f"only the lead or the person ({me}) sends shutdown_request")
        done = shutdown(ws, team, recipient, reason=reason or content, sender=sender)
        return Sent([cast(Message, done["message"])], answered=bool(done["answered"]))
    if type_ == "shutdown_response":
        assert request_id is not None and approve is not None
        record = requests.get(ws, team, request_id)
        check_answerer(record, "shutdown", sender, recipient, me)
        check_shutdown_refusal(approve, reason, content, words=words)
        if approve and pid is not None:
            # desired=stopped lands with the answer, in one roster-locked step
            return Sent([approve_shutdown(ws, team, sender, request_id,
                                          reason=reason or "approved", content=content,
                                          summary=summary, pid=pid)])
        recipient = record["sender"]
        requests.answer(ws, team, request_id, approve, reason=reason, feedback=feedback)
    elif type_ == "plan_approval_request":
        if recipient != LEAD:
            raise BadInput("plan_approval_request goes to the lead")
        request_id = requests.open_request(ws, team, "plan_approval", sender, recipient,
                                           plan=content)["request_id"]
    elif type_ == "member_failed" and sender != SUPERVISOR:
        raise BadInput("member_failed is sent by teamd only")
    assert recipient is not None
    extra: dict[str, Any] = {"summary": summary, "request_id": request_id}
    if type_ == "shutdown_response":
        extra["approve"] = approve
        extra["reason"] = reason
    if type_ == "plan_approval_request":
        extra["plan"] = content
    if type_ == "idle_notification":
        extra["reason"] = reason
    if message_id is not None:
        msg = inbox.make(type_, sender, recipient, content, id=once.check_id(message_id),
                         **extra)
        once.deliver(ws, team, [msg])
        return Sent([msg])
    msg = inbox.make(type_, sender, recipient, content, **extra)
    inbox.deliver(ws, team, [msg])
    return Sent([msg])


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
              summary: str | None = None, message_id: str | None = None) -> list[Message]:
    """One copy per running member and the lead, except the sender; same id on each.
    `sender` defaults to the person. `message_id`: as `route`'s (a re-run delivers once)."""
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
    first = inbox.make("broadcast", sender, targets[0], content, summary=summary,
                       id=None if message_id is None else once.check_id(message_id))
    copies: list[Message] = [{**first, "recipient": t} for t in targets]
    if message_id is not None:
        once.deliver(ws, team, copies)
    else:
        inbox.deliver(ws, team, copies)
    return copies
