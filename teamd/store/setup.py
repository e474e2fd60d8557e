"""`teamctl init --store URL` (CONTRACT §15): a root's store named in its `teamd.toml`, the
store's schema made, and the file's `[permissions]`, `[hooks]` and `[prices]` written into
a store that shares them (PostgreSQL: `teamd.shared_tables`).

Everything that can be refused is checked before anything is written: the URL, the
`teamd.toml` it goes into (kept as it is, comments and all: only the `store` line changes or
is added; every key checked as `teamd` checks it), then the database (`install_schema`: a
wrong password, no such database, a newer schema → BadInput; a server that cannot be
reached → TeamdError). The password is never written: the file gets the URL without it.
A teamd.toml made here from the defaults (none was there, or `--force`) does not replace
tables the store already holds: another host pushed those, and a fresh file's are only the
defaults.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

from teamd import settings, shared_tables
from teamd.errors import BadInput
from teamd.layout import Workspace
from teamd.store import open_store, urls

#: the first table header of a TOML file: the flat table (where `store` is) ends there
_TABLE = re.compile(r"^[ \t]*\[", re.MULTILINE)
_STORE_LINE = re.compile(r"^[ \t]*store[ \t]*=.*$", re.MULTILINE)


def init_store(ws: Workspace, url: str, *, force: bool = False) -> dict[str, Any]:
    """Name `url`'s store in `ws`'s teamd.toml (the defaults first when there is none, or
    with `force`), create or migrate its schema, and write the file's tables into a store
    that shares them. Running it again changes nothing but the shared tables, which it
    writes again (it is how a person pushes them). What was done, for `init --json`: the
    file, the store as written, `schema` (`created`, `current`, or None for the files
    store) and `shared` (`written`, `kept`: the store's left as they were, or None)."""
    urls.check(url)
    path = ws.settings_file
    stored = urls.without_password(url)
    old = None if force or not path.exists() else path.read_text(encoding="utf-8")
    text = with_store(settings.defaults_text() if old is None else old, stored, str(path))
    table = tomllib.loads(text)
    settings.from_table(table, str(path))  # a key teamd would refuse: nothing written
    schema = shared = None
    if urls.is_postgres(url):
        schema = "created" if _install_schema(url) else "current"
        store = open_store(ws.root, url)
        if old is None and store.read_shared_tables() is not None:
            shared = "kept"
        else:
            shared = "written" if shared_tables.push(store, table, str(path)) else None
    if text != old:
        from teamd.files import atomic_write_bytes

        ws.root.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, text.encode())
    return {"settings": str(path), "store": stored, "schema": schema, "shared": shared}


def with_store(text: str, stored: str, where: str) -> str:
    """`text` (a teamd.toml) with its flat table's `store` set to `stored`, everything else
    as it was; BadInput naming `where` when `text` is no TOML."""
    import tomli_w

    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{where}: not valid TOML ({exc}); fix it first") from None
    line = tomli_w.dumps({"store": stored}).strip()
    table = _TABLE.search(text)
    end = table.start() if table else len(text)
    flat, rest = text[:end], text[end:]
    if _STORE_LINE.search(flat):
        flat = _STORE_LINE.sub(lambda _: line, flat, count=1)
    else:
        flat = (flat.rstrip("\n") + "\n" if flat.strip() else "") + line + "\n"
        flat += "\n" if rest else ""
    new = flat + rest
    try:
        written = tomllib.loads(new).get("store")
    except tomllib.TOMLDecodeError:
        written = None
    if written != stored:
        raise BadInput(f"{where}: its `store` line could not be set; set "
                       f"store = {stored!r} there by hand")
    return new


def _install_schema(url: str) -> bool:
    """Create or migrate the PostgreSQL store's schema; True when it was made or migrated."""
    from teamd.store import load_postgres

    return bool(load_postgres().install_schema(url))
