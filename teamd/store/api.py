"""The store seam: one interface for everything CONTRACT §3–7 and §11–12 keep.

Every record is the JSON document the contract names (a roster, a member's state, a task, a
message, a request, a journal line, a session record); the store decides where it lives and
how a step is made whole. The files store (`teamd.store.files`) keeps them under `.teams/`
and `.tasks/` as section 2 lays out; the PostgreSQL store of section 15 will keep the same
documents in tables. Nothing outside a store builds a path there, takes a lock there, or
stats, globs or renames there: the domain modules (`teamd.roster`, `teamd.board`,
`teamd.inbox`, `teamd.requests`, `teamd.events`, `teamd.budget`, `teamd.ratelimit`,
`teamd.calls`, `teamd.pidfile`, …) keep the rules and reach the records only through here.

A **unit of work** is a context manager: what is written inside it is one step for every
reader (files: under the lock that readers of the step take; a database: one transaction).
Units nest in the contract's lock order (roster → member → board → request → spend →
journal); a unit the calling process already holds is entered again without waiting.

The contract test suite (`tests/store/`) holds every store to these promises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from teamd.linescan import Judge
from teamd.store.changes import Change, Kind

Json = dict[str, Any]


class Feed(Protocol):
    """A change feed (`Store.changes`): what changed since the last `drain`, without
    polling where the store can push. Armed before the caller's final check of what it
    waits for, so nothing slips between the check and the wait."""

    @property
    def polling(self) -> bool:
        """True when the store cannot push (no inotify): `wait` then returns every
        `poll_fallback` seconds and the caller re-checks."""

    def fileno(self) -> int:
        """A descriptor that is readable when changes are waiting (for `select`)."""

    def watch(self, team: str) -> None:
        """Also report the changes of `team` (one made after the feed was opened)."""

    def unwatch(self, team: str) -> None:
        """Stop reporting the changes of `team` (deleted)."""

    def drain(self) -> tuple[list[Change], bool]:
        """The changes waiting, and whether some were lost (then read everything again).
        Nothing when `polling`."""

    def wait(self, timeout: float | None, also: Sequence[int] = ()) -> bool:
        """Block until a change, a descriptor of `also` is readable, or `timeout`; True
        if something happened. Drains nothing."""

    def close(self) -> None: ...

    def __enter__(self) -> Feed: ...

    def __exit__(self, *exc: object) -> None: ...


class Store(Protocol):
    """Where a workspace's records live. One per root (`Workspace.store`)."""

    # -- the store itself --------------------------------------------------------------
    #: shown to people and in `status --json` (`files`, or a URL with its password masked)
    description: str

    def changes(self, teams: Sequence[str] | None = None, *, kinds: frozenset[Kind] | None = None,
                poll_fallback: float = 0.5) -> Feed:
        """A feed of the changes of `teams` (None: every team), only of `kinds` when given.
        A team coming or going is a TEAM change (of `teams` only, when given): read it
        again whole, since what was written in it before it was reported may not be
        reported one by one; from that report on, its changes are."""

    def wait_for(self, teams: Sequence[str], check: Callable[[], Any], timeout: float,
                 tick: float = 0.5) -> Any:
        """check()'s first truthy value, re-checked on every change of `teams` and at least
        every `tick` seconds; falsy at the deadline."""

    # -- teams (CONTRACT §2, §9 create/delete) -------------------------------------------
    def team_names(self) -> list[str]:
        """Teams that exist (a roster was written), sorted."""

    def team_exists(self, team: str) -> bool: ...

    def describe_team(self, team: str) -> str:
        """Where the team is, for a message to a person (files: its folder)."""

    def create_team(self, team: str, roster: Json, spend: Json) -> bool:
        """Make the team with its first roster and spend (the spend first: a team always
        has one); False (nothing written) when it exists already. BadInput, naming it,
        when a deleted team's board is left over (CONTRACT §17)."""

    def delete_team(self, team: str, last: Json, *, purge: bool) -> str | None:
        """Remove the team in one step for readers, inside its roster unit: `last` (the
        `team_deleted` line, its `ts` the archive's stamp) ends its journal, its board
        goes first (CONTRACT §17), then its records; with `purge` nothing is kept, else
        the journal, roster, sessions, transcripts, logs and board are archived. Returns
        where the archive is (shown to people), or None. TeamdError or FileNotFoundError
        when the team went meanwhile."""

    def archives(self, team: str) -> list[str]:
        """The archives of deleted teams called `team`, oldest first (for `logs`): where
        each is (files: its folder's absolute path)."""

    # -- the roster (CONTRACT §4) ------------------------------------------------------
    def roster_unit(self, team: str) -> AbstractContextManager[bool]:
        """The roster's unit of work; yields False, holding nothing, when the team does
        not exist."""

    def member_unit(self, team: str, name: str, *, create: bool = True
                    ) -> AbstractContextManager[bool]:
        """Member `name`'s unit of work (after the roster's); yields False, holding
        nothing, when the team does not exist, or when `create` is False and the member
        has no state yet (the hot path: nothing is made, nothing but the unit is read)."""

    def read_spec(self, team: str) -> Json | None:
        """`config.json` as stored (any schema), or None when the team does not exist."""

    def describe_spec(self, team: str) -> str:
        """Where the team's roster is, for a message to a person (files: its path)."""

    def write_spec(self, team: str, doc: Json) -> None: ...

    def read_state(self, team: str, name: str) -> Json | None:
        """`members/{name}.json`, or None."""

    def write_state(self, team: str, name: str, doc: Json) -> None: ...

    def drop_state(self, team: str, name: str) -> None: ...

    def keep_removed(self, team: str, name: str, stamp: str) -> str | None:
        """Put a removed member's inbox, then its session, aside for a person to read
        (`stamp`: `teamd.names.stamp`); where, or None when it had neither."""

    def removed(self, team: str, name: str) -> list[str]:
        """Where `keep_removed` kept what it kept of members called `name`, oldest first."""

    # -- the board (CONTRACT §5) -------------------------------------------------------
    def board_unit(self, team: str) -> AbstractContextManager[None]:
        """The board's unit of work: task writes and new ids inside it are one step."""

    def task_ids(self, team: str) -> list[int]: ...

    def read_task(self, team: str, task_id: int) -> Json | None: ...

    def write_task(self, team: str, task: Json) -> None: ...

    def next_task_id(self, team: str) -> int:
        """A new id, durably handed out (never again, even after its task is gone)."""

    def top_task_id(self, team: str) -> int:
        """The highest id handed out so far (0 for none)."""

    # -- inboxes (CONTRACT §3) ---------------------------------------------------------
    def deliver(self, team: str, name: str, messages: Sequence[Json]) -> None:
        """Append `messages` to `name`'s inbox as one step (all or none)."""

    def has_mail(self, team: str, name: str) -> bool: ...

    def inbox_size(self, team: str, name: str) -> tuple[int, float] | None:
        """(size, mtime) of the inbox, a cheap "did it change" (None: no inbox)."""

    def peek(self, team: str, name: str, judge: Judge) -> list[Json]: ...

    def take(self, team: str, name: str, consume: Callable[[list[Json]], None],
             judge: Judge, *, keep: Callable[[Json], bool] | None = None) -> list[Json]:
        """The exactly-once take: hand the inbox's messages (those `keep` takes) to
        `consume`, which records them durably, then remove them; refused lines are moved
        aside. A crash before `consume` returns loses nothing; after it, nothing is taken
        twice."""

    def wait_unlocked_inbox(self, team: str, name: str) -> None:
        """Block until no sender is mid-write on the inbox (for the taker's quick retry)."""

    # -- requests (CONTRACT §6) --------------------------------------------------------
    def request_unit(self, team: str, request_id: str) -> AbstractContextManager[None]: ...

    def create_request(self, team: str, doc: Json) -> bool:
        """Store a new request record; False if one with its id exists (nothing written)."""

    def read_request(self, team: str, request_id: str) -> Json | None: ...

    def write_request(self, team: str, doc: Json) -> None:
        """Replace a request record, inside its unit."""

    def list_requests(self, team: str) -> list[Json]: ...

    # -- permissions answered "always" (CONTRACT §11) ---------------------------------
    def always_rules(self, team: str) -> list[str]: ...

    def add_always(self, team: str, rule: str) -> bool:
        """Add a rule to the team's "always" list; False if it was there."""

    # -- the journal (CONTRACT §7) -----------------------------------------------------
    def emit(self, team: str, records: Sequence[Json]) -> None:
        """Append journal lines as one step."""

    def read_journal(self, team: str) -> list[Json]: ...

    def stream_journal(self, team: str | Path, *, match: Callable[[Json], bool] | None = None,
                       last: int | None = None, since: float | None = None,
                       follow: bool = False, stop: Callable[[], bool] | None = None
                       ) -> Iterator[Json]:
        """The journal's lines in order (the last `last`, or since `since`), and with
        `follow` the ones added after, across rotation (`logs -f`)."""

    # -- sessions and transcripts (CONTRACT §6, §8) -----------------------------------
    def read_session(self, team: str, name: str, *, mend: bool = False) -> list[Json]:
        """The member's session records; with `mend`, a torn or bad line is moved aside
        first (only the member itself mends its session)."""

    def append_session(self, team: str, name: str, records: Sequence[Json]) -> None:
        """Durably append session records (fsynced before anything depends on them)."""

    def keep_transcript(self, team: str, name: str, stamp: str, records: Sequence[Json]) -> str:
        """Keep the conversation a compaction replaced, whole; where it went."""

    def follow_session(self, team: str, name: str) -> Iterator[list[Json]]:
        """New session records as they are appended (`attach`), across the member's
        restarts."""

    # -- spend (CONTRACT §12) ----------------------------------------------------------
    def read_spend(self, team: str) -> Json | None: ...

    def add_spend(self, team: str, change: Callable[[Json | None], Json]) -> Json:
        """Read-modify-write the team's spend as one step; the new document."""

    # -- the root's shared back-off and call slots (CONTRACT §12) ----------------------
    def read_backoff(self) -> Json | None: ...

    def update_backoff(self, change: Callable[[Json | None], Json | None]) -> None: ...

    def call_slot(self, limit: int, between: Callable[[], None] | None = None
                  ) -> AbstractContextManager[int]:
        """Hold one of `limit` call slots for one model call; freed when the holder dies."""

    # -- the supervisor (CONTRACT §2, §9) ----------------------------------------------
    def claim_supervisor(self, info: Json) -> Any:
        """Become the root's one supervisor and store its record `info` (a handle to keep,
        released when the process dies), or None when another holds the claim."""

    def supervisor_info(self) -> Json | None:
        """The supervisor's record as last written, or None (whether its process still
        runs is for the reader to check: `teamd.pidfile.running`)."""

    def write_supervisor_info(self, info: Json) -> None: ...

    def release_supervisor(self, handle: Any) -> None:
        """The record goes, then the claim."""

    def read_paged(self, team: str) -> Json | None:
        """Ids the `person_needed` hook already ran for (teamd's own record)."""

    def write_paged(self, team: str, doc: Json) -> None: ...
