"""What changed in a store, as typed values: the change feed's vocabulary.

The supervisor, a member waiting for news and `teamctl --wait` learn what happened from
`Change`s, never from file names: the files store decodes inotify events into them, the
PostgreSQL store (CONTRACT §15) will decode `LISTEN/NOTIFY` payloads into the same values.
A feed that lost changes (an inotify overflow, a dropped connection) says so, and the
reader reads everything again: nothing is missed, only re-read.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    TEAM = "team"          # a team came or went (its roster was created or removed)
    SPEC = "spec"          # config.json: what the members should be
    MEMBER = "member"      # one member's live state (members/{name}.json)
    INBOX = "inbox"        # one member's inbox was written or cut
    TASK = "task"          # one task was written or removed
    TASK_IDS = "task_ids"  # the board handed out a new id (`.highwatermark`)
    REQUEST = "request"    # a request record was opened or answered
    SPEND = "spend"        # the team's spend moved
    JOURNAL = "journal"    # a line was added to the team's journal
    SESSION = "session"    # a member's session (its conversation) was written


@dataclass(frozen=True)
class Change:
    """One thing that changed, in `team`; `name` is the member (SPEC, TEAM, TASK_IDS,
    SPEND, JOURNAL: None; TASK: the task id as text; REQUEST: the request id)."""

    kind: Kind
    team: str
    name: str | None = None

    @property
    def task_id(self) -> int | None:
        if self.kind is Kind.TASK and self.name is not None and self.name.isdigit():
            return int(self.name)
        return None
