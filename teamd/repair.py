"""What teamd puts right in the roster when it no longer says what is (issue 19, CONTRACT
§4, §7): a member's status file deleted by hand while its process runs is written back —
its pid from the process teamd holds, the rest as teamd last read it; a member that died
with an earlier supervisor (killed with -9) gets the `exited` no one journaled for it
(code and signal null, with `reason`) and leaves its running status, so `status` does not
show it `idle?` with its last process's errors. Which errors still hold once a process is
gone is `policy.error_holds`'s rule, shared with the exits teamd sees itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from teamd import events, policy, roster, states
from teamd.files import Json
from teamd.layout import Workspace
from teamd.processes import MemberProcess
from teamd.states import Status, Writer

log = logging.getLogger(__name__)

#: the `reason` of the `exited` journaled for a member that died with an earlier supervisor
DIED_UNSEEN = ("its process ended with no supervisor to record it (it died with an earlier "
               "teamd, killed before it could)")

#: the supervisor's `update_member` (roster.update_member, keeping its cached view fresh)
Update = Callable[[str, str, Callable[[Json, Json], Any]], Any]


class Repairs:
    """Kept by the supervisor: each member's live fields as last read while its record
    was whole (only members with a process of this supervisor's)."""

    def __init__(self, ws: Workspace, update_member: Update) -> None:
        self.ws = ws
        self.update_member = update_member
        self.known: dict[tuple[str, str], Json] = {}

    def amend(self, team: str, member: Json, process: MemberProcess | None,
              orphan: bool) -> Json:
        """`member` (as the reconcile read it) put right where it lies; returned as it
        now reads, for the decision that follows. What cannot be written now (a full
        disk) is left as it was and tried again at the next reconcile."""
        try:
            return self._amend(team, member, process, orphan)
        except Exception as exc:
            log.warning("%s/%s: cannot put its record right: %s", team, member["name"], exc)
            return member

    def _amend(self, team: str, member: Json, process: MemberProcess | None,
               orphan: bool) -> Json:
        key = (team, member["name"])
        if process is not None:
            if process.aborted:
                return member
            if member.get("pid") == process.pid:
                self.known[key] = dict(roster.status_of(member))
                return member
            return self.put_back(team, member, process)
        self.known.pop(key, None)
        if orphan or member.get("pid") is None or \
                member["status"] not in roster.RUNNING_STATUSES:
            return member
        return self.died_unseen(team, member)

    def put_back(self, team: str, member: Json, process: MemberProcess) -> Json:
        """Our process runs, but the roster does not name it (its status file was deleted
        by hand): write the file again."""
        name = member["name"]
        known = self.known.get((team, name))
        written: Json = {}

        def change(m: Json, config: Json) -> None:
            if m.get("pid") == process.pid:
                return  # put back meanwhile
            if known is not None and self.ws.store.read_state(team, name) is None:
                m.update({k: v for k, v in known.items() if k in roster.STATUS_FIELDS})
            m.update(pid=process.pid, pid_create_time=process.create_time,
                     started_at=process.started_at)
            written.update(m)

        self.update_member(team, name, change)
        if not written:
            return member
        log.warning("%s/%s: its status file no longer named its process (pid %d): written "
                    "again, status %s", team, name, process.pid, written["status"])
        return {**member, **roster.status_of(written)}

    def died_unseen(self, team: str, member: Json) -> Json:
        """The member's process is gone and no supervisor of ours saw it end: journal its
        exit, and leave it `pending` (what follows is decided as for any pending member)."""
        name, now = member["name"], time.time()
        written: Json = {}

        def change(m: Json, config: Json) -> None:
            if m.get("pid") != member.get("pid") or m["status"] not in \
                    roster.RUNNING_STATUSES or roster.is_live(m):
                return  # changed meanwhile
            m["last_exit"] = {"code": None, "signal": None, "at": now}
            if not policy.error_holds(m):
                m["last_error"] = None
            events.emit(self.ws, team, "exited", member=name, code=None, signal=None,
                        reason=DIED_UNSEEN)
            states.transition(m, Status.PENDING, Writer.TEAMD)
            written.update(m)

        self.update_member(team, name, change)
        if not written:
            return member
        log.info("%s/%s: pid %s %s", team, name, member.get("pid"), DIED_UNSEEN)
        return {**member, **roster.status_of(written)}
