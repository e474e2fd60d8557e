"""The states as one table (teamd.states): who may move a member from which status to which
(CONTRACT §4, "who writes what"). Every legal edge moves and says so; a sample of illegal
ones is refused and changes nothing; the strings on disk stay the contract's. Each move
journals one `status` event once its file is saved: none for a refused move, a move never
saved or a write that failed; a journal that fails leaves the status written."""

from __future__ import annotations

import errno
import json
from collections.abc import Callable

import pytest

from teamd import events, roster
from teamd.files import Json
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
    transition,
)
from tests.harness import file_size_limit, make_team

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


#: the moves CONTRACT §4 has each writer make, written out by hand (not derived from
#: TABLE): the edges the product cannot do without
CONTRACT_MOVES = [
    # teamd: a fork, a sleep, a crash, the crash-loop limit, a stop, its own stop
    (Writer.TEAMD, "pending", "starting"), (Writer.TEAMD, "idle", "sleeping"),
    (Writer.TEAMD, "sleeping", "starting"), (Writer.TEAMD, "active", "backoff"),
    (Writer.TEAMD, "backoff", "starting"), (Writer.TEAMD, "backoff", "failed"),
    (Writer.TEAMD, "stopping", "shutdown"), (Writer.TEAMD, "idle", "pending"),
    (Writer.TEAMD, "failed", "starting"), (Writer.TEAMD, "starting", "backoff"),
    # the teammate itself, while its process runs
    (Writer.MEMBER, "starting", "active"), (Writer.MEMBER, "starting", "idle"),
    (Writer.MEMBER, "active", "idle"), (Writer.MEMBER, "idle", "active"),
    (Writer.MEMBER, "active", "waiting"), (Writer.MEMBER, "waiting", "active"),
    (Writer.MEMBER, "active", "paused"), (Writer.MEMBER, "paused", "active"),
    (Writer.MEMBER, "idle", "stopping"), (Writer.MEMBER, "starting", "stopping"),
    (Writer.MEMBER, "paused", "stopping"), (Writer.MEMBER, "waiting", "stopping"),
    # teamctl and the lead's tools: a shutdown answered for a member with no process, and
    # a restart with no supervisor running
    (Writer.CONTROL, "sleeping", "shutdown"), (Writer.CONTROL, "backoff", "shutdown"),
    (Writer.CONTROL, "pending", "shutdown"), (Writer.CONTROL, "failed", "shutdown"),
    (Writer.CONTROL, "failed", "pending"), (Writer.CONTROL, "shutdown", "pending"),
    (Writer.CONTROL, "backoff", "pending"),
]


@pytest.mark.parametrize(("writer", "before", "after"), CONTRACT_MOVES)
def test_the_contracts_moves_are_in_the_table(writer: Writer, before: str, after: str
                                              ) -> None:
    member: Json = {"name": "alice", "status": before}
    assert transition(member, Status(after), writer) == Move(before, Status(after))


@pytest.mark.parametrize("writer", list(Writer))
@pytest.mark.parametrize("before", ["bogus", None, ""])
def test_a_status_no_teamd_writes_is_replaced_never_a_dead_end(writer: Writer,
                                                              before: str | None) -> None:
    """A hand edit, a missing field or another version's word: whoever may write the next
    status replaces it (a refusal here made teamd fork and abort a member in a loop)."""
    for after in TABLE[writer]:
        member: Json = {"name": "alice", "status": before}
        assert transition(member, after, writer) == Move(str(before), after)
        assert member["status"] == after


def test_the_strings_on_disk_are_the_contracts() -> None:
    assert roster.STATUSES == ("pending", "starting", "active", "idle", "waiting", "paused",
                               "sleeping", "stopping", "shutdown", "backoff", "failed")
    assert roster.RUNNING_STATUSES == ("starting", "active", "idle", "waiting", "paused",
                                       "stopping")
    assert json.dumps({"status": Status.IDLE, "desired": Desired.STOPPED}) == \
        '{"status": "idle", "desired": "stopped"}'


def status_events(ws: Workspace, team: str) -> list[tuple[str, str, str]]:
    return [(e["member"], e["from"], e["to"]) for e in events.read(ws, team)
            if e["event"] == "status"]


def to(status: Status, writer: Writer) -> Callable[[Json], Move | None]:
    return lambda member: transition(member, status, writer)


def test_every_write_of_a_move_journals_it_once(ws: Workspace) -> None:
    """`transition` journals its own `status` event, once the file that holds the status
    is saved, whichever writer saves it: a member's own update, teamd's (which reads the
    spec), a person's roster step, a step that saves at a point of its own."""
    team = make_team(ws, None, "alice", "bob")
    roster.update_status(ws, team, "alice", to(Status.SHUTDOWN, Writer.CONTROL))
    roster.update_member(ws, team, "alice", lambda m, _: transition(m, Status.STARTING,
                                                                      Writer.TEAMD))
    with roster.locked(ws, team) as config:
        transition(roster.get(config, "bob"), Status.SHUTDOWN, Writer.CONTROL)
        assert status_events(ws, team)[-1][0] == "alice"  # not before it is written
    with roster.held(ws, team) as config:
        transition(roster.get(config, "alice"), Status.IDLE, Writer.MEMBER)
        roster.save(ws, team, config)
        assert roster.load(ws, team, only="alice")["members"][0]["status"] == "idle"
    roster.update_status(ws, team, "alice", to(Status.IDLE, Writer.MEMBER))  # there already
    roster.update_status(ws, team, "bob", lambda m: m.update(last_error="x"))  # no move
    assert status_events(ws, team) == [("alice", "pending", "shutdown"),
                                       ("alice", "shutdown", "starting"),
                                       ("bob", "pending", "shutdown"),
                                       ("alice", "starting", "idle")]
    # a move made by hand on a record no writer saves journals nothing
    assert transition({"name": "carol", "status": "idle"}, Status.ACTIVE, Writer.MEMBER)
    assert len(status_events(ws, team)) == 4


def test_a_refused_move_or_an_unsaved_one_journals_nothing(ws: Workspace) -> None:
    team = make_team(ws, None, "alice")
    with pytest.raises(IllegalMove):
        roster.update_status(ws, team, "alice", to(Status.FAILED, Writer.MEMBER))

    def then_fail(member: Json) -> None:
        transition(member, Status.SHUTDOWN, Writer.CONTROL)
        raise RuntimeError("the step fails after the move")

    with pytest.raises(RuntimeError):
        roster.update_status(ws, team, "alice", then_fail)
    with roster.held(ws, team) as config:  # held and never saved
        transition(roster.get(config, "alice"), Status.SHUTDOWN, Writer.CONTROL)
    assert roster.load(ws, team)["members"][0]["status"] == "pending"
    assert status_events(ws, team) == []


def test_a_status_write_that_fails_journals_nothing(ws: Workspace) -> None:
    """The status file cannot be written (EFBIG: over RLIMIT_FSIZE, while the journal has
    room): no `status` event for a move that is not on disk."""
    team = make_team(ws, None, "alice")
    limit = ws.store.paths.events(team).stat().st_size + 1024

    def big(member: Json) -> None:
        transition(member, Status.SHUTDOWN, Writer.CONTROL)
        member["last_error"] = "x" * 2 * limit  # the status file outgrows the limit

    with file_size_limit(limit):
        with pytest.raises(OSError) as failed:
            roster.update_status(ws, team, "alice", big)
        events.emit(ws, team, "probe")  # the journal had room all along
    assert failed.value.errno == errno.EFBIG
    assert roster.load(ws, team)["members"][0]["status"] == "pending"
    assert status_events(ws, team) == []
    assert events.read(ws, team)[-1]["event"] == "probe"


def test_a_journal_that_fails_leaves_the_status_written(ws: Workspace) -> None:
    """The journal cannot take the `status` event (EFBIG): the status stays as written and
    the writer goes on; nothing torn is left in the journal."""
    team = make_team(ws, None, "alice")
    status_file = ws.store.paths.member_status(team, "alice")
    while ws.store.paths.events(team).stat().st_size < 2 * status_file.stat().st_size:
        events.emit(ws, team, "padding", text="x" * 100)
    before = ws.store.paths.events(team).read_bytes()
    with file_size_limit(len(before)):  # any append fails; the small status file fits
        roster.update_status(ws, team, "alice", to(Status.SHUTDOWN, Writer.CONTROL))
    assert json.loads(status_file.read_text())["status"] == "shutdown"
    assert ws.store.paths.events(team).read_bytes() == before
