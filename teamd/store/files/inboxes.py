"""Inbox files `{name}_inbox.jsonl` and their exactly-once take (CONTRACT §3)."""

from __future__ import annotations

from teamd.store.files.base import Base


class Inboxes(Base):
    """deliver, has_mail, inbox_size, peek, take, wait_unlocked_inbox."""
