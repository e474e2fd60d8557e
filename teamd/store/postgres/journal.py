"""The journal in PostgreSQL (CONTRACT §7, §15): its lines, its parts, and reading it as a
stream.

A line is a row of `journal` (`doc` the line's JSON), ordered by `seq`; every append holds
the team's journal lock, so `seq` order is commit order and a follower that has read up
to a `seq` misses nothing after it. Rotation (`events_max_bytes`, `events_keep`) means the
same for the database as for the files, so that the journal's size stays bounded by the
same settings: the lines are counted in parts (`journal_parts` holds the current part and
its size); once the current part has reached `max_bytes` the next line starts a new part
and the parts older than `keep` are deleted (`keep` 0: the current part is emptied).
`read_journal` is the current part; `stream_journal` every part kept, oldest first.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any

from teamd.files import Json
from teamd.store.changes import Kind
from teamd.store.postgres.base import lock_name, text
from teamd.store.postgres.feed import Feeds

#: rows read at once by a stream (its memory stays flat)
PAGE = 500


class Journal(Feeds):
    """emit, read_journal, describe_journal, stream_journal."""


    def emit(self, team: str, records: Sequence[Json], *, max_bytes: int, keep: int) -> None:
        def write() -> None:
            found = self.db.execute("SELECT part, size FROM journal_parts WHERE team = %s",
                                    (team,)).fetchone()
            if found is not None:  # else the team is gone
                self._append(team, records, found, max_bytes, keep)
        with self.db.unit():
            self.db.append_at_commit(lock_name("journal", team), write)

    def _append(self, team: str, records: Sequence[Json], found: tuple[int, int],
                max_bytes: int, keep: int) -> None:
        """Append under the journal lock (`found`: the current part and its size; rotated
        first when it is full)."""
        part, size = found
        if size >= max_bytes:
            if keep <= 0:
                self.db.execute("DELETE FROM journal WHERE team = %s AND part = %s",
                                (team, part))
            else:
                part += 1
                self.db.execute("DELETE FROM journal WHERE team = %s AND part < %s",
                                (team, part - keep))
            size = 0
        lines = [text(r) for r in records]
        with self.db.conn().cursor() as cur:
            cur.executemany("INSERT INTO journal (team, part, size, doc) VALUES (%s, %s, %s, %s)",
                            [(team, part, len(line.encode()) + 1, line) for line in lines])
        size += sum(len(line.encode()) + 1 for line in lines)
        self.db.execute("UPDATE journal_parts SET part = %s, size = %s WHERE team = %s",
                        (part, size, team))
        self.db.changed(Kind.JOURNAL, team)

    def read_journal(self, team: str) -> list[Json]:
        return [doc for (doc,) in self.db.rows(
            "SELECT j.doc FROM journal j JOIN journal_parts p ON p.team = j.team AND "
            "p.part = j.part WHERE j.team = %s ORDER BY j.seq", (team,))
            if isinstance(doc, dict)]

    def describe_journal(self, team: str, archive: str | None = None) -> str:
        return self.where("journal", archive or team)

    def _after(self, team: str, archived: bool, seq: int) -> Iterator[tuple[int, Any]]:
        """Rows of the journal of `team` (an archive's name, or a team's — with
        `archived`, also what its deletion moved to an archive) past `seq`, in order."""
        where = ("(team = %s OR team IN (SELECT archive FROM archives WHERE team = %s))"
                 if archived else "team = %s")
        args: tuple[Any, ...] = (team, team) if archived else (team,)
        while True:
            rows = self.db.rows(f"SELECT seq, doc FROM journal WHERE {where} AND seq > %s "
                                f"ORDER BY seq LIMIT {PAGE}", (*args, seq))
            yield from rows
            if len(rows) < PAGE:
                return
            seq = rows[-1][0]

    def stream_journal(self, team: str, *, archive: str | None = None,
                       match: Callable[[Json], bool] | None = None,
                       last: int | None = None, follow: bool = False,
                       history: bool = True, poll: float = 0.5,
                       stop_at_deletion: bool = True,
                       on_bad: Callable[[bytes], None] | None = None,
                       on_caught_up: Callable[[], None] | None = None
                       ) -> Generator[Json, None, None]:
        wanted = match or (lambda _r: True)
        key = archive or team
        seq, ended = 0, False

        def records(rows: Iterator[tuple[int, Any]]) -> Iterator[tuple[int, Json]]:
            for at, doc in rows:
                if not isinstance(doc, dict):
                    if on_bad is not None:
                        on_bad(text(doc).encode())
                    continue
                yield at, doc

        if last is not None or history:
            tail: collections.deque[Json] | None = (
                None if last is None else collections.deque(maxlen=max(last, 0)))
            for at, doc in records(self._after(key, False, 0)):
                seq, ended = at, doc.get("event") == "team_deleted"
                if wanted(doc):
                    if tail is None:
                        yield doc
                    else:
                        tail.append(doc)
                if ended:
                    break
            yield from tail or ()
        else:
            seq = int(self.db.one("SELECT coalesce(max(seq), 0) FROM journal WHERE team = %s",
                                  (key,)))
        if not follow or ended:
            return
        if on_caught_up is not None:
            on_caught_up()
        yield from self._follow(team, key, archive is None, seq, wanted, records, poll,
                                stop_at_deletion)

    def _follow(self, team: str, key: str, live: bool, seq: int,
                wanted: Callable[[Json], bool], records: Any, poll: float,
                stop_at_deletion: bool) -> Generator[Json, None, None]:
        with self.changes([team], kinds=frozenset({Kind.JOURNAL, Kind.TEAM}),
                          poll_fallback=poll) as feed:
            while True:
                feed.drain()
                gone = live and not self.team_exists(team)
                for at, doc in records(self._after(key, gone, seq)):
                    seq = at
                    if wanted(doc):
                        yield doc
                    if doc.get("event") == "team_deleted" and stop_at_deletion:
                        return
                if gone and stop_at_deletion:
                    return
                feed.wait(poll)
