"""Wake on file changes without polling delay: inotify on folders, polling where it is missing.

Arm a `Watcher` *before* the final check of whatever you wait for; a change after arming
is queued in the kernel, so nothing slips between the check and the wait.
"""

from __future__ import annotations

import logging
import select
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

log = logging.getLogger(__name__)

try:
    import inotify_simple
except ImportError:  # not Linux, or not installed: fall back to polling
    inotify_simple = None


class Watcher:
    """Watches folders for files created, written, moved or deleted in them."""

    def __init__(self, folders: list[Path], poll_fallback: float = 0.5,
                 interesting: Callable[[str], bool] | None = None) -> None:
        """`interesting` filters file names: other changes (a journal line, a lock file)
        do not end a `wait`."""
        self.poll_fallback = poll_fallback
        self.interesting = interesting
        self._ino = None
        self._watched: dict[Path, int] = {}
        if inotify_simple is not None:
            try:
                self._ino = inotify_simple.INotify(inheritable=False, nonblocking=True)
            except OSError as exc:  # e.g. fs.inotify.max_user_instances reached
                log.warning("inotify unavailable (%s); polling every %.1fs", exc, poll_fallback)
        for folder in folders:
            self.add(folder)

    def add(self, folder: Path) -> None:
        # no "already watched" short cut: a folder deleted and made again needs a new
        # watch, and the kernel hands back the same descriptor for one still in place
        if self._ino is None:
            return
        f = inotify_simple.flags
        mask = f.CREATE | f.MODIFY | f.MOVED_TO | f.MOVED_FROM | f.DELETE | f.CLOSE_WRITE
        try:
            self._watched[folder] = self._ino.add_watch(str(folder), mask)
        except OSError as exc:
            log.debug("cannot watch %s: %s", folder, exc)

    def remove(self, folder: Path) -> None:
        wd = self._watched.pop(folder, None)
        if wd is not None and self._ino is not None:
            try:
                self._ino.rm_watch(wd)
            except OSError:
                pass  # the folder is gone, and its watch with it

    @property
    def polling(self) -> bool:
        return self._ino is None

    def fileno(self) -> int:
        if self._ino is None:
            raise OSError("no inotify descriptor (polling)")
        return int(self._ino.fileno())

    def drain(self) -> list[str]:
        """Names of the files that changed since the last call (empty when polling)."""
        if self._ino is None:
            return []
        try:
            return [e.name for e in self._ino.read(timeout=0)]
        except BlockingIOError:
            return []

    def drain_events(self) -> tuple[list[tuple[Path | None, str]], bool]:
        """(folder, name) of each change since the last call, and whether the kernel's
        queue overflowed meanwhile (changes were lost: whoever keeps a picture of the
        files must read them again). Empty when polling."""
        if self._ino is None:
            return [], False
        try:
            events = self._ino.read(timeout=0)
        except BlockingIOError:
            return [], False
        folders = {wd: folder for folder, wd in self._watched.items()}
        overflow = inotify_simple.flags.Q_OVERFLOW
        return ([(folders.get(e.wd), e.name) for e in events if e.name],
                any(e.mask & overflow for e in events))

    def wait(self, timeout: float | None, also: Sequence[int] = ()) -> bool:
        """Block until something changed, a descriptor in `also` is readable (e.g. a
        signal wakeup fd, left for the caller to empty), or `timeout` passed. True if
        woken by a change or by `also`."""
        if self._ino is None:
            nap = self.poll_fallback if timeout is None else min(timeout, self.poll_fallback)
            if also:
                select.select(list(also), [], [], nap)
            else:
                time.sleep(nap)
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self._ino, *also], [], [], left)
            if not ready:
                return False
            if any(fd in ready for fd in also):
                return True
            names = self.drain()
            if self.interesting is None or any(self.interesting(n) for n in names) \
                    or not names:
                return True

    def close(self) -> None:
        if self._ino is not None:
            self._ino.close()
            self._ino = None

    def __enter__(self) -> Watcher:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

