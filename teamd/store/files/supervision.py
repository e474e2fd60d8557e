"""The supervisor's lock `teamd.lock`, `teamd.json`, and `person_needed.json` (CONTRACT §2, §11)."""

from __future__ import annotations

from teamd.store.files.base import Base


class Supervision(Base):
    """claim_supervisor, supervisor_info, write_supervisor_info, release_supervisor,
    read/write paged."""
