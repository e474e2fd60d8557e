"""The roster's files: `config.json` and `members/{name}.json` with their locks (CONTRACT §4).

A unit is a lock file beside its record (`config.json.lock`, `members/{name}.json.lock`),
taken through the existing lock file when there is one: `filelock` makes a missing folder
again, so a lock taken just as a team is deleted would bring its folder back. A unit this
process holds already is entered again without waiting (flock belongs to an open file:
taking it twice would wait on ourselves).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from teamd import files
from teamd.files import Json
from teamd.store.files.base import Base

#: (pid, lock path) of the roster and member units this process holds: a read or write
#: inside a step that holds one goes on under it
_HOLDING: set[tuple[int, str]] = set()


@contextmanager
def _lock(path: Path, *, create: bool) -> Iterator[bool]:
    """Hold the lock of `path`, unless this process holds it already; yields whether it
    does. With no lock file yet, made by `files.lock` if `create` and the folder exists,
    else (False) nothing is held."""
    key = (os.getpid(), str(path))
    if key in _HOLDING:
        yield True
        return
    with contextlib.ExitStack() as stack:
        held_lock = stack.enter_context(files.lock_existing(path))
        if not held_lock and create and path.parent.is_dir():
            stack.enter_context(files.lock(path))
            held_lock = True
        if held_lock:
            _HOLDING.add(key)
            stack.callback(_HOLDING.discard, key)
        yield held_lock


class Roster(Base):
    """roster_unit, member_unit, read/write spec and states."""

    def roster_unit(self, team: str) -> contextlib.AbstractContextManager[bool]:
        return _lock(self.paths.config(team), create=True)

    @contextmanager
    def member_unit(self, team: str, name: str, *, create: bool = True) -> Iterator[bool]:
        path = self.paths.member_status(team, name)
        if create and not path.parent.is_dir() and self.paths.team_dir(team).is_dir():
            files.ensure_dir(path.parent)
        with _lock(path, create=create) as held:
            yield held

    def read_spec(self, team: str) -> Json | None:
        return files.read_json(self.paths.config(team))

    def write_spec(self, team: str, doc: Json) -> None:
        files.write_json(self.paths.config(team), doc)

    def read_state(self, team: str, name: str) -> Json | None:
        return files.read_json(self.paths.member_status(team, name))

    def write_state(self, team: str, name: str, doc: Json) -> None:
        files.write_json(self.paths.member_status(team, name), doc)

    def drop_state(self, team: str, name: str) -> None:
        self.paths.member_status(team, name).unlink(missing_ok=True)

    def describe_spec(self, team: str) -> str:
        """Where the team's roster is, for a message to a person."""
        return str(self.paths.config(team))
