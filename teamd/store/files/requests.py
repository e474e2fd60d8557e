"""Request records `requests/{id}.json` and the team's `permissions.json` (CONTRACT §6, §11)."""

from __future__ import annotations

from teamd.store.files.base import Base


class Requests(Base):
    """request_unit, create/read/write/list requests; always_rules, add_always."""
