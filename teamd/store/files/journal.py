"""The journal `events.jsonl` and its rotation (CONTRACT §7).

Appends are one locked write; a journal past `max_bytes` is rotated first, under the same
lock, to `events.1.jsonl` … `events.{keep}.jsonl`. Reading it as a stream, across those
files and following new lines, is `journal_stream`'s.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Generator, Sequence
from pathlib import Path

from teamd import files, removals
from teamd.errors import TeamdError
from teamd.files import Json
from teamd.store.files import journal_stream
from teamd.store.files.base import Base
from teamd.store.files.units import unit

log = logging.getLogger(__name__)


class Journal(Base):
    """emit, read_journal, stream_journal, describe_journal."""

    def emit(self, team: str, records: Sequence[Json], *, max_bytes: int, keep: int) -> None:
        path = self.paths.events(team)
        if not path.parent.is_dir():
            log.debug("team %s is gone; not journalling %d event(s)", team, len(records))
            return
        try:
            with unit(path):
                _rotate_if_needed(path, max_bytes, keep)
                files.append_jsonl(path, records, locked=True)
        except (FileNotFoundError, TeamdError):
            if path.parent.is_dir():
                raise
            # the team was removed between the check and the write (its deletion raced us)
            log.debug("team %s is gone; not journalling %d event(s)", team, len(records))

    def read_journal(self, team: str) -> list[Json]:
        return files.read_jsonl(self.paths.events(team)).records

    def describe_journal(self, team: str, archive: str | None = None) -> str:
        return str(self._journal_path(team, archive))

    def _journal_path(self, team: str, archive: str | None) -> Path:
        if archive is None:
            return self.paths.events(team)
        return (self.root / archive) / "events.jsonl"  # an absolute `archive` stays itself

    def stream_journal(self, team: str, *, archive: str | None = None,
                       match: Callable[[Json], bool] | None = None,
                       last: int | None = None, follow: bool = False,
                       history: bool = True, poll: float = 0.5,
                       stop_at_deletion: bool = True,
                       on_bad: Callable[[bytes], None] | None = None,
                       on_caught_up: Callable[[], None] | None = None
                       ) -> Generator[Json, None, None]:
        return journal_stream.stream(
            self._journal_path(team, archive), match=match, last=last, follow=follow,
            history=history, poll=poll, stop_at_deletion=stop_at_deletion, on_bad=on_bad,
            on_caught_up=on_caught_up)


def _rotate_if_needed(path: Path, max_bytes: int, keep: int) -> None:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    if size < max_bytes:
        return
    if keep <= 0:
        os.truncate(path, 0)
        return
    rotated = journal_stream.rotated
    removals.remove_file(rotated(path, keep))
    for n in range(keep - 1, 0, -1):
        if rotated(path, n).exists():
            removals.rename(rotated(path, n), rotated(path, n + 1))
    removals.rename(path, rotated(path, 1))
    log.info("rotated %s", path)
