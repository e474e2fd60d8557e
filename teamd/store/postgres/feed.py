"""The change feed of the PostgreSQL store: `LISTEN/NOTIFY` decoded into `Change`s
(CONTRACT §3, §15).

Every unit that wrote notifies its changes (`teamd.store.postgres.db`) on one channel, as
`[kind, team, name]`; PostgreSQL delivers a notification when its transaction commits, so
a feed never hears of a change before it can be read. A `PgFeed` listens on a connection
of its own, whose socket is its `fileno()`. A lost connection is a lost inotify event:
`drain` says changes were lost (read everything again) and the feed listens again on a
new connection — nothing is missed, only re-read.
"""

from __future__ import annotations

import json
import logging
import os
import select
import time
from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from teamd.errors import TeamdError
from teamd.store import feeds
from teamd.store.changes import Change, Kind
from teamd.store.postgres.base import Base
from teamd.store.postgres.db import CHANNEL, Db

log = logging.getLogger(__name__)

#: how long a feed whose server is away waits before trying to listen again
RETRY = 1.0


class PgFeed:
    """The `Feed` (teamd.store.api) of a PostgreSQL store."""

    def __init__(self, db: Db, teams: Sequence[str] | None, kinds: frozenset[Kind] | None,
                 poll_fallback: float) -> None:
        self.db = db
        self.teams = None if teams is None else set(teams)
        self.kinds = kinds
        self._pending: list[Change] = []
        self._lost = False
        self._conn: Any = None
        self._tried = 0.0  # when listening again was last tried
        # what a feed that has no connection is waited on by: readable when there is news
        # (the connection lost, or found again: both mean "read everything again")
        self._news_r, self._news_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._listen()

    def _listen(self) -> bool:
        self._tried = time.monotonic()
        try:
            conn = self.db.fresh()
            conn.execute(f"LISTEN {CHANNEL}")
        except (TeamdError, psycopg.Error) as exc:
            log.warning("change feed: %s; trying again", " ".join(str(exc).split()))
            return False
        self._conn = conn
        return True

    def _lose(self) -> None:
        """The connection is gone: say so (drain: lost), and listen again once it can."""
        if self._conn is not None:
            try:
                self._conn.close()
            except psycopg.Error:
                pass
        self._conn, self._lost = None, True
        self._news()
        self._listen()

    def _news(self) -> None:
        try:
            os.write(self._news_w, b"!")
        except BlockingIOError:
            pass  # already readable

    @property
    def polling(self) -> bool:
        return False

    def fileno(self) -> int:
        """The connection's socket; while there is none, the news pipe — and, every RETRY
        seconds (a caller's select asks at least that often), an attempt to listen again,
        which makes the pipe readable when it works."""
        if self._conn is None and time.monotonic() - self._tried >= RETRY and self._listen():
            self._lost = True
            self._news()
        if self._conn is None or self._lost:
            return self._news_r
        return int(self._conn.pgconn.socket)

    def watch(self, team: str) -> None:
        if self.teams is not None:
            self.teams.add(team)

    def unwatch(self, team: str) -> None:
        if self.teams is not None:
            self.teams.discard(team)

    def drain(self) -> tuple[list[Change], bool]:
        self._read()
        try:
            os.read(self._news_r, 64)
        except BlockingIOError:
            pass
        changes, lost = list(dict.fromkeys(self._pending)), self._lost
        self._pending, self._lost = [], False
        return changes, lost

    def wait(self, timeout: float | None, also: Sequence[int] = ()) -> bool:
        if self._pending or self._lost:
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if self._conn is None:  # come back to try listening again
                left = RETRY if left is None else min(left, RETRY)
            ready, _, _ = select.select([self.fileno(), *also], [], [], left)
            if any(fd in ready for fd in also):
                return True
            if ready:
                self._read()
                if self._pending or self._lost:
                    return True
            elif deadline is not None and time.monotonic() >= deadline:
                return False

    def _read(self) -> None:
        if self._conn is None:
            return
        pgconn = self._conn.pgconn
        try:
            pgconn.consume_input()
            while (note := pgconn.notifies()) is not None:
                self._decode(note.extra)
        except psycopg.Error as exc:
            log.warning("change feed: the connection was lost (%s); listening again",
                        " ".join(str(exc).split()))
            self._lose()

    def _decode(self, payload: bytes) -> None:
        try:
            kind, team, name = json.loads(payload)
            change = Change(Kind(kind), team, name)
        except (ValueError, TypeError):
            return
        if (self.kinds is None or change.kind in self.kinds) and (
                self.teams is None or change.team in self.teams):
            self._pending.append(change)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        for fd in (self._news_r, self._news_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def __enter__(self) -> PgFeed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Feeds(Base):
    """changes, wait_for."""

    def changes(self, teams: Sequence[str] | None = None, *,
                kinds: frozenset[Kind] | None = None, poll_fallback: float = 0.5) -> PgFeed:
        return PgFeed(self.db, teams, kinds, poll_fallback)

    def wait_for(self, teams: Sequence[str], check: Callable[[], Any], timeout: float,
                 tick: float = 0.5) -> Any:
        return feeds.wait_on_feed(self, teams, check, timeout, tick)
