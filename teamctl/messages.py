"""`send`, `broadcast` and `inbox`: messages into a team's inboxes, and the person's
inbox read (CONTRACT §3, §9).

Registered on the app by teamctl.cli; what a message holds is `teamd.inbox`'s, who may send
what is `teamd.actions`'.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Annotated

import typer

from teamctl import complete, output
from teamctl.params import JsonOpt, TeamArg, ws
from teamd import actions, files, inbox, policy, roster, suggest
from teamd.errors import BadInput
from teamd.files import Json
from teamd.layout import LEAD
from teamd.store import Kind


def _read_content(content: str) -> str:
    """The text to send: `content`, or standard input for `-`; never empty (a message of
    nothing would only cost its recipient a model call)."""
    if content == "-":
        try:
            content = sys.stdin.buffer.read().decode("utf-8")
        except UnicodeDecodeError:
            raise BadInput("content on standard input is not valid UTF-8") from None
        return require_text(content, " (standard input was empty)")
    return require_text(content)


def require_text(content: str, where: str = "") -> str:
    """`content`, refused when blank: a message of nothing would only cost its recipient
    a model call (`send`, `broadcast` and the web view's send)."""
    if not content.strip():
        raise BadInput(f"the message is empty{where}: nothing sent")
    return content


def send(
    team: TeamArg,
    name: Annotated[str, typer.Argument(help="Recipient: a member, or lead.",
                                        show_default=False,
                                        autocompletion=complete.recipient)],
    content: Annotated[str, typer.Argument(help="Text, or - to read standard input.",
                                           show_default=False)],
    type_: Annotated[str, typer.Option("--type", help="message, broadcast, shutdown_request, "
                                       "shutdown_response, plan_approval_response, …")
                     ] = "message",
    request_id: Annotated[str | None, typer.Option(help="For a *_response.")] = None,
    approve: Annotated[bool | None, typer.Option("--approve/--reject",
                                                 help="For a *_response.")] = None,
    sender: Annotated[str | None, typer.Option(
        help="Who sends it (default: the person: lead, or user beside an LLM lead).",
        show_default=False, autocompletion=complete.recipient)] = None,
    reason: Annotated[str | None, typer.Option(help="For shutdown messages.")] = None,
    feedback: Annotated[str | None, typer.Option(help="For plan responses.")] = None,
    summary: Annotated[str | None, typer.Option(help="One line for listings.")] = None,
    message_id: Annotated[str | None, typer.Option(
        "--id", help="The message's id (a message or broadcast): run again after a crash, "
        "the command delivers it once.", show_default=False)] = None,
    as_json: JsonOpt = False,
) -> None:
    """Append a message to a member's inbox (or the lead's).

    In a team with an LLM lead you are `user`: `teamctl send TEAM lead "focus on the login
    page"` reaches the lead's model as a message from user, and its answers land in your
    inbox (`teamctl inbox TEAM`).

    `teamctl send` killed half-way and run again may deliver twice; with --id ID the
    re-run delivers once (what already landed is not sent again).

    \b
    Example:
      teamctl send shop alice 'Finish the login page first'
      teamctl send shop alice --id login-1 'Finish the login page first'
    """
    msg = actions.send(ws(), team, name, _read_content(content), type_=type_, sender=sender,
                       request_id=request_id, approve=approve, reason=reason,
                       feedback=feedback, summary=summary, message_id=message_id)
    if as_json:
        output.emit_json(msg)
    else:
        print(f"sent {msg['type']} {msg['id']} to {msg['recipient']}")
    _warn_if_stopped(team, msg["recipient"])


def _warn_if_stopped(team: str, name: str) -> None:
    """Delivered, but nobody reads it until the member runs again: say so (CONTRACT §9)."""
    member = roster.find(roster.load(ws(), team), name)
    if member is not None and member["status"] in policy.GONE \
            and not roster.is_live(member):
        print(f"note: {name} is {member['status']}: the message waits in its inbox until it "
              f"is started again (`teamctl restart {team} {name}`)", file=sys.stderr)


def broadcast(team: TeamArg,
              content: Annotated[str, typer.Argument(help="Text, or - for standard input.",
                                                     show_default=False)],
              sender: Annotated[str | None, typer.Option(
                  help="Who sends it (default: the person: lead, or user beside an LLM "
                  "lead).", show_default=False)] = None,
              message_id: Annotated[str | None, typer.Option(
                  "--id", help="The broadcast's id: run again after a crash, the command "
                  "delivers it once.", show_default=False)] = None,
              as_json: JsonOpt = False) -> None:
    """Send one message to every running member and the lead, except the sender.

    \b
    Example:
      teamctl broadcast shop 'Code freeze at 17:00'
      teamctl broadcast shop --id freeze-1 'Code freeze at 17:00'
    """
    copies = actions.broadcast(ws(), team, _read_content(content), sender=sender,
                               message_id=message_id)
    if as_json:
        output.emit_json(copies)
    else:
        names = ", ".join(c["recipient"] for c in copies)
        print(f"broadcast {copies[0]['id']} to {names}")


def _print_messages(msgs: list[Json], as_json: bool) -> None:
    if as_json:
        for m in msgs:
            print(files.dumps_line(m).decode(), end="")
        return
    for m in msgs:
        kind = "" if m["type"] == "message" else f" [{m['type']}]"
        extra = f" (request {m['request_id']})" if m.get("request_id") else ""
        print(output.when(m.get("timestamp")) + " " + output.safe(
            f"{m['sender']} → {m['recipient']}{kind}{extra}: {m['content']}"))


def _shown_types(types: list[str] | None, no_idle: bool) -> Callable[[Json], bool]:
    """Which messages `inbox` prints: of `types` (all without), less idle notifications
    with `no_idle`. An unknown type is bad input."""
    for kind in types or []:
        if kind not in inbox.TYPES:
            raise BadInput(f"--type {kind!r}: not a message type; one of "
                           f"{', '.join(inbox.TYPES)}{suggest.did_you_mean(kind, [*inbox.TYPES])}")

    def shown(m: Json) -> bool:
        if no_idle and m["type"] == "idle_notification":
            return False
        return not types or m["type"] in types

    return shown


def inbox_cmd(
    team: TeamArg,
    name: Annotated[str | None, typer.Argument(
        help="Whose inbox (default: the person's: lead's, or user's beside an LLM lead).",
        show_default=False, autocompletion=complete.recipient)] = None,
    peek: Annotated[bool, typer.Option("--peek", help="Show without taking.")] = False,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep showing new ones.")
                      ] = False,
    types: Annotated[list[str] | None, typer.Option(
        "--type", metavar="T", help="Print only messages of this type (repeatable): message, "
        "permission_request, plan_approval_request, member_failed, …", show_default=False)
    ] = None,
    no_idle: Annotated[bool, typer.Option(
        "--no-idle", help="Print no idle_notification.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON message per line.")
                       ] = False,
) -> None:
    """Show an inbox. The person's is drained (printed, then cleared; history stays in
    events.jsonl): lead_inbox.jsonl, or user_inbox.jsonl in a team with an LLM lead. Any
    other inbox (a teammate's, an LLM lead's) is only peeked at. --type and --no-idle
    choose what is printed; the person's inbox is still drained whole. Ctrl-C ends
    --follow (exit 0).

    \b
    Examples:
      teamctl inbox shop --follow --no-idle
      teamctl inbox shop --type permission_request --type plan_approval_request
    """
    shown = _shown_types(types, no_idle)
    w = ws()
    name, mine = actions.inbox_owner(actions.require_team(w, team), name)
    drain = mine and not peek
    if not drain and not peek:
        why = "an LLM lead reads it" if name == LEAD else "it belongs to a teammate"
        print(f"note: only peeking: {why}", file=sys.stderr)
    def show(batch: list[Json]) -> None:
        _print_messages([m for m in batch if shown(m)], as_json)
        sys.stdout.flush()

    seen: set[str] = set()
    try:
        with w.store.changes([team], kinds=frozenset({Kind.INBOX})) as feed:
            while True:
                feed.drain()  # before the look: a line landing after it wakes the wait
                if drain:
                    # print, then clear: a message leaves the inbox only once it is shown
                    msgs = inbox.drain(w, team, name, show)
                else:
                    msgs = [m for m in inbox.peek(w, team, name) if m["id"] not in seen]
                    seen.update(m["id"] for m in msgs)
                    show(msgs)
                if not follow:
                    if not msgs and not as_json:
                        print(f"{name}'s inbox is empty", file=sys.stderr)
                    return
                feed.wait(None)
    except KeyboardInterrupt:
        if not follow:
            raise
        # Ctrl-C ends a follow: exit 0, like `logs -f` (a wait would be 130). A drain cut
        # short leaves its batch in the inbox (it is cleared only once shown)
