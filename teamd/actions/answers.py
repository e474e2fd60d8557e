"""Answers to requests: which fields a response needs and who may give it, and answering
a plan or permission request (compare-and-set on the record, then the response message;
CONTRACT §6, §11)."""

from __future__ import annotations

from dataclasses import dataclass

from teamd import (
    inbox,
    once,
    permissions,
    requests,
    roster,
)
from teamd.actions.teams import require_team
from teamd.errors import BadInput
from teamd.files import Json
from teamd.layout import Workspace
from teamd.records import Message

#: the message types that answer a request (CONTRACT §3, §6)
ANSWERS = ("shutdown_response", "plan_approval_response", "permission_response")


@dataclass(frozen=True)
class Spelling:
    """How a caller names a response's fields in its refusals: `teamctl`'s flags, or the
    SendMessage tool's inputs (`TOOL_INPUTS`). The rules and the sentences are the same."""

    request_id: str = "--request-id"
    approve: str = "--approve or --reject"
    approve_or: str = "--approve/--reject"
    feedback: str = "--feedback"
    reason: str = "--reason"


FLAGS = Spelling()
TOOL_INPUTS = Spelling(request_id="request_id", approve="approve (true or false)",
                       approve_or="approve", feedback="feedback", reason="a reason")


def check_answer_fields(type_: str, request_id: str | None, approve: bool | None, *,
                        words: Spelling = FLAGS) -> None:
    """A response names the request it answers and says yes or no; no other message
    carries either (BadInput otherwise)."""
    if type_ in ANSWERS:
        missing = [w for w, absent in ((words.request_id, not request_id),
                                       (words.approve, approve is None)) if absent]
        if missing:
            raise BadInput(f"{type_} needs {' and '.join(missing)}")
    elif request_id or approve is not None:
        raise BadInput(f"{words.request_id} and {words.approve_or} do not apply to {type_}; "
                       f"they only apply to {', '.join(ANSWERS)}")


def check_answerer(record: Json, expected: str, sender: str, recipient: str | None,
                    me: str) -> None:
    """A request is answered only as what it is (`expected` kind), by the member it was
    sent to (a plan or permission request also by the person, `me`: CONTRACT §3), and to
    whoever asked (`recipient`; None: to them, whoever they are)."""
    rid = record["request_id"]
    if record["kind"] != expected:
        raise BadInput(f"request {rid!r} is a {record['kind']} request, not {expected}")
    answerers = {record["recipient"], *((me,) if expected != "shutdown" else ())}
    if sender not in answerers or recipient not in (None, record["sender"]):
        raise BadInput(f"request {rid!r} was sent by {record['sender']} to "
                       f"{record['recipient']}; only {record['recipient']} answers it, "
                       f"to {record['sender']}")


def check_shutdown_refusal(approve: bool, reason: str | None, content: str, *,
                           words: Spelling = FLAGS) -> None:
    """A member refusing a shutdown says why it must go on (CONTRACT §6)."""
    if not approve and not (reason or content.strip()):
        raise BadInput(f"refusing a shutdown needs {words.reason} (why it must go on)")


def answer_request(ws: Workspace, team: str, request_id: str, approve: bool,
                   feedback: str | None = None, *, always: bool = False,
                   only: str | None = None, sender: str | None = None,
                   recipient: str | None = None, content: str | None = None,
                   words: Spelling = FLAGS) -> Message:
    """Approve or reject a plan or permission request (`teamctl approve`/`reject`, `teamctl
    send --type …_response`, the lead's SendMessage): compare-and-set on the record, then
    the response into the member's inbox. `always` (permissions only) also allows the exact
    call from now on. `sender` (who answers) defaults to the person: `lead`, or `user`
    beside an LLM lead; any other must be the member the request was sent to. `recipient`,
    when named, must be who asked. `content` (a plan's answer only) is the message's text
    instead of the feedback. `words` spells the fields in a refusal. Returns the response
    message.

    The record and its message are one change (CONTRACT §6, §17): the message's id is
    derived from the request's, so the same answer given again (a re-run after a crash
    between the two) delivers the message where it has not landed, never a second one."""
    config = require_team(ws, team)
    me = roster.person(config)
    sender = sender or me
    record = requests.get(ws, team, request_id)
    kind = record["kind"]
    if only is not None:
        check_answerer(record, only, sender, recipient, me)
    if kind not in ("plan_approval", "permission"):
        raise BadInput(f"request {request_id!r} is a {kind} request; only plan and "
                       "permission requests are approved or rejected here")
    if always and kind != "permission":
        raise BadInput(f"--always applies to permission requests; {request_id!r} is a "
                       f"{kind} request")
    if not approve and not (feedback and feedback.strip()):
        raise BadInput(f"a rejection needs {words.feedback} saying "
                       + ("what to change" if kind == "plan_approval" else "why"))
    if kind == "plan_approval":
        type_ = "plan_approval_response"
        text = content or feedback or ("Plan approved." if approve else "Plan rejected.")
    else:  # the feedback travels in its own field (and reaches the model as "Feedback:")
        type_ = "permission_response"
        text = f"{'Approved' if approve else 'Refused'}: {permissions.describe(record)}"
    inbox.check_content(text)
    if feedback:
        inbox.check_content(feedback)
    # the "always" rule is checked before anything is written (a bad one: exit 2, nothing
    # changed), and added only once the answer is in the member's inbox: the response is
    # what wakes it, so no failure after the answer may leave it waiting
    rule = permissions.always_rule(record["tool"], record.get("argument") or "") \
        if always and approve else None
    if record["status"] != ("approved" if approve else "rejected"):
        record = requests.answer(ws, team, request_id, approve, feedback=feedback)
    else:  # given before, by a process killed before its message (CONTRACT §6, §17)
        once.answered(ws, team, record)
    msg = inbox.make(type_, sender, record["sender"], text, id=once.answer_id(request_id),
                     request_id=request_id, approve=approve, feedback=feedback)
    once.deliver(ws, team, [msg])
    if rule is not None:
        permissions.add_always(ws, team, rule)
    return msg
