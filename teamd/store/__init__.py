"""The store: where a workspace's records live, behind one interface (`api.Store`).

`open_store(root)` gives the store of a root: the files store (`teamd.store.files`) today;
the PostgreSQL store of CONTRACT §15 next. What changed in a store reaches readers as typed
`Change`s (`teamd.store.changes`), never as file names.
"""

from __future__ import annotations

from pathlib import Path

from teamd.store.api import Feed, Store
from teamd.store.changes import Change, Kind

__all__ = ["Change", "Feed", "Kind", "Store", "open_store"]


def open_store(root: Path) -> Store:
    """The store of the workspace at `root`."""
    from teamd.store.files import FilesStore
    return FilesStore(root)
