"""`spend.json`, the root's `ratelimit.json` and the call slots `.calls/` (CONTRACT §12).

`spend.json` is read-modify-written under its lock (after the roster's and the member's:
roster → … → spend.json → events). `ratelimit.json` is replaced under its own lock, never
held together with another. A call slot is one of N flocks `.calls/{i}.lock` held for the
length of one model call: a holder that dies, even by `kill -9`, frees its slot with its
last descriptor. One flock cannot wait on "any of N", so a caller that finds every slot
taken waits on one a while, then tries them all again, starting elsewhere (`slots.sweep`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import filelock

from teamd import files
from teamd.errors import TeamdError
from teamd.files import Json
from teamd.store import slots
from teamd.store.files.base import Base
from teamd.store.files.records import read_record
from teamd.store.files.units import unit

log = logging.getLogger(__name__)


def _read_or_none(path: Path, what: str) -> Json | None:
    """The document for a read-modify-write: None, said in the log, when it is unreadable
    (a bad file must not stop a team's calls: it is replaced)."""
    try:
        return read_record(path)
    except (TeamdError, OSError) as exc:
        log.warning("%s; %s", exc, what)
        return None


class Money(Base):
    """read_spend, add_spend, read_backoff, update_backoff, call_slot."""

    def read_spend(self, team: str) -> Json | None:
        return read_record(self.paths.spend(team))

    def add_spend(self, team: str, change: Callable[[Json | None], Json]) -> Json:
        path = self.paths.spend(team)
        with unit(path):
            doc = change(_read_or_none(path, "counting the team's spend from 0"))
            files.write_json(path, doc)
        return doc

    def read_backoff(self) -> tuple[Json, float] | None:
        path = self.paths.ratelimit_file
        try:
            written = os.stat(path).st_mtime
        except FileNotFoundError:
            return None
        doc = read_record(path)
        return None if doc is None else (doc, written)

    def update_backoff(self, change: Callable[[Json | None], Json | None]) -> None:
        path = self.paths.ratelimit_file
        with unit(path):
            doc = change(_read_or_none(path, "ignoring the shared back-off"))
            if doc is not None:
                files.write_json(path, doc)

    @contextmanager
    def call_slot(self, limit: int, between: Callable[[], None] | None = None
                  ) -> Iterator[int]:
        folder = files.ensure_dir(self.paths.calls_dir)
        # callers start their sweep at different slots, so they do not all queue on slot 0
        order = [(os.getpid() + i) % limit for i in range(limit)]
        slot, index = self._take_slot(folder, order, between)
        try:
            yield index
        finally:
            slot.release()

    @staticmethod
    def _take_slot(folder: Path, order: list[int],
                   between: Callable[[], None] | None) -> tuple[filelock.FileLock, int]:
        def take(index: int, wait: float) -> filelock.FileLock | None:
            slot = files.lock(folder / str(index), timeout=wait)
            try:
                slot.acquire()
            except filelock.Timeout:
                return None
            return slot
        return slots.sweep(order, take, between)
