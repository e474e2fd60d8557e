"""The `[permissions]`, `[hooks]` and `[prices]` tables as the store's (CONTRACT §15).

With PostgreSQL every host applies the same rules, hooks and prices: the store keeps the
three tables as one document, `{"permissions": {…}, "hooks": {…}, "prices": {…}}` (each table
as teamd.toml writes it), and every process — teamd, its members, Claude Code's rules hook,
teamctl — applies it instead of its own file's tables (`settings.load`, through
`settings.apply_shared`); the flat keys stay each host's. A host's tables are written into
the store (`push`) by `teamctl init --store` and by a SIGHUP of its `teamd` (`reload`). The
files store shares nothing: there each root's teamd.toml is the only one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from teamd import settings
from teamd.errors import TeamdError
from teamd.files import Json
from teamd.settings import Settings

if TYPE_CHECKING:
    from teamd.layout import Workspace
    from teamd.store.api import Store

log = logging.getLogger(__name__)


def document(table: Mapping[str, Any]) -> Json:
    """The shared document of a teamd.toml read as `table`: its three tables as written
    (an empty one for a table it leaves out, which is that table's defaults)."""
    return {key: table.get(key, {}) for key in settings.TABLES}


def refreshed(store: Store, conf: Settings) -> Settings:
    """`settings.apply_shared`, or `conf` as it is when the store's document cannot be read
    now (a database away, a hand-broken row): what teamd keeps between its SIGHUPs."""
    try:
        return settings.apply_shared(store, conf)
    except TeamdError:
        return conf


def push(store: Store, table: Mapping[str, Any], where_from: str) -> bool:
    """Write the three tables of `table` (a whole teamd.toml, read) into `store`, after
    checking all of it as `teamd` would (BadInput naming `where_from`: nothing written);
    False when the store shares nothing (files)."""
    settings.from_table(table, where_from)
    return store.write_shared_tables(document(table))


def reload(ws: Workspace, last: Json) -> tuple[Settings, Json]:
    """A SIGHUP of `teamd`: teamd.toml read again (BadInput when it is broken: nothing is
    written, the caller keeps the settings in force) and its tables written into the store
    — when they changed since `last` (this teamd's file as it last read it), or the store
    has none — so that reloading a host for a host-local key never undoes another host's
    push. Returns the settings now in force and the tables read (the next `last`)."""
    table = settings.file_table(ws)
    own = settings.load_file(ws)  # all of it checked, the TEAMD_ variables too
    mine = document(table)
    held = ws.store.read_shared_tables()
    if held != mine and (mine != last or held is None):
        if push(ws.store, table, str(ws.settings_file)):
            log.info("wrote the [permissions], [hooks] and [prices] of %s into the store",
                     ws.settings_file)
    elif held is not None and held != mine:
        log.info("the [permissions], [hooks] and [prices] of %s are unchanged since read: "
                 "the store's stay in force (`teamctl init --store` writes them)",
                 ws.settings_file)
    return settings.apply_shared(ws.store, own), mine
