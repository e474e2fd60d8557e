"""Inboxes in PostgreSQL and their exactly-once take (CONTRACT §3, §15).

A message is a row of `inbox`, oldest first by `seq`, holding the message's JSON text. A
delivery is one transaction; a take is one transaction too: the rows are judged (by the
caller's `Judge`, as a file's lines are), the accepted ones handed to `consume` — which
records them in the session inside the same transaction — then deleted, refused ones moved
to `rejected` first. If `consume` raises, or the taker dies, the transaction rolls back
and nothing was taken. Both hold the inbox's advisory lock, so senders' messages keep the
order they were committed in. `inbox_marks` counts every write and cut (`inbox_mark`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from teamd import linescan
from teamd.files import Json
from teamd.store.changes import Kind
from teamd.store.postgres.base import Base, lock_name, text

log = logging.getLogger(__name__)


def raw_line(seq: int, doc: Any, bad: bytes | None) -> linescan.RawLine:
    """A row as the line its file would hold: what a `Judge` reads."""
    data = bytes(bad) if bad is not None else text(doc).encode()
    long = len(data) > linescan.MAX_LINE
    return linescan.RawLine(seq, seq, data[:linescan.REJECT_HEAD] if long else data,
                            len(data), long=long)


class Inboxes(Base):
    """deliver, has_mail, inbox_mark, peek, take, wait_unlocked_inbox, describe_inbox."""

    def deliver(self, team: str, name: str, messages: Sequence[Json]) -> None:
        self.append_rows("inbox", team, name, messages, lambda: self._moved(team, name))

    def _moved(self, team: str, name: str) -> None:
        self.db.execute("INSERT INTO inbox_marks (team, name, mark) VALUES (%s, %s, 1) "
                        "ON CONFLICT (team, name) DO UPDATE SET mark = inbox_marks.mark + 1",
                        (team, name))
        self.db.changed(Kind.INBOX, team, name)

    def has_mail(self, team: str, name: str) -> bool:
        return self.db.one("SELECT 1 FROM inbox WHERE team = %s AND name = %s LIMIT 1",
                           (team, name)) is not None

    def inbox_mark(self, team: str, name: str) -> tuple[int, int, int] | None:
        mark = self.db.one("SELECT mark FROM inbox_marks WHERE team = %s AND name = %s",
                           (team, name))
        return None if mark is None else (0, 0, int(mark))

    def describe_inbox(self, team: str, name: str) -> str:
        return self.where("inbox", team, name)

    def _lines(self, team: str, name: str) -> list[linescan.RawLine]:
        return [raw_line(seq, doc, bad) for seq, doc, bad in self.db.rows(
            "SELECT seq, doc, bad FROM inbox WHERE team = %s AND name = %s ORDER BY seq",
            (team, name))]

    @staticmethod
    def _sort(lines: list[linescan.RawLine], judge: linescan.Judge,
              keep: Callable[[Json], bool] | None) -> tuple[linescan.Sorted, list[int]]:
        """What `judge` and `keep` make of the rows, and the rows that go (taken, refused)."""
        out, gone = linescan.Sorted(), []
        for line in lines:
            verdict = judge(line)
            if isinstance(verdict, linescan.Refusal):
                out.refused.append((verdict, line))
                gone.append(line.start)
            elif keep is None or keep(verdict):
                out.taken.append(verdict)
                gone.append(line.start)
            else:
                out.left.append(line)
        return out, gone

    def peek(self, team: str, name: str, judge: linescan.Judge) -> list[Json]:
        found, _ = self._sort(self._lines(team, name), judge, None)
        if found.refused:
            log.warning("%s: skipping %d line(s) that are not messages (%s); its owner's next "
                        "read moves them aside", self.describe_inbox(team, name),
                        len(found.refused),
                        ", ".join(sorted({r.reason for r, _ in found.refused})))
        return found.taken

    def take(self, team: str, name: str, consume: Callable[[list[Json]], None],
             judge: linescan.Judge, *, keep: Callable[[Json], bool] | None = None
             ) -> linescan.Sorted:
        with self.db.unit(lock_name("inbox", team, name)):
            found, gone = self._sort(self._lines(team, name), judge, keep)
            if found.taken:
                consume(found.taken)
            self.reject(team, name, "inbox", [(r.reason, line.data)
                                              for r, line in found.refused])
            if gone:
                self.db.execute("DELETE FROM inbox WHERE seq = ANY(%s)", (gone,))
                self._moved(team, name)
        return found

    def reject(self, team: str, name: str, what: str,
               lines: Sequence[tuple[str, bytes]]) -> None:
        """Move refused lines aside (`*.rejected.jsonl`'s table), inside a unit."""
        if not lines:
            return
        with self.db.conn().cursor() as cur:
            cur.executemany("INSERT INTO rejected (team, name, what, line, reason, at) "
                            "VALUES (%s, %s, %s, %s, %s, %s)",
                            [(team, name, what, data, reason, time.time())
                             for reason, data in lines])
        log.warning("%s: moved %d line(s) aside (%s)", self.where(what, team, name),
                    len(lines), ", ".join(sorted({reason for reason, _ in lines})))

    def wait_unlocked_inbox(self, team: str, name: str) -> None:
        with self.db.unit(lock_name("inbox", team, name)):
            pass
