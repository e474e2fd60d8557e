"""The PostgreSQL store's connections and units of work (CONTRACT §15, §17).

One connection per thread, opened on first use and opened again in a forked child (a
connection is never shared across a fork: the child leaves its parent's alone — psycopg
does not close a connection made by another process — and opens its own). A unit of work
is one transaction: the first unit a thread enters begins it, units entered inside it
(re-entrant, in the contract's lock order) join it, and the outermost one commits it —
the commit is the durable write a crash point counts (`teamd.crashpoints`: just before and
just after `COMMIT`). What makes a unit exclusive is a transaction-scoped advisory lock on
what it guards (a roster, a member, a board, a request, an inbox…), freed by the server at
commit, at rollback, or when the holder dies. An append (a message delivered, a session
record, a journal line) is made at the commit, under its lock taken then
(`append_at_commit`): held to the commit, a lock taken mid-unit would be held while the
unit takes others, out of the contract's order. Every write notes a change (kind, team,
name); they are sent with `pg_notify` just before the commit, so a feed hears of a change
only once it is readable.

A **step together** (`together`, CONTRACT §15: a team tool's effect and its recorded
result) makes several units one transaction. Its transaction is begun lazily, by the first
unit inside it that writes — reads before that (under a unit's lock or not) run on their
own, and so may a hook or a git command (`apart`: none may run once the transaction is
begun, since the server ends a transaction idle for UNIT_IDLE_LIMIT) — and committed when
the step ends; each unit after the first is a savepoint, so a unit that raises still
leaves nothing while the others stand, as outside a step. Its locks are held to its
commit: a step's units are those of one tool call, milliseconds apart — but two units a
caller runs one after the other, out of the contract's lock order (a shutdown answered on a
member's behalf releases its tasks: the board, then the member), are then held together;
should another writer wait on them in the other order, PostgreSQL ends one of the two
transactions within `deadlock_timeout` (1 s), undone whole: in a step, a tool's error
result, nothing of it done. What is to follow
the commit (`after_commit`: a session record taken into the member's memory) runs only once
it went through: a step that raises, or whose commit fails, leaves neither the rows nor
what was to follow them.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
from psycopg import pq, sql

from teamd import crashpoints
from teamd.store import urls
from teamd.store.changes import Kind
from teamd.store.errors import LeaseLost, StoreUnreachable
from teamd.store.postgres import schema
from teamd.store.postgres.connect import connect, explain

#: the channel every change is notified on
CHANNEL = "teamd"


#: the locks of appends, in the contract's order (CONTRACT §2: … inbox → session → events)
APPEND_ORDER = ("inbox", "session", "journal")


#: SQLSTATE classes of a connection that is gone: 08 (connection exception), 57P (the
#: server ended it: `pg_terminate_backend`, a shutdown, a crash)
LOST_STATES = ("08", "57P")


def lost(exc: BaseException, conn: Any) -> bool:
    """Is `exc` (raised by a statement on `conn`) the connection being gone? Then `conn` is
    closed, so nothing is sent on it again and the next unit opens a new one. A connection
    ended by the server in the middle of a pipeline may not look broken yet, and psycopg
    then raises "cannot exit pipeline mode while busy", the server's error its context:
    both are looked at."""
    states = [getattr(e, "sqlstate", None) or "" for e in (exc, exc.__context__)]
    gone = conn.broken or conn.closed or any(s.startswith(LOST_STATES) for s in states)
    if gone and not conn.closed:
        conn.close()
    return bool(gone)


def undone(exc: psycopg.OperationalError) -> Exception:
    """What to raise for `exc`, a connection's trouble that is not its loss: a transaction
    the server undid to break a deadlock (or a serialization failure) is StoreUnreachable —
    nothing of it was written, and trying again is right — anything else as it is."""
    if (exc.sqlstate or "").startswith("40"):  # class 40: transaction rollback
        return StoreUnreachable(f"the store undid a transaction ({exc.sqlstate}: "
                                f"{str(exc).splitlines()[0]}); nothing of it was written")
    return exc


class _Thread(threading.local):
    pid = 0
    conn: Any = None
    #: the connection this thread's open transaction runs on, from its BEGIN to its COMMIT
    #: or ROLLBACK (None: no transaction open)
    tx: Any = None
    depth = 0
    changes: dict[tuple[str, str, str | None], None]
    appends: dict[str, list[Callable[[], None]]]
    wrote = False
    #: inside a step `together`; `begun`: its transaction is open (units join it)
    together = False
    begun = False
    #: a unit of the step's transaction succeeded since the last savepoint: released
    #: with the next one
    release = False
    #: what runs once the transaction commits (`after_commit`)
    then: list[Callable[[], None]]


class Db:
    """A store's connections (one per thread and process) and its units of work."""

    def __init__(self, url: str) -> None:
        self.url = url
        #: (host, lease) when this process acts for a host (its `teamd` and members): every
        #: unit is then fenced, its first statement `teamd_fence` (CONTRACT §15)
        self.fence: tuple[str, int] | None = None
        #: set once a fenced unit was refused: from then on no unit is even begun
        self.fenced_out = False
        #: time.monotonic() of the last `fence()` made here (-inf: none yet)
        self.fenced_at = float("-inf")
        self._local = _Thread()
        self._checked = False
        #: what a crash point names as the file of a commit: the database (no password)
        self.crash_path = Path("/postgresql") / (urlsplit(urls.mask(url)).path.strip("/")
                                                 or "postgres")

    # -- connections -----------------------------------------------------------------
    def conn(self) -> Any:
        """This thread's connection (a new one after a fork, or after one was lost). While a
        transaction is open it is always the transaction's, even lost: a statement of a unit
        run on a new connection would commit on its own, without the unit's locks and fence,
        while the rest of the unit rolls back — so every statement after the loss fails
        instead, and the unit is undone whole."""
        local = self._mine()
        if local.tx is not None:
            return local.tx
        if local.conn is None or local.conn.closed:
            conn = connect(self.url)
            if not self._checked:
                schema.ensure(conn, self.url)
                self._checked = True
            local.conn = conn
        return local.conn

    def _mine(self) -> _Thread:
        """This thread's state, as it is in this process: a forked child leaves its
        parent's connection, unit and step alone."""
        local = self._local
        if local.pid != os.getpid():
            local.conn, local.depth, local.together, local.begun = None, 0, False, False
            local.tx = None
            local.pid = os.getpid()
        return local

    def fresh(self) -> Any:
        """A connection of its own (a feed's, a claim's): never this thread's."""
        self.conn()  # the schema is checked once
        return connect(self.url)

    # -- units -----------------------------------------------------------------------
    @contextmanager
    def unit(self, *locks: str, shared: bool = False,
             first: sql.Composable | None = None) -> Iterator[list[Any]]:
        """A unit of work holding the advisory locks named by `locks` (in the order given;
        `shared`: with other shared holders): this thread's transaction, begun here unless
        one is open (in a step `together`, a savepoint of the step's). `first`: a statement
        (its values inlined) sent in the same round trip as the BEGIN and the locks;
        yields its rows ([] without one)."""
        local = self._local
        if self.fenced_out:
            raise LeaseLost(f"host {self.fence[0] if self.fence else '?'} lost its lease")
        conn = self.conn()
        outer = local.depth == 0 and not local.begun
        saved = None if outer or local.depth else self._save()
        if outer:
            local.changes, local.appends, local.wrote, local.then = {}, {}, False, []
        # BEGIN and the locks in one round trip (the simple protocol takes several statements)
        statements = ["BEGIN"] if outer else []
        if outer and self.fence is not None:
            statements.append(sql.SQL("SELECT teamd_fence({}, {})").format(
                sql.Literal(self.fence[0]), sql.Literal(self.fence[1])).as_string(conn))
        if saved is not None:
            statements += ["RELEASE SAVEPOINT teamd_unit"] if local.release else []
            statements.append("SAVEPOINT teamd_unit")
            local.release = False
        take = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
        statements += [sql.SQL("SELECT {}(hashtextextended({}, 0))").format(
            sql.Identifier(take), sql.Literal(name)).as_string(conn) for name in locks]
        if first is not None:
            statements.append(first.as_string(conn))
        local.depth += 1
        try:
            rows: list[Any] = []
            if statements:
                query = "; ".join(statements).encode()
                if outer:
                    conn, cur = self._again(conn, query)
                    local.tx = conn  # begun: every statement until its end runs here
                else:
                    cur = self._run(conn, query, prepare=False)
                if first is not None:
                    while cur.nextset():  # its rows are the last result's
                        pass
                    rows = list(cur.fetchall())
            yield rows
        except BaseException:
            local.depth -= 1
            if outer:  # on the connection in use now: `_again` may have opened a new one
                self._rollback(local.conn if local.conn is not None else conn)
            elif saved is not None:
                self._undo(conn, saved)
            raise
        local.depth -= 1
        if saved is not None:
            local.release = True
        elif outer and local.together and (local.wrote or local.appends):
            local.begun = True  # committed when the step ends
        elif outer:  # (in a step, a unit that only read does not begin it)
            self._end(conn)

    def _end(self, conn: Any, what: str = "commit") -> None:
        """Commit this thread's transaction, then run what was to follow it; on a failure,
        roll it back (what was to follow is dropped)."""
        local = self._local
        then, local.then = local.then, []
        try:
            self._commit(conn, what)
        except BaseException:
            self._rollback(conn)
            raise
        finally:
            local.tx = None
        for step in then:
            step()

    # -- steps together ----------------------------------------------------------------
    @contextmanager
    def together(self) -> Iterator[None]:
        """The units entered inside, one transaction: begun by the first of them that
        writes, committed when the step ends, rolled back whole when it raises (see the
        module's docstring). Inside a step or a unit already, it joins that one."""
        local = self._mine()
        if local.together or self.in_unit:
            yield
            return
        local.together, local.begun, local.release = True, False, False
        try:
            yield
        except BaseException:
            if local.begun:
                local.then = []
                self._rollback(local.conn)
            raise
        finally:
            local.together = False
            begun, local.begun = local.begun, False
        if begun:
            self._end(local.conn, "commit together")

    @contextmanager
    def apart(self) -> Iterator[None]:
        """Inside a step whose transaction is not begun yet: the units entered inside are
        transactions of their own (a hook's journal line). What runs here may take long (a
        hook, a git command): RuntimeError when the step's transaction is open already,
        since the server would end it meanwhile."""
        local = self._mine()
        if not local.together:
            yield
            return
        if local.begun or local.depth:
            raise RuntimeError("a hook or git command inside a transaction of the store: "
                               "it must run before the step's first write")
        local.together = False
        try:
            yield
        finally:
            local.together = True

    def after_commit(self, step: Callable[[], None]) -> None:
        """Run `step` once what this thread writes now is committed: at once outside a
        unit and a step, else after their commit (never, if it fails or is rolled back)."""
        if self.in_unit:
            self._local.then.append(step)
        else:
            step()

    def _save(self) -> tuple[dict[str, int], dict[tuple[str, str, str | None], None], bool,
                             int]:
        """What a savepoint's rollback restores of the transaction's notes."""
        local = self._local
        return ({k: len(v) for k, v in local.appends.items()}, dict(local.changes),
                local.wrote, len(local.then))

    def _undo(self, conn: Any,
              saved: tuple[dict[str, int], dict[tuple[str, str, str | None], None], bool,
                           int]) -> None:
        """A unit of a step raised: back to its savepoint, its notes forgotten."""
        local = self._local
        appends, local.changes, local.wrote, then = saved
        local.appends = {k: v[:appends[k]] for k, v in local.appends.items() if k in appends}
        del local.then[then:]
        try:
            conn.execute("ROLLBACK TO SAVEPOINT teamd_unit")
        except psycopg.Error:
            pass  # the transaction is lost: its commit fails (`_commit`)

    def _run(self, conn: Any, query: Any, args: Sequence[Any] | None = None,
             prepare: bool | None = None) -> Any:
        try:
            return conn.execute(query, args, prepare=prepare)
        except psycopg.OperationalError as exc:
            if lost(exc, conn):  # the server went away: one line, exit 1
                raise explain(exc, self.url) from None
            raise undone(exc) from None
        except psycopg.Error as exc:
            if exc.sqlstate == schema.STALE_LEASE:
                self.fenced_out = True
                raise LeaseLost(" ".join(str(exc).split())) from None
            raise

    def _again(self, conn: Any, query: Any) -> tuple[Any, Any]:
        """Run the first statement of a step on `conn`; on a connection lost since its last
        use (a server restarted, a link cut), once more on a new one: nothing of the step
        was done yet. The connection it ran on, and its cursor."""
        try:
            return conn, self._run(conn, query, prepare=False)
        except StoreUnreachable:
            if not conn.closed:
                raise
        conn = self.conn()  # a new one: the old is closed
        return conn, self._run(conn, query, prepare=False)

    def _rollback(self, conn: Any) -> None:
        """End this thread's transaction, undone."""
        self._local.tx = None
        try:
            conn.execute("ROLLBACK")
        except psycopg.Error:
            pass  # a lost connection rolled back by itself

    def append_at_commit(self, lock: str, write: Callable[[], None]) -> None:
        """Inside a unit: run `write` (an append to an inbox, a session or a journal) at the
        commit, under `lock`. An append's lock only orders the rows it adds; taken at the
        commit, after every unit's own lock and in the contract's order, it is held for
        the commit alone and never taken out of order by units that nest differently."""
        self._local.appends.setdefault(lock, []).append(write)

    def _commit(self, conn: Any, what: str = "commit") -> None:
        """The appends under their locks, the notifications, COMMIT: pipelined, so what
        needs no answer goes in one round trip with the COMMIT (a write that reads, as
        the journal's part does, waits only for what was sent before it). `what`: the
        crash point's name for it. A transaction a failed statement ended (its COMMIT
        would be a silent ROLLBACK) is refused: StoreUnreachable."""
        local = self._local
        if not conn.closed and conn.info.transaction_status == pq.TransactionStatus.INERROR:
            raise StoreUnreachable(f"the store {urls.mask(self.url)} refused a step: "
                                   "nothing of it was written")
        try:
            with conn.pipeline():
                for lock in sorted(local.appends, key=lambda name: (
                        APPEND_ORDER.index(name.split(":", 1)[0]), name)):
                    self._run(conn, "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                              (lock,))
                    for write in local.appends[lock]:
                        write()
                local.appends = {}
                if local.changes:
                    payloads = [json.dumps(list(change)) for change in local.changes]
                    self._run(conn, "SELECT pg_notify(%s, p) FROM unnest(%s::text[]) AS p",
                              (CHANNEL, payloads))
                if local.wrote:
                    crashpoints.before(what, self.crash_path)
                self._run(conn, "COMMIT")
        except psycopg.OperationalError as exc:  # raised at the pipeline's sync
            if lost(exc, conn):
                raise explain(exc, self.url) from None
            raise undone(exc) from None
        if local.wrote:
            crashpoints.after(what, self.crash_path)

    def changed(self, kind: Kind, team: str, name: str | None = None) -> None:
        """Note a write, inside a unit: it is notified just before the commit."""
        local = self._local
        local.wrote = True
        local.changes[(str(kind), team, name)] = None

    def touched(self) -> None:
        """Note a write no feed reports (the root's and teamd's own records), inside a unit."""
        self._local.wrote = True

    def execute(self, sql: str, args: Sequence[Any] | None = None) -> Any:
        """One statement in this thread's transaction, or on its own when none is open
        (then, on a connection lost since its last use, once more on a new one)."""
        if self.in_unit or self._local.tx is not None:  # (the commit's appends: depth 0)
            return self._run(self.conn(), sql, args)
        conn = self.conn()
        try:
            return self._run(conn, sql, args)
        except StoreUnreachable:
            if not conn.closed:
                raise
        return self._run(self.conn(), sql, args)

    def rows(self, sql: str, args: Sequence[Any] | None = None) -> list[Any]:
        return list(self.execute(sql, args).fetchall())

    def one(self, sql: str, args: Sequence[Any] | None = None) -> Any:
        """The first row's first value, or None when there is no row."""
        row = self.execute(sql, args).fetchone()
        return None if row is None else row[0]

    @property
    def in_unit(self) -> bool:
        """Inside a unit, or a step whose transaction is begun."""
        local = self._local
        return (local.depth > 0 or local.begun) and local.pid == os.getpid()
