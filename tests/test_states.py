"""The states as one table (teamd.states): who may move a member from which status to which
(CONTRACT §4, "who writes what"). Every legal edge moves and says so; a sample of illegal
ones is refused and changes nothing; the strings on disk stay the contract's."""

from __future__ import annotations

import json

import pytest

from teamd import events, roster
from teamd.layout import Workspace
from teamd.states import (
    ANY,
    LIVE,
    TABLE,
    Desired,
    IllegalMove,
    Move,
    Status,
    Writer,
    journal,
    transition,
)

LEGAL = [(writer, before, after) for writer, row in TABLE.items()
         for after, sources in row.items() for before in sorted(sources) if before != after]


def test_each_writer_writes_only_its_own_statuses() -> None:
    """Section 4: teamctl and the lead's tools write `shutdown` (for a member that is not
    live) and `pending` (a restart with no supervisor); teamd its six; the teammate its
    five."""
    assert set(TABLE[Writer.CONTROL]) == {Status.SHUTDOWN, Status.PENDING}
    assert set(TABLE[Writer.TEAMD]) == {Status.PENDING, Status.STARTING, Status.SLEEPING,
                                        Status.BACKOFF, Status.FAILED, Status.SHUTDOWN}
    assert set(TABLE[Writer.MEMBER]) == {Status.ACTIVE, Status.IDLE, Status.WAITING,
                                         Status.PAUSED, Status.STOPPING}
    # every status is written by someone
    assert set().union(*TABLE.values()) == ANY


@pytest.mark.parametrize(("writer", "before", "after"), LEGAL,
                         ids=[f"{w.name}:{b}->{a}" for w, b, a in LEGAL])
def test_every_legal_edge_moves(writer: Writer, before: Status, after: Status) -> None:
    member = {"name": "alice", "status": str(before)}
    assert transition(member, after, writer) == (before, after)
    assert member["status"] == after


ILLEGAL = [
    (Writer.MEMBER, Status.SHUTDOWN, Status.ACTIVE),  # a stopped member does not come back
    (Writer.MEMBER, Status.FAILED, Status.IDLE),
    (Writer.MEMBER, Status.SLEEPING, Status.ACTIVE),  # teamd forks it first (starting)
    (Writer.MEMBER, Status.ACTIVE, Status.SHUTDOWN),  # teamd's, after the exit
    (Writer.MEMBER, Status.IDLE, Status.STARTING),
    (Writer.TEAMD, Status.ACTIVE, Status.IDLE),  # the teammate's own
    (Writer.TEAMD, Status.IDLE, Status.STOPPING),
    (Writer.TEAMD, Status.SLEEPING, Status.WAITING),
    (Writer.TEAMD, Status.STARTING, Status.ACTIVE),  # the teammate says when it is at work
    (Writer.TEAMD, Status.PENDING, Status.PAUSED),
    (Writer.CONTROL, Status.ACTIVE, Status.IDLE),
    (Writer.CONTROL, Status.IDLE, Status.PENDING),  # restart of a live member: teamd's
    (Writer.CONTROL, Status.SLEEPING, Status.STARTING),
    (Writer.CONTROL, Status.PENDING, Status.BACKOFF),
]


@pytest.mark.parametrize(("writer", "before", "after"), ILLEGAL,
                         ids=[f"{w.name}:{b}->{a}" for w, b, a in ILLEGAL])
def test_an_illegal_edge_is_refused_and_changes_nothing(writer: Writer, before: Status,
                                                        after: Status) -> None:
    member = {"name": "alice", "status": str(before)}
    with pytest.raises(IllegalMove, match=f"from {before} to {after}"):
        transition(member, after, writer)
    assert member == {"name": "alice", "status": str(before)}


def test_a_status_already_there_is_no_move() -> None:
    for writer, row in TABLE.items():
        for after in row:
            assert transition({"status": str(after)}, after, writer) is None


def test_the_member_moves_only_while_its_process_runs() -> None:
    """The teammate writes only from a status its own process can be in (or `pending`,
    its status file written again by teamd after a hand deletion); teamd's reading of a
    fork or an exit stands whatever the status last said (a member short of space may not
    have written its own)."""
    for sources in TABLE[Writer.MEMBER].values():
        assert sources == LIVE | {Status.PENDING}
    for sources in TABLE[Writer.TEAMD].values():
        assert sources == ANY


def test_the_strings_on_disk_are_the_contracts() -> None:
    assert roster.STATUSES == ("pending", "starting", "active", "idle", "waiting", "paused",
                               "sleeping", "stopping", "shutdown", "backoff", "failed")
    assert roster.RUNNING_STATUSES == ("starting", "active", "idle", "waiting", "paused",
                                       "stopping")
    assert json.dumps({"status": Status.IDLE, "desired": Desired.STOPPED}) == \
        '{"status": "idle", "desired": "stopped"}'


def test_journal_writes_one_status_event_per_move(ws: Workspace, team: str) -> None:
    member = {"name": "alice", "status": "idle"}
    move = transition(member, Status.ACTIVE, Writer.MEMBER)
    assert move == Move("idle", Status.ACTIVE)
    journal(ws, team, "alice", move)
    journal(ws, team, "alice", None)  # no move: nothing
    journal(ws, team, "alice", transition(member, Status.ACTIVE, Writer.MEMBER))
    moved = [e for e in events.read(ws, team) if e["event"] == "status"]
    assert [(e["member"], e["from"], e["to"]) for e in moved] == [("alice", "idle", "active")]
