"""`spend.json`, the root's `ratelimit.json` and the call slots `.calls/` (CONTRACT §12)."""

from __future__ import annotations

from teamd.store.files.base import Base


class Money(Base):
    """read_spend, add_spend, read_backoff, update_backoff, call_slot."""
