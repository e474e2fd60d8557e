"""The store contract suite's fixture: every test here runs against each store.

A test in `tests/store/` is written against `teamd.store.api.Store` only — no path, no
file, no lock of its own — so any store (the files store today, PostgreSQL per CONTRACT
§15 next) must pass it unchanged. A new store joins by adding its name to STORES, a
branch to `make_store`, and its `Faults`: how a crash leaves that store, which the few
tests about recovery need (the one place a test knows what a store is made of).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from teamd.layout import Workspace
from teamd.store.api import Store

STORES = ["files"]


def make_store(kind: str, root: Path) -> Store:
    if kind == "files":
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


@pytest.fixture
def faults(store: Store) -> Faults:
    if store.description == "files":
        return FilesFaults(store)
    raise AssertionError(f"say how a crash leaves a {store.description} store")


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, hermetic: Path) -> Store:
    return make_store(request.param, hermetic)


@pytest.fixture
def crew(store: Store, hermetic: Path) -> str:
    """A team `crew` made the way a person makes one (`teamctl create`), in `store`."""
    from teamd import actions

    actions.create_team(Workspace.at(hermetic), "crew")
    return "crew"
