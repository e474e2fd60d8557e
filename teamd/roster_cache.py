"""The roster as teamd keeps it in memory: re-read only where the change feed named a change.

This module owns `Cached`, the supervisor's view of one team's roster (CONTRACT §4, the
scale issue): the same merged roster `roster.load` reads, at a reconcile cost in
proportion to what changed rather than to the size of the team. Reading and writing the
roster's files are `teamd.roster`'s.
"""

from __future__ import annotations

from teamd import roster
from teamd.files import Json
from teamd.layout import Workspace
from teamd.records import MemberStatus


class Cached:
    """A team's roster kept in memory by teamd and re-read only where a file changed, so a
    reconcile costs in proportion to what changed, not to the size of the team (CONTRACT §4,
    scale issue). The owner says what the change feed named — the spec (`spec_changed`) or
    one member's state (`member_changed`) — and `load` re-reads just that, under the
    roster lock like `roster.load`. A changed spec re-reads every member's state too: a
    two-record step writes the spec first, so its state half may still be queued as an
    unread change, and a fresh spec beside a stale state is the half-done step `load` is
    careful never to show."""

    def __init__(self, ws: Workspace, team: str) -> None:
        self.ws, self.team = ws, team
        self.spec: Json | None = None
        self.status: dict[str, MemberStatus | None] = {}
        self.stale: set[str] = set()

    def spec_changed(self) -> None:
        self.spec = None

    def member_changed(self, name: str) -> None:
        self.stale.add(name)

    def load(self) -> Json:
        """The merged roster, as `load(ws, team)` would read it now."""
        with roster.roster_lock(self.ws, self.team):
            if self.spec is None:
                self.spec = roster.read_spec(self.ws, self.team)
                self.status.clear()
            for m in self.spec["members"]:
                name = m["name"]
                if name in self.stale or name not in self.status:
                    self.status[name] = roster.read_status(self.ws, self.team, name)
            self.stale.clear()
            if len(self.status) > len(self.spec["members"]):  # members removed meanwhile
                kept = {m["name"] for m in self.spec["members"]}
                self.status = {n: s for n, s in self.status.items() if n in kept}
            return {**self.spec, "members": [roster.merge(m, self.status[m["name"]])
                                             for m in self.spec["members"]]}
