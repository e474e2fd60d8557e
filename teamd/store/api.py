"""The store seam: one interface for everything CONTRACT §3–7 and §11–12 keep.

Every record is the JSON document the contract names (a roster, a member's state, a task, a
message, a request, a journal line, a session record); the store decides where it lives and
how a step is made whole. The files store (`teamd.store.files`) keeps them under `.teams/`
and `.tasks/` as section 2 lays out; the PostgreSQL store of section 15 will keep the same
documents in tables. Nothing outside a store builds a path there, takes a lock there, or
stats, globs or renames there: the domain modules (`teamd.roster`, `teamd.board`,
`teamd.inbox`, `teamd.requests`, `teamd.events`, `teamd.budget`, `teamd.ratelimit`,
`teamd.permissions`, `teamd.pidfile`, …) keep the rules and reach the records only through here.

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
from teamd.store.changes import Change

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
        """The changes waiting, and whether some were lost (then read everything again)."""

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

    def changes(self, teams: Sequence[str] | None = None, *, kinds: frozenset[Any] | None = None,
                poll_fallback: float = 0.5) -> Feed:
        """A feed of the changes of `teams` (None: every team, and teams coming and going),
        only of `kinds` when given."""

    def wait_for(self, teams: Sequence[str], check: Callable[[], Any], timeout: float,
                 tick: float = 0.5) -> Any:
        """check()'s first truthy value, re-checked on every change of `teams` and at least
        every `tick` seconds; falsy at the deadline."""

    # -- teams (CONTRACT §2, §9 create/delete) -------------------------------------------
    def team_names(self) -> list[str]:
        """Teams that exist (a roster was written), sorted."""

    def team_exists(self, team: str) -> bool: ...

    def create_team(self, team: str, roster: Json, spend: Json) -> bool:
        """Make the team with its first roster and spend; False (nothing written) when it
        exists already. BadInput when a deleted team's board is left over."""

    def delete_team(self, team: str, last: Json, *, purge: bool) -> str | None:
        """Remove the team in one step for readers: `last` (the `team_deleted` line) ends
        its journal, its board goes first, then its records; with `purge` nothing is
        kept, else the journal, sessions and transcripts are archived. Returns where the
        archive is (shown to people), or None."""

    def archives(self, team: str) -> list[str]:
        """The archives of deleted teams called `team`, oldest first (for `logs`)."""

    # -- the roster (CONTRACT §4) ------------------------------------------------------
    def roster_unit(self, team: str) -> AbstractContextManager[None]:
        """The roster's unit of work; BadInput if the team does not exist."""

    def member_unit(self, team: str, name: str, *, create: bool = True
                    ) -> AbstractContextManager[bool]:
        """Member `name`'s unit of work (after the roster's); yields False, holding
        nothing, when `create` is False and the member has no state yet."""

    def read_spec(self, team: str) -> Json | None:
        """`config.json` as stored (any schema), or None when the team does not exist."""

    def write_spec(self, team: str, doc: Json) -> None: ...

    def read_state(self, team: str, name: str) -> Json | None:
        """`members/{name}.json`, or None."""

    def write_state(self, team: str, name: str, doc: Json) -> None: ...

    def drop_state(self, team: str, name: str) -> None: ...

    def keep_removed(self, team: str, name: str, stamp: str) -> str | None:
        """Put a removed member's session and inbox aside for a person to read; where."""

    def removed(self, team: str, name: str) -> list[str]:
        """What `keep_removed` kept of members called `name`, oldest first."""

    # -- the board (CONTRACT §5) -------------------------------------------------------
    def board_exists(self, team: str) -> bool:
        """The team has a board (it goes first when a team is deleted: CONTRACT §17)."""

    def board_unit(self, team: str) -> AbstractContextManager[None]:
        """The board's unit of work: task writes and new ids inside it are one step, and
        no other unit of the board runs meanwhile. TeamdError when there is no board."""

    def task_ids(self, team: str) -> list[int]:
        """The ids of the board's tasks, ascending, found without reading them ([] when
        there is no board)."""

    def read_task(self, team: str, task_id: int) -> Json | None:
        """Task `task_id`, or None when there is none; BadRecord (teamd.store.errors) when
        what is kept under that id is not a task of that id (a hand edit: tasks are
        written whole)."""

    def write_task(self, team: str, task: Json) -> None:
        """Add or replace the task of `task["id"]`, inside the board's unit."""

    def next_task_id(self, team: str) -> int:
        """A new id, durably handed out before any task of it is written (never again,
        even after its task is gone), inside the board's unit."""

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
    def request_unit(self, team: str, request_id: str) -> AbstractContextManager[bool]:
        """The request's unit of work, for a compare-and-set of its record; yields False
        when there is no such request (nothing is created for it). BadInput for an id
        that cannot be one."""

    def create_request(self, team: str, doc: Json) -> bool:
        """Store a new request record (its id is `doc["request_id"]`) as one step; False
        if one with its id exists (nothing written)."""

    def read_request(self, team: str, request_id: str) -> Json | None:
        """The record, or None; BadRecord when what is kept is not a record."""

    def write_request(self, team: str, doc: Json) -> None:
        """Replace a request record, inside its unit."""

    def list_requests(self, team: str) -> list[Json]:
        """Every request record of the team, in no set order; one that cannot be read is
        skipped and named in the log (a hand edit must not stop the team)."""

    # -- permissions answered "always" (CONTRACT §11) ---------------------------------
    def always_rules(self, team: str) -> list[str]:
        """The rules `add_always` added, oldest first; BadRecord when they cannot be read."""

    def add_always(self, team: str, rule: str) -> bool:
        """Add a rule to the team's "always" list as one step; False if it was there."""

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
    def read_spend(self, team: str) -> Json | None:
        """`{"schema", "spent_usd"}`, or None; BadRecord when it cannot be read."""

    def add_spend(self, team: str, change: Callable[[Json | None], Json]) -> Json:
        """Read-modify-write the team's spend as one step (no two at once lose one):
        `change` gets the document, or None when there is none or it cannot be read
        (said in the log); returns what it made, now stored."""

    # -- the root's shared back-off and call slots (CONTRACT §12) ----------------------
    def read_backoff(self) -> tuple[Json, float] | None:
        """The back-off document and when it was written (epoch seconds), or None;
        BadRecord when it cannot be read."""

    def update_backoff(self, change: Callable[[Json | None], Json | None]) -> None:
        """Read-modify-write the back-off as one step, under no other unit: `change` gets
        the document (None: none, or unreadable — said in the log) and returns the new
        one, or None to leave it as it is."""

    def call_slot(self, limit: int, between: Callable[[], None] | None = None
                  ) -> AbstractContextManager[int]:
        """Hold one of `limit` call slots (its index) for one model call, under no other
        unit: at most `limit` holders at once across the root, and a holder that dies
        frees its slot. `between` runs each time every slot was found taken."""

    # -- the supervisor (CONTRACT §2, §9) ----------------------------------------------
    def claim_supervisor(self, info: Json) -> Any:
        """Become the root's one supervisor (a handle to keep), or raise if another is."""

    def supervisor_info(self) -> Json | None:
        """The running supervisor's record, or None when none holds the claim."""

    def write_supervisor_info(self, info: Json) -> None: ...

    def release_supervisor(self, handle: Any) -> None: ...

    def read_paged(self, team: str) -> Json | None:
        """Ids the `person_needed` hook already ran for (teamd's own record)."""

    def write_paged(self, team: str, doc: Json) -> None: ...
