"""Units of work of the files store: the `*.lock` beside what a unit guards (CONTRACT §2),
held by one process at a time and entered again, without waiting, by the process (and
thread) that holds it already (flock belongs to an open file: taking it twice would wait
on oneself).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from teamd import files

#: (pid, thread, path) of the units held here: the pid, so a forked child that inherited
#: the set does not take its parent's lock for its own; the thread, so another thread
#: of the process waits for the unit like another process would
_HOLDING: set[tuple[int, int, str]] = set()


@contextmanager
def unit(path: Path) -> Iterator[None]:
    """Hold the lock guarding `path` (its folder must exist: TeamdError otherwise)."""
    key = (os.getpid(), threading.get_ident(), str(path))
    if key in _HOLDING:
        yield
        return
    with files.lock(path):
        _HOLDING.add(key)
        try:
            yield
        finally:
            _HOLDING.discard(key)
