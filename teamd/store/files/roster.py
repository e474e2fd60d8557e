"""The roster's files: `config.json` and `members/{name}.json` with their locks (CONTRACT §4).

A unit is a lock file beside its record (`config.json.lock`, `members/{name}.json.lock`),
held as every unit of the files store is (`units.held`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager

from teamd import files, removals
from teamd.files import Json
from teamd.store.files.base import Base
from teamd.store.files.units import held


class Roster(Base):
    """roster_unit, member_unit, read/write spec and states."""

    def roster_unit(self, team: str) -> contextlib.AbstractContextManager[bool]:
        return held(self.paths.config(team))

    @contextmanager
    def member_unit(self, team: str, name: str, *, create: bool = True) -> Iterator[bool]:
        path = self.paths.member_status(team, name)
        if create and not path.parent.is_dir() and self.paths.team_dir(team).is_dir():
            files.ensure_dir(path.parent)
        with held(path, create=create) as got:
            yield got

    def read_spec(self, team: str) -> Json | None:
        return files.read_json(self.paths.config(team))

    def write_spec(self, team: str, doc: Json) -> None:
        files.write_json(self.paths.config(team), doc)

    def read_state(self, team: str, name: str) -> Json | None:
        return files.read_json(self.paths.member_status(team, name))

    def write_state(self, team: str, name: str, doc: Json) -> None:
        files.write_json(self.paths.member_status(team, name), doc)

    def drop_state(self, team: str, name: str) -> None:
        removals.remove_file(self.paths.member_status(team, name))

    def describe_spec(self, team: str) -> str:
        """Where the team's roster is, for a message to a person."""
        return str(self.paths.config(team))
