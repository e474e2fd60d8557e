"""Units of work of the files store: the `*.lock` beside what a unit guards (CONTRACT §2),
held by one process at a time and entered again, without waiting, by the process (and
thread) that holds it already (flock belongs to an open file: taking it twice would wait
on oneself).

A unit is taken through its existing lock file when there is one, opened without O_CREAT:
`filelock` makes a missing folder again, so a unit taken just as a team is deleted would
bring the team's folder back.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from teamd import files
from teamd.errors import TeamdError

#: (pid, thread, path) of the units held here: the pid, so a forked child that inherited
#: the set does not take its parent's lock for its own; the thread, so another thread
#: of the process waits for the unit like another process would
_HOLDING: set[tuple[int, int, str]] = set()


@contextmanager
def held(path: Path, *, create: bool = True) -> Iterator[bool]:
    """Hold the lock guarding `path`, unless this thread holds it already; yields whether
    it is held. With no lock file yet, one is made if `create` and the folder exists;
    else (False) nothing is held."""
    key = (os.getpid(), threading.get_ident(), str(path))
    if key in _HOLDING:
        yield True
        return
    with contextlib.ExitStack() as stack:
        got = stack.enter_context(files.lock_existing(path))
        if not got and create and path.parent.is_dir():
            stack.enter_context(files.lock(path))
            got = True
        if got:
            _HOLDING.add(key)
            stack.callback(_HOLDING.discard, key)
        yield got


@contextmanager
def unit(path: Path) -> Iterator[None]:
    """Hold the lock guarding `path` (its folder must exist: TeamdError otherwise)."""
    with held(path) as got:
        if not got:
            raise TeamdError(f"{path.parent} does not exist")
        yield
