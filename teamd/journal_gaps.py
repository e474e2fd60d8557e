"""Journal lines a killed writer never wrote (CONTRACT §7, §17): a writer journals just
after it saves, so a process killed between the two writes leaves the change on disk and
no line for it. `teamd` looks for those gaps where they can happen and the writer cannot
mend them, and journals the line then, marked `"repaired": true`:

- a member's status move — at `teamd`'s start (every member: a writer killed with an
  earlier supervisor, or a `teamctl` killed meanwhile) and when it reaps a member's process
  (the member's own last move). The gap is the status differing from the `to` of its last
  `status` line (`pending` before the first);
- a task the member completed since it started whose `task_completed` line is missing —
  when it reaps the member's process;
- a member's removal (`teamctl remove` killed between the roster's write and its
  `member_removed` line) — by the next `remove` of that name, which finds it gone;
- a team's creation (`create` killed between `config.json` and its `team_created` line):
  a team whose journal holds no line at all — by the next `create` of that name, and by
  `teamd`'s start before it journals anything there.

Checked under the lock every writer holds from its save to its line (the roster and the
member's for a status, the board's for a task), so a change in flight is never taken for
a lost line.
"""

from __future__ import annotations

import logging

from teamd import board, events, roster
from teamd.errors import BadInput, TeamdError
from teamd.files import Json
from teamd.layout import Workspace

log = logging.getLogger(__name__)


def last_journaled(ws: Workspace, team: str, name: str) -> str:
    """The status `name`'s last `status` line moved it to (`pending` with none since it
    joined: a member of that name removed before is not this one)."""
    def mine(record: Json) -> bool:
        return record.get("event") in ("status", "member_added") \
            and record.get("member") == name

    last = next(events.stream(ws, team, match=mine, last=1), None)
    return str(last.get("to")) if last is not None and last["event"] == "status" \
        else "pending"


def mend(ws: Workspace, team: str, name: str) -> bool:
    """Journal `name`'s status move if its line was lost; whether one was. Trouble (the team
    gone, a broken file, no room) is logged: the next look tries again."""
    try:
        with roster.roster_lock(ws, team), roster.status_lock(ws, team, name):
            record = roster.read_status(ws, team, name)
            if record is None:
                return False
            now, before = str(record.get("status")), last_journaled(ws, team, name)
            if now == before:
                return False
            events.emit(ws, team, "status", member=name, repaired=True,
                        **{"from": before, "to": now})
            log.info("%s/%s: journaled its move %s -> %s, saved but never journaled",
                     team, name, before, now)
            return True
    except (BadInput, TeamdError, OSError) as exc:
        log.warning("%s/%s: cannot look for a status move never journaled: %s",
                    team, name, exc)
        return False


def mend_team(ws: Workspace, team: str) -> int:
    """`mend` every member of `team` that has a status file; how many lines were missing."""
    try:
        names = [m["name"] for m in roster.read_spec(ws, team)["members"]]
    except (BadInput, TeamdError) as exc:
        log.warning("%s: cannot look for status moves never journaled: %s", team, exc)
        return 0
    return sum(mend(ws, team, name) for name in names)


def mend_tasks(ws: Workspace, team: str, name: str, since: float) -> int:
    """Journal `task_completed` for each task `name` completed since `since` (its process's
    start) that the journal does not have; how many were missing."""
    missing = 0
    try:
        with board.locked(ws, team):
            mine = [t for t in board.list_tasks(ws, team) if t["owner"] == name
                    and t["status"] == "completed" and (t["completed_at"] or 0) >= since]
            if not mine:
                return 0
            logged = {e.get("task_id") for e in events.stream(
                ws, team, match=lambda r: r.get("event") == "task_completed")}
            for task in mine:
                if task["id"] not in logged:
                    events.emit(ws, team, "task_completed", member=name, task_id=task["id"],
                                status="completed", repaired=True)
                    missing += 1
    except (BadInput, TeamdError, OSError) as exc:
        log.warning("%s/%s: cannot look for a task completion never journaled: %s",
                    team, name, exc)
    return missing


def mend_removal(ws: Workspace, team: str, name: str) -> bool:
    """Journal `member_removed` for `name` if it is out of the roster and its last
    `member_added` line has none after it (a `remove` killed between the two), and drop a
    status file the kill left; whether there was such a removal to finish. Under the
    roster lock `remove` holds from its write to its line."""
    def mine(record: Json) -> bool:
        return record.get("event") in ("member_added", "member_removed") \
            and record.get("member") == name

    with roster.held(ws, team) as config:
        if roster.find(config, name) is not None:
            return False
        last = next(events.stream(ws, team, match=mine, last=1), None)
        if last is None or last["event"] != "member_added":
            return False
        with ws.store.member_unit(team, name, create=False) as got:
            if got and ws.store.read_state(team, name) is not None:
                ws.store.drop_state(team, name)
        events.emit(ws, team, "member_removed", member=name, kind=last.get("kind"),
                    role=last.get("role", ""), repaired=True)
    return True


def mend_creation(ws: Workspace, team: str) -> bool:
    """Journal `team_created` (repaired) for `team` if its journal holds no line at all —
    every writer appends after rotating, so only a `create` killed before its line leaves
    one empty; whether it did. Under the roster lock `create` journals under."""
    try:
        with roster.held(ws, team) as config:
            if next(events.stream(ws, team), None) is not None:
                return False
            events.emit(ws, team, "team_created", description=config.get("description", ""),
                         repaired=True)
            return True
    except (BadInput, TeamdError) as exc:
        log.warning("%s: cannot look for a creation never journaled: %s", team, exc)
        return False
