"""The store contract suite's fixture: every test here runs against each store.

A test in `tests/store/` is written against `teamd.store.api.Store` only — no path, no
file, no lock of its own — so any store (the files store today, PostgreSQL per CONTRACT
§15 next) must pass it unchanged. A new store joins by adding its name to STORES, a
branch to `make_store`, and its `Faults`: how a crash leaves that store, which the few
tests about recovery need (the one place a test knows what a store is made of).

The PostgreSQL store runs on a fresh database of its own per test (the `pg_url` fixture of
tests/conftest.py); `TEAMD_STORE` names it, so `Workspace.at(root).store` in a forked
worker opens the same store the test has.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from teamd.layout import Workspace
from teamd.store.api import Store

STORES = ["files", "postgres"]


def make_store(kind: str, root: Path, url: str | None = None) -> Store:
    """The store `kind` of the workspace at `root` (`url`: the database of a PostgreSQL
    store, which `TEAMD_STORE` must name too, for the forked workers)."""
    if kind == "files":
        return Workspace.at(root).store
    if kind == "postgres":
        assert url is not None and os.environ.get("TEAMD_STORE") == url
        return Workspace.at(root).store
    raise AssertionError(f"no such store {kind!r}")


class Faults:
    """What a writer that died mid-step leaves in a store, made by hand."""

    def leave_board(self, team: str) -> None:
        """A delete that stopped after the team went but before its board did."""
        raise NotImplementedError

    def tear_session(self, team: str, name: str, junk: bytes) -> None:
        """A session writer that died mid-line: `junk` after the last whole record."""
        raise NotImplementedError

    def torn(self, team: str, name: str) -> bool:
        """Whether the session still ends in a torn line."""
        raise NotImplementedError

    def cut(self) -> None:
        """This process's connection to the store ended by its server (a store that has
        none: pytest.skip)."""
        raise NotImplementedError


class FilesFaults(Faults):
    def __init__(self, store: Store) -> None:
        from teamd.store.files import FilesStore

        assert isinstance(store, FilesStore)
        self.store = store

    def leave_board(self, team: str) -> None:
        self.store.paths.team_dir(team).rename(self.store.root / "gone")

    def tear_session(self, team: str, name: str, junk: bytes) -> None:
        with open(self.store.paths.session(team, name), "ab") as fh:
            fh.write(junk)

    def torn(self, team: str, name: str) -> bool:
        return not self.store.paths.session(team, name).read_bytes().endswith(b"\n")

    def cut(self) -> None:
        pytest.skip("the files store has no connection to cut")


class PostgresFaults(Faults):
    """A crash in a database leaves no partial row (a transaction commits whole): what a
    fault leaves is a hand edit's — a row whose record is not a whole one."""

    def __init__(self, store: Store) -> None:
        from teamd.store.postgres import PostgresStore

        assert isinstance(store, PostgresStore)
        self.store = store

    def leave_board(self, team: str) -> None:
        with self.store.db.unit():
            for table in ("teams", "members", "journal_parts", "team_docs"):
                self.store.db.execute(f"DELETE FROM {table} WHERE team = %s", (team,))

    def tear_session(self, team: str, name: str, junk: bytes) -> None:
        with self.store.db.unit():
            self.store.db.execute("INSERT INTO sessions (team, name, bad) VALUES (%s, %s, %s)",
                                  (team, name, junk))

    def torn(self, team: str, name: str) -> bool:
        return bool(self.store.db.one("SELECT count(*) FROM sessions WHERE team = %s AND "
                                      "name = %s AND doc IS NULL", (team, name)))

    def cut(self) -> None:
        mine = self.store.db.conn().info.backend_pid
        with self.store.db.fresh() as other:
            assert other.execute("SELECT pg_terminate_backend(%s)", (mine,)).fetchone()[0]


@pytest.fixture
def faults(store: Store) -> Faults:
    if store.description == "files":
        return FilesFaults(store)
    if store.description.startswith("postgres"):
        return PostgresFaults(store)
    raise AssertionError(f"say how a crash leaves a {store.description} store")


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, hermetic: Path,
          monkeypatch: pytest.MonkeyPatch) -> Store:
    url = None
    if request.param == "postgres":
        url = request.getfixturevalue("pg_url")
        monkeypatch.setenv("TEAMD_STORE", url)
    return make_store(request.param, hermetic, url)


@pytest.fixture
def crew(store: Store, hermetic: Path) -> str:
    """A team `crew` made the way a person makes one (`teamctl create`), in `store`."""
    from teamd import actions

    actions.create_team(Workspace.at(hermetic), "crew")
    return "crew"
