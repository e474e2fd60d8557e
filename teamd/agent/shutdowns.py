"""A member's side of the shutdown handshake (CONTRACT §4 "Exits", §6 Shutdown): the
requests it was shown, answering on the agent's behalf when the agent cannot (idle, ended
its turn, waiting on a retry, a budget or a permission), and leaving with exit 0.

The agent answers a request it was shown itself (the `SendMessage` tool, for the built-in
one); whatever it does not answer, this answers for it.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from teamd import actions, inbox, requests, roster, states
from teamd.errors import TeamdError
from teamd.files import Json
from teamd.proc import EXIT_SHUTDOWN
from teamd.states import Desired, Status, Writer

if TYPE_CHECKING:
    from teamd.agent.member import Member

log = logging.getLogger(__name__)


class Leave(Exception):
    """Raised from a wait deep in a call (a retry, the shared back-off) when the member
    leaves: it has approved a shutdown, or its agent's own process died (a crash, `Waits.
    watch_agent`). It unwinds to `run_member`, which exits with `code`."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class Shutdowns:
    """One member's shutdown requests. `asks`: the request ids taken in (after a restart:
    those of the conversation still pending); `leaving`: a request that ended a wait for
    permission, approved once that tool call is recorded."""

    def __init__(self, member: Member) -> None:
        self.m = member
        self.asks: list[str] = self.shown_asks()
        self.leaving: str | None = None

    def shown_asks(self) -> list[str]:
        """Shutdown requests in the conversation that are still pending (after a restart
        the model may have seen one and not answered yet: the harness must still know)."""
        m = self.m
        asks = [msg["request_id"] for r in m.session.records if r["type"] == "inbox"
                for msg in r["messages"] if msg["type"] == "shutdown_request"
                and msg.get("request_id")]
        pending = []
        for rid in asks:
            try:
                if requests.get(m.ws, m.team, rid)["status"] == "pending":
                    pending.append(rid)
            except TeamdError:
                continue
        return pending

    def note(self, messages: list[Json]) -> list[str]:
        """Remember the shutdown requests among messages taken in; their ids."""
        found = [msg["request_id"] for msg in messages
                 if msg["type"] == "shutdown_request" and msg.get("request_id")]
        self.asks.extend(found)
        return found

    def pending(self) -> str | None:
        """The first request taken in that nobody has answered yet."""
        m = self.m
        for rid in self.asks:
            if requests.get(m.ws, m.team, rid)["status"] == "pending":
                return rid
        return None

    def leave_if_asked(self, why: str) -> None:
        """Approve a pending shutdown request (one the model was shown, or one in the
        inbox) on the model's behalf, since it cannot answer now, and leave."""
        if self.inbox_has_request():
            self.m.take_in()
        rid = self.pending()
        if rid is not None:
            raise Leave(self.approve(rid, why))

    def inbox_has_request(self) -> bool:
        m = self.m
        if not m.intake.has_mail():
            return False
        return any(msg["type"] == "shutdown_request"
                   for msg in inbox.peek(m.ws, m.team, m.name))

    def approve(self, request_id: str, why: str) -> int:
        """The harness approves for the model; the answer goes to whoever asked."""
        m = self.m
        try:
            actions.approve_shutdown(m.ws, m.team, m.name, request_id, reason=why,
                                     pid=os.getpid())
        except TeamdError as exc:  # answered already (e.g. by the model): still leave
            log.info("shutdown %s: %s", request_id, exc)
        return self.leave()

    def leave(self) -> int:
        """Approved a shutdown: desired=stopped and status=stopping (already written with
        the approval by `actions.approve_shutdown`; again here for an approval that was
        refused as answered already), then exit 0."""
        m = self.m

        def change(config: Json) -> None:
            member = roster.find(config, m.name)
            if member is not None and member.get("pid") == os.getpid():
                member["desired"] = Desired.STOPPED
                states.transition(member, Status.STOPPING, Writer.MEMBER)

        roster.update(m.ws, m.team, change)
        return EXIT_SHUTDOWN
