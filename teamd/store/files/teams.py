"""Teams coming and going under `.teams/` and `.tasks/` (CONTRACT §2, §9 create, delete, remove)."""

from __future__ import annotations

from teamd.store.files.base import Base


class Teams(Base):
    """create_team, delete_team, archives, team_names, team_exists, keep_removed, removed."""
