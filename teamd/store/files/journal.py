"""The journal `events.jsonl` and its rotation (CONTRACT §7)."""

from __future__ import annotations

from teamd.store.files.base import Base


class Journal(Base):
    """emit, read_journal, stream_journal."""
