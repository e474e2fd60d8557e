"""A member's statuses, and who may move it from which to which (CONTRACT §4, "who writes
what"), as one table; `transition`, the only way a status changes, checks each move
against it.

Three writers share a member's status: the control side (`teamctl` and the LLM lead's
tools), `teamd`, and the teammate itself (only while the roster's pid is its own). Each may
write only its own statuses, and only from the statuses the table lists; anything else is a
bug in the writer and raises. A move is made under the lock of the file that holds the
status (a read-modify-write) and journals itself: `transition` records it on the write it
is part of (`recording`, opened by the roster's writers), and the writer journals it, the
`status` event, right after the file is saved — so a write that fails or never happens
journals nothing, the journal's order is the writes', and a journal that cannot be written
leaves the status written. What the supervisor decides for each status (`policy.decide`)
is the other half of the states: this table says who may write them.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import NamedTuple

from teamd import events
from teamd.files import Json
from teamd.layout import Workspace
from teamd.records import Member

log = logging.getLogger(__name__)


class Status(enum.StrEnum):
    """What a member is right now (`members/{name}.json`'s `status`)."""

    PENDING = "pending"
    STARTING = "starting"
    ACTIVE = "active"
    IDLE = "idle"
    WAITING = "waiting"
    PAUSED = "paused"
    SLEEPING = "sleeping"
    STOPPING = "stopping"
    SHUTDOWN = "shutdown"
    BACKOFF = "backoff"
    FAILED = "failed"


class Desired(enum.StrEnum):
    """What a member should be (`config.json`'s `desired`)."""

    RUNNING = "running"
    STOPPED = "stopped"


class Writer(enum.Enum):
    CONTROL = "teamctl and the lead's tools"
    TEAMD = "teamd"
    MEMBER = "the teammate itself"


#: statuses in which a member has (or should have) a process of its own
LIVE = frozenset({Status.STARTING, Status.ACTIVE, Status.IDLE, Status.WAITING, Status.PAUSED,
                  Status.STOPPING})
ANY = frozenset(Status)

#: writer → the status it may write → the statuses it may move a member from
TABLE: dict[Writer, dict[Status, frozenset[Status]]] = {
    Writer.CONTROL: {
        # answering a shutdown for a member that is not live, or `stop --force` with no
        # supervisor: whatever its status says (a stale one included)
        Status.SHUTDOWN: ANY,
        # `restart` / `up` with no supervisor to fork it
        Status.PENDING: frozenset({Status.FAILED, Status.SHUTDOWN, Status.BACKOFF}),
    },
    # teamd's reading of a fork or an exit stands whatever the status last said: a member
    # short of space may not have written its own (a fork from anywhere, a restart taking
    # failed and shutdown too; an exit for a restart or as teamd stops, 75, a crash, the
    # crash-loop limit; a start held back for want of space; desired stopped)
    Writer.TEAMD: {to: ANY for to in (Status.STARTING, Status.PENDING, Status.SLEEPING,
                                      Status.BACKOFF, Status.FAILED, Status.SHUTDOWN)},
    Writer.MEMBER: {
        # its own process runs: from what it or teamd wrote since the fork (pending: its
        # status file, deleted by hand, written again by teamd)
        to: LIVE | {Status.PENDING}
        for to in (Status.ACTIVE, Status.IDLE, Status.WAITING, Status.PAUSED, Status.STOPPING)
    },
}


class Move(NamedTuple):
    """A status that changed: (from, to)."""

    before: str
    after: Status


class IllegalMove(AssertionError):
    """A writer moved a member along an edge the table does not have: a bug."""


#: every status a teamd writes; anything else (a hand edit, a missing field, another
#: version's word) is replaced by whoever may write the next one, never a dead end
KNOWN = frozenset(s.value for s in Status)


def allowed(writer: Writer, before: str, after: Status) -> bool:
    """May `writer` move a member from `before` to `after`?"""
    sources = TABLE[writer].get(after)
    return sources is not None and (before in sources or before not in KNOWN)


def transition(member: Member | Json, to: Status, writer: Writer) -> Move | None:
    """Move `member` (its record, read under its lock) to status `to` on `writer`'s behalf;
    the move, or None when it was there already. A move the table does not allow raises
    `IllegalMove`. The move is recorded on the write under way (`recording`), which
    journals it once the record is saved."""
    before = member.get("status")
    if before == to:
        return None
    if not allowed(writer, str(before), to):
        raise IllegalMove(f"{writer.value} may not move {member.get('name')!r} from "
                          f"{before} to {to}")
    member["status"] = to
    move = Move(str(before), to)
    _record(member, move)
    return move


#: the moves `transition` made during the write under way, with the name on each record
#: (None on a status file's own, which the writer names)
Moves = list[tuple[str | None, Move]]
_RECORDING: ContextVar[Moves | None] = ContextVar("status_moves", default=None)


@contextmanager
def recording() -> Iterator[Moves]:
    """The moves `transition` makes inside the block, for the write that saves them to
    journal (`journal`). Moves of a write that raises or never saves are dropped with it;
    an inner recording keeps its own."""
    moves: Moves = []
    token = _RECORDING.set(moves)
    try:
        yield moves
    finally:
        _RECORDING.reset(token)


def _record(member: Member | Json, move: Move) -> None:
    moves = _RECORDING.get()
    if moves is not None:
        moves.append((member.get("name"), move))


def journal(ws: Workspace, team: str, moves: Moves | None = None,
            member: str | None = None) -> None:
    """Journal the `status` event of each move just saved (those of the recording under
    way, by default; of `member`'s record, if given), and forget it. Called by the writer
    that saved them, never by hand. A journal that cannot be written is logged: the status
    stands as written."""
    moves = _RECORDING.get() if moves is None else moves
    while moves:
        recorded, (before, after) = moves.pop(0)
        name = member or recorded
        try:
            events.emit(ws, team, "status", member=name, **{"from": before, "to": after})
        except OSError as exc:
            log.error("%s/%s: status %s written, but not journaled: %s", team, name,
                      after, exc)
