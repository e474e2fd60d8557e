"""The store contract suite's fixture: every test here runs against each store.

A test in `tests/store/` is written against `teamd.store.api.Store` only — no path, no
file, no lock of its own — so any store (the files store today, PostgreSQL per CONTRACT
§15 next) must pass it unchanged. A new store joins by adding its name to STORES and a
branch to `make_store`.
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


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, hermetic: Path) -> Store:
    return make_store(request.param, hermetic)


@pytest.fixture
def crew(store: Store, hermetic: Path) -> str:
    """A team `crew` made the way a person makes one (`teamctl create`), in `store`."""
    from teamd import actions

    actions.create_team(Workspace.at(hermetic), "crew")
    return "crew"
