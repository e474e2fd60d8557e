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

from collections.abc import Callable, Generator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from teamd.linescan import Judge, Sorted
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

    def own_folders(self) -> list[Path]:
        """The local folders that are the store's own (files: `.teams/` and `.tasks/`;
        none for a database): no file tool of a member may write there (CONTRACT §11)."""

    # -- steps together (CONTRACT §15: a team tool's effect and its result) ------------
    def together(self) -> AbstractContextManager[None]:
        """The units entered inside as one step for every reader: all of them, or — when
        it raises, or its end cannot be made durable — none (PostgreSQL: one transaction,
        begun by the first unit inside that writes, committed as the step ends). Once its
        first write was made nothing inside may wait long: a hook or a git command runs
        before (`apart`).
        Files: each unit is durable as it ends, as outside a step (the files store keeps
        no transaction across files)."""

    def apart(self) -> AbstractContextManager[None]:
        """Inside a step, before its first write: what runs here (a hook, a git command,
        their journal lines) is not part of it. RuntimeError once the step's first write
        was made."""

    def after_commit(self, step: Callable[[], None]) -> None:
        """Run `step` once what was written so far is durable: at once outside a step, else
        as the step ends well (never when it raises or its end fails)."""

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

    def read_archived_spec(self, team: str, archive: str) -> Json | None:
        """The roster a deleted team left in `archive` (one of `archives(team)`), or None."""

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
    def board_exists(self, team: str) -> bool:
        """The team has a board (it goes first when a team is deleted: CONTRACT §17)."""

    def board_unit(self, team: str) -> AbstractContextManager[None]:
        """The board's unit of work: task writes and new ids inside it are one step, and
        no other unit of the board runs meanwhile. TeamdError when there is no board."""

    def claim_unit(self, team: str, task_id: int) -> AbstractContextManager[Json | None]:
        """A claim's unit of work on task `task_id` (CONTRACT §5, §15: one transaction,
        `SELECT … FOR UPDATE SKIP LOCKED`): no `board_unit` runs meanwhile, nor another
        claim of that task, while claims of other tasks may. Yields the task as it is now,
        read inside the unit; None, holding nothing, when another claim of that task holds
        it at that moment (this one lost) or there is no such task. TeamdError when there is
        no board; BadRecord as for `read_task`."""

    def task_ids(self, team: str) -> list[int]:
        """The ids of the board's tasks, ascending, found without reading them ([] when
        there is no board)."""

    def read_task(self, team: str, task_id: int) -> Json | None:
        """Task `task_id`, or None when there is none; BadRecord (teamd.store.errors) when
        what is kept under that id is not a task of that id (a hand edit: tasks are
        written whole)."""

    def read_tasks(self, team: str) -> list[Json]:
        """Every task of the board, in id order, read at once (one query on a database);
        one that is not a task of its id is skipped and named in the log ([] when there is
        no board)."""

    def write_task(self, team: str, task: Json) -> None:
        """Add or replace the task of `task["id"]`, inside the board's unit."""

    def next_task_id(self, team: str) -> int:
        """A new id, durably handed out before any task of it is written (never again,
        even after its task is gone), inside the board's unit."""

    def top_task_id(self, team: str) -> int:
        """The highest id handed out so far (0 for none)."""

    def raise_top_task_id(self, team: str, top: int) -> None:
        """Make `top` the highest id handed out when it is higher than that (an import:
        ids its tasks used are never handed out again), inside the board's unit."""

    # -- inboxes (CONTRACT §3) ---------------------------------------------------------
    def deliver(self, team: str, name: str, messages: Sequence[Json]) -> None:
        """Append `messages` to `name`'s inbox as one durable step (all or none)."""

    def has_mail(self, team: str, name: str) -> bool:
        """Something waits in `name`'s inbox (cheap: on the wake path of every member)."""

    def inbox_mark(self, team: str, name: str) -> tuple[int, int, int] | None:
        """A cheap token that changes whenever the inbox is written or cut (files: inode,
        size, mtime in ns); None when there is no inbox."""

    def describe_inbox(self, team: str, name: str) -> str:
        """Where `name`'s inbox is, as people are shown it (files: the path from the root)."""

    def peek(self, team: str, name: str, judge: Judge) -> list[Json]:
        """What waits in the inbox (the lines `judge` accepts), taking and moving nothing:
        refused lines are skipped and logged (only a take moves them)."""

    def take(self, team: str, name: str, consume: Callable[[list[Json]], None],
             judge: Judge, *, keep: Callable[[Json], bool] | None = None) -> Sorted:
        """The exactly-once take, oldest first: hand the messages `judge` accepts (and
        `keep` takes: the rest stays for a later take) to `consume`, which records them
        durably, then remove them; refused lines are moved aside first. If `consume`
        raises, nothing is removed; after it returns, nothing is taken twice. Returns what
        was taken, refused and left."""

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
    def emit(self, team: str, records: Sequence[Json], *, max_bytes: int, keep: int) -> None:
        """Append journal lines as one step; nothing when the team is gone. A journal past
        `max_bytes` is first rotated, keeping `keep` old parts (0: cut in place)."""

    def read_journal(self, team: str) -> list[Json]:
        """The journal's current lines, oldest first (rotated parts not included)."""

    def describe_journal(self, team: str, archive: str | None = None) -> str:
        """Where the journal (of `archive`, one of `archives(team)`) is, as people are
        shown it."""

    def stream_journal(self, team: str, *, archive: str | None = None,
                       match: Callable[[Json], bool] | None = None,
                       last: int | None = None, follow: bool = False,
                       history: bool = True, poll: float = 0.5,
                       stop_at_deletion: bool = True,
                       on_bad: Callable[[bytes], None] | None = None,
                       on_caught_up: Callable[[], None] | None = None
                       ) -> Generator[Json, None, None]:
        """The journal's lines in order, rotated parts first, its memory flat: those
        `match` keeps, the last `last` of them (or, without `history`, none already
        there). With `follow`, then the ones added after, across
        rotation (`logs -f`), ending at `team_deleted` or once the team is gone when
        `stop_at_deletion`. `archive` (one of `archives(team)`) reads a deleted team's.
        `on_bad` gets each line that is not a JSON object (skipped); `on_caught_up` is
        called once, before following."""

    # -- sessions and transcripts (CONTRACT §6, §8) -----------------------------------
    def read_session(self, team: str, name: str, *, mend: bool = False,
                     kept: str | None = None) -> list[Json]:
        """The member's session records, oldest first (none yet: empty); a torn tail or a
        bad line is skipped, and with `mend` moved aside first (only the member itself
        mends its session). `kept`: the session a removed member left (one of
        `removed(team, name)`) or a deleted team's (one of `archives(team)`)."""

    def append_session(self, team: str, name: str, records: Sequence[Json]) -> None:
        """Durably append session records (fsynced before anything depends on them); a
        failed append leaves nothing of them and raises OSError."""

    def describe_session(self, team: str, name: str) -> str:
        """Where the member's session is kept, as people are shown it."""

    def keep_transcript(self, team: str, name: str, stamp: str, records: Sequence[Json]) -> str:
        """Keep the conversation a compaction replaced, whole; where it went (what the
        compaction record and the `compacted` event name)."""

    def read_transcript(self, team: str, name: str, where: str, *,
                        kept: str | None = None) -> list[Json] | None:
        """The conversation `keep_transcript` kept at `where` (what it returned), or None
        when it is gone; `kept` as for `read_session`."""

    def list_transcripts(self, team: str) -> list[tuple[str, str, str]]:
        """Every transcript `keep_transcript` kept in the team, removed members' too: its
        member's name, its `stamp` and its `where`, ordered by name, then stamp."""

    def follow_session(self, team: str, name: str, *, skip: int = 0, poll: float = 1.0
                       ) -> Generator[Json, None, None]:
        """Session records past the first `skip`, as they are appended (`attach`), across
        the member's restarts and a session mended meanwhile; ends once the team is gone."""

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

    # -- the settings every host applies (CONTRACT §15) --------------------------------
    def read_shared_tables(self) -> Json | None:
        """The `[permissions]`, `[hooks]` and `[prices]` tables the store keeps for every
        host, as one document `{"permissions": {…}, "hooks": {…}, "prices": {…}}` (each
        table as teamd.toml writes it); None when none was written, and always for a store
        that shares nothing (files: each root's teamd.toml keeps its own). BadRecord when
        what is kept is not a JSON object."""

    def write_shared_tables(self, doc: Json) -> bool:
        """Replace that document as one step; False, writing nothing, for a store that
        shares nothing (files)."""

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

    # -- hosts (CONTRACT §15): a store many machines share; the files store has one ------
    #: True when hosts can share this store (then `claim_supervisor` claims this
    #: machine's host, `teamd.hostname.here`, and its units are fenced with its lease)
    supports_hosts: bool

    def list_hosts(self, timeout: float) -> list[Json]:
        """Every host's record by name, with `alive`, `age` and `held` ([] without hosts)."""

    def beat_host(self, claim: Any, changes: Json | None = None) -> None:
        """The claimed host's heartbeat, a fenced write (LeaseLost, StoreUnreachable)."""

    def take_over_host(self, name: str, lease: int, timeout: float,
                       moves: Callable[[], None]) -> bool:
        """Fence off host `name` if its lease is still `lease` and its heartbeat older than
        `timeout`, running `moves` (its members placed elsewhere) in the same step; False
        when it was not."""

    def fence(self, max_age: float | None = None) -> None:
        """A fenced unit (LeaseLost once this process's host lost its lease); nothing
        without hosts. With `max_age`: only when this process's last fence is older."""

    def read_paged(self, team: str) -> Json | None:
        """Ids the `person_needed` hook already ran for (teamd's own record)."""

    def write_paged(self, team: str, doc: Json) -> None: ...
