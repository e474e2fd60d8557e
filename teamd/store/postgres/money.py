"""Spend, the shared back-off, the call slots, and the settings every host applies, in
PostgreSQL (CONTRACT §11, §12, §15).

`spend.json` and `person_needed.json` are documents of `team_docs`; `ratelimit.json` and the
shared `[permissions]`, `[hooks]` and `[prices]` tables of `root_docs`, each
read-modify-written in a unit holding its lock. A call slot is a **session** advisory lock
on the thread's own connection: held by a connection, not a transaction, so a holder that
dies — even by `kill -9` — frees it with its connection. (The supervisor's claim is a
host's: `hosts`.)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from teamd.files import Json
from teamd.store import slots
from teamd.store.changes import Kind
from teamd.store.errors import BadRecord
from teamd.store.postgres.base import Base, jsonb, lock_name

log = logging.getLogger(__name__)

#: the first key of the call slots' session advisory locks
SLOTS = 0x7464736C
BACKOFF, SPEND, PAGED, SHARED = "ratelimit", "spend", "paged", "settings"


class Money(Base):
    """read_spend, add_spend, read_backoff, update_backoff, call_slot, read/write paged;
    read/write shared tables."""

    def _team_doc(self, team: str, what: str, lock: bool = False) -> Json | None:
        doc = self.db.one("SELECT doc FROM team_docs WHERE team = %s AND what = %s"
                          + (" FOR UPDATE" if lock else ""), (team, what))
        if doc is not None and not isinstance(doc, dict):
            raise BadRecord(self.where("team_docs", team, what), "not a JSON object")
        return doc

    def _put_team_doc(self, team: str, what: str, doc: Json) -> None:
        self.db.execute("INSERT INTO team_docs (team, what, doc) VALUES (%s, %s, %s) "
                        "ON CONFLICT (team, what) DO UPDATE SET doc = excluded.doc",
                        (team, what, jsonb(doc)))

    def read_spend(self, team: str) -> Json | None:
        return self._team_doc(team, SPEND)

    def add_spend(self, team: str, change: Callable[[Json | None], Json]) -> Json:
        with self.db.unit(lock_name("doc", team, SPEND)):
            try:
                found = self._team_doc(team, SPEND)
            except BadRecord as exc:
                log.warning("%s; counting the team's spend from 0", exc)
                found = None
            doc = change(found)
            self._put_team_doc(team, SPEND, doc)
            self.db.changed(Kind.SPEND, team)
        return doc

    def read_paged(self, team: str) -> Json | None:
        return self._team_doc(team, PAGED)

    def write_paged(self, team: str, doc: Json) -> None:
        with self.db.unit():
            self._put_team_doc(team, PAGED, doc)
            self.db.touched()  # teamd's own record: no change anyone waits on

    # -- the root's records ---------------------------------------------------------------
    def _root_doc(self, what: str) -> tuple[Json, float] | None:
        row = self.db.execute("SELECT doc, written FROM root_docs WHERE what = %s",
                              (what,)).fetchone()
        if row is None:
            return None
        if not isinstance(row[0], dict):
            raise BadRecord(self.where("root_docs", what), "not a JSON object")
        return row[0], float(row[1])

    def _put_root_doc(self, what: str, doc: Json) -> None:
        with self.db.unit():
            self.db.execute("INSERT INTO root_docs (what, doc, written) VALUES (%s, %s, %s) "
                            "ON CONFLICT (what) DO UPDATE SET doc = excluded.doc, "
                            "written = excluded.written", (what, jsonb(doc), time.time()))
            self.db.touched()

    def read_backoff(self) -> tuple[Json, float] | None:
        return self._root_doc(BACKOFF)

    def update_backoff(self, change: Callable[[Json | None], Json | None]) -> None:
        with self.db.unit(f"root:{BACKOFF}"):
            try:
                found = self._root_doc(BACKOFF)
            except BadRecord as exc:
                log.warning("%s; ignoring the shared back-off", exc)
                found = None
            doc = change(None if found is None else found[0])
            if doc is not None:
                self._put_root_doc(BACKOFF, doc)

    def read_shared_tables(self) -> Json | None:
        found = self._root_doc(SHARED)
        return None if found is None else found[0]

    def write_shared_tables(self, doc: Json) -> bool:
        """One step, reported as a roster change of every team: each host's teamd reads
        its rosters again and wakes its paused members, which re-check with the new
        prices (as a SIGHUP does for one host's own)."""
        with self.db.unit(f"root:{SHARED}"):
            self._put_root_doc(SHARED, doc)
            for (team,) in self.db.rows("SELECT team FROM teams"):
                self.db.changed(Kind.SPEC, team)
        return True

    @contextmanager
    def call_slot(self, limit: int, between: Callable[[], None] | None = None
                  ) -> Iterator[int]:
        conn = self.db.conn()
        order = [(id(conn) // 16 + i) % limit for i in range(limit)]
        index = self._take_slot(conn, order, between)
        try:
            yield index
        finally:
            if not conn.closed:
                conn.execute("SELECT pg_advisory_unlock(%s, %s)", (SLOTS, index))

    def _take_slot(self, conn: Any, order: list[int],
                   between: Callable[[], None] | None) -> int:
        def take(index: int, wait: float) -> int | None:
            if not wait:
                return index if self.db.one("SELECT pg_try_advisory_lock(%s, %s)",
                                            (SLOTS, index)) else None
            try:
                self.db.execute(f"SET lock_timeout = {int(wait * 1000)}")
                self.db.execute("SELECT pg_advisory_lock(%s, %s)", (SLOTS, index))
                return index
            except psycopg.errors.LockNotAvailable:
                return None
            finally:
                self.db.execute("RESET lock_timeout")
        return slots.sweep(order, take, between)[1]
