"""The change feed of the files store: inotify events decoded into `Change`s
(CONTRACT §3's no-polling promise)."""

from __future__ import annotations

from teamd.store.files.base import Base


class Feeds(Base):
    """changes, wait_for."""
