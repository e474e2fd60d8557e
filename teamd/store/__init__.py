"""The store: where a workspace's records live, behind one interface (`api.Store`).

`open_store(root, url)` gives the store of a root: the files store (`teamd.store.files`) by
default, the PostgreSQL store (`teamd.store.postgres`, CONTRACT §15) for a postgresql://
URL. What changed in a store reaches readers as typed `Change`s (`teamd.store.changes`),
never as file names.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

from teamd.errors import BadInput
from teamd.store.api import Feed, Store
from teamd.store.changes import Change, Kind

__all__ = ["Change", "Feed", "Kind", "Store", "load_postgres", "open_store"]


def open_store(root: Path, url: str | None = None) -> Store:
    """The store of the workspace at `root` named by `url` (`files`, or a PostgreSQL URL;
    `Workspace.store` says which). BadInput for a URL that cannot be one, or a PostgreSQL
    store without its extra installed."""
    from teamd.store import urls
    if url is None or urls.check(url) == urls.FILES:
        from teamd.store.files import FilesStore
        return FilesStore(root)
    store: Store = load_postgres().PostgresStore(url, root)
    return store


def load_postgres() -> ModuleType:
    """`teamd.store.postgres`, imported only now (psycopg is the `postgres` extra's);
    BadInput saying how to install it when it is not there."""
    try:
        return importlib.import_module("teamd.store.postgres")
    except ImportError as exc:
        raise BadInput(f"the PostgreSQL store needs psycopg: pip install 'teamd[postgres]' "
                       f"({exc})") from None
