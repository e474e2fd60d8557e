"""Inbox files `{name}_inbox.jsonl` and their exactly-once take (CONTRACT §3).

A delivery is one locked, fsynced append; a take hands the lines to the consumer (which
records them durably) under the inbox lock before the inbox is cut, moving refused lines to
`{name}_inbox.rejected.jsonl`. Which lines are messages is the caller's `Judge`
(`teamd.inbox`'s rules); how they are kept is this module's.
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Callable, Sequence

from teamd import files, linescan
from teamd.files import Json
from teamd.store.files.base import Base

log = logging.getLogger(__name__)


class Inboxes(Base):
    """deliver, has_mail, inbox_mark, peek, take, wait_unlocked_inbox, describe_inbox."""

    def deliver(self, team: str, name: str, messages: Sequence[Json]) -> None:
        files.append_jsonl(self.paths.inbox(team, name), messages, durable=True)

    def has_mail(self, team: str, name: str) -> bool:
        # a line is one locked write: size 0 means none
        try:
            return self.paths.inbox(team, name).stat().st_size > 0
        except FileNotFoundError:
            return False

    def inbox_mark(self, team: str, name: str) -> tuple[int, int, int] | None:
        try:
            st = self.paths.inbox(team, name).stat()
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns

    def describe_inbox(self, team: str, name: str) -> str:
        path = self.paths.inbox(team, name)
        return str(path.relative_to(self.root)) if path.is_relative_to(self.root) else str(path)

    def peek(self, team: str, name: str, judge: linescan.Judge) -> list[Json]:
        path = self.paths.inbox(team, name)
        found = linescan.read_lines(path, judge)
        if found.refused:
            log.warning("%s: skipping %d line(s) that are not messages (%s); its owner's next "
                        "read moves them to %s", path, len(found.refused),
                        ", ".join(sorted({r.reason for r, _ in found.refused})),
                        files.rejected_path(path).name)
        return found.taken

    def take(self, team: str, name: str, consume: Callable[[list[Json]], None],
             judge: linescan.Judge, *, keep: Callable[[Json], bool] | None = None
             ) -> linescan.Sorted:
        return files.drain_lines(self.paths.inbox(team, name), consume, judge, keep)

    def wait_unlocked_inbox(self, team: str, name: str) -> None:
        # A blocking flock is handed over by the kernel at once, where `files.lock`
        # (filelock) would retry every millisecond; the shared lock is dropped at once.
        try:
            fd = os.open(files.lock_path(self.paths.inbox(team, name)),
                         os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
        finally:
            os.close(fd)  # releases it
