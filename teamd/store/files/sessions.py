"""Sessions `sessions/{name}.jsonl` and transcripts (CONTRACT §6, §8)."""

from __future__ import annotations

from teamd.store.files.base import Base


class Sessions(Base):
    """read_session, append_session, keep_transcript, follow_session."""
