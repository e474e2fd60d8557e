"""The roster's files: `config.json` and `members/{name}.json` with their locks (CONTRACT §4)."""

from __future__ import annotations

from teamd.store.files.base import Base


class Roster(Base):
    """roster_unit, member_unit, read/write spec and states."""
