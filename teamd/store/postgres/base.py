"""What every part of the PostgreSQL store shares: its URL, its connections (`Db`), the
advisory locks its units take, and a record's JSON in and out of a column."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from psycopg.types.json import Jsonb

from teamd.files import Json
from teamd.store import urls
from teamd.store.postgres.db import Db


def text(record: Any) -> str:
    """A record as the text a `json` column keeps (what its file's line would hold)."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def jsonb(record: Json) -> Jsonb:
    return Jsonb(record)


def lock_name(*what: str) -> str:
    """The name of the advisory lock a unit takes on what it guards (`"board", team`;
    `"inbox", team, name`; …): one name per thing, as the files store has one lock file."""
    return ":".join(what)


class Base:
    """The state the PostgreSQL store's parts (mixins of `PostgresStore`) have in common."""

    def __init__(self, url: str, root: Path) -> None:
        self.url = urls.check(url)
        self.root = root
        #: shown to people and in `status --json`: the URL, its password masked
        self.description = urls.mask(url)
        self.db = Db(url)
        #: the supervisor's claims this process holds (`Money.claim_supervisor`)
        self.claims: list[Any] = []

    def own_folders(self) -> list[Path]:
        return []  # the records are the database's: no local folder is the store's

    def together(self) -> AbstractContextManager[None]:
        return self.db.together()

    def apart(self) -> AbstractContextManager[None]:
        return self.db.apart()

    def after_commit(self, step: Callable[[], None]) -> None:
        self.db.after_commit(step)

    def append_rows(self, what: str, team: str, name: str, records: Sequence[Json],
                    then: Callable[[], None]) -> None:
        """Append `records` to member `name`'s log `what` (`inbox`, `session`: the table
        `inbox`, `sessions`) as one step, at its unit's commit under the log's lock; `then`
        notes the change."""
        rows = [(team, name, text(r)) for r in records]
        table = {"inbox": "inbox", "session": "sessions"}[what]

        def write() -> None:
            with self.db.conn().cursor() as cur:
                cur.executemany(f"INSERT INTO {table} (team, name, doc) VALUES (%s, %s, %s)",
                                rows)
            then()
        with self.db.unit():
            self.db.append_at_commit(lock_name(what, team, name), write)

    def team_exists(self, team: str) -> bool:
        return self.db.one("SELECT 1 FROM teams WHERE team = %s", (team,)) is not None

    def where(self, table: str, team: str, *key: object) -> str:
        """A record's place, for a message to a person (the URL masked)."""
        named = "/".join(str(k) for k in key)
        return f"{self.description} {table} {team}" + (f"/{named}" if named else "")
