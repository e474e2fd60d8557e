"""teamd's cached roster (`roster_cache.Cached`): the same merged view as `roster.load`, re-reading
only the files it is told changed — one member's status file, or everything when
`config.json` changed."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import pytest

from teamd import actions, roster, roster_cache
from teamd.layout import Workspace

TEAM = "crew"
NAMES = ("alice", "bob", "carol", "dave")

#: status files opened while a step runs (None: not counting)
OPENED: list[str] | None = None


def _count_status_opens(event: str, args: tuple[Any, ...]) -> None:
    if OPENED is not None and event == "open" and isinstance(args[0], str | bytes | os.PathLike):
        path = os.fsdecode(args[0])
        if f"{os.sep}members{os.sep}" in path and path.endswith(".json"):
            OPENED.append(os.path.basename(path)[:-5])


sys.addaudithook(_count_status_opens)


def status_files_read(step: Callable[[], object]) -> list[str]:
    global OPENED
    OPENED = []
    try:
        step()
        return sorted(OPENED)
    finally:
        OPENED = None


@pytest.fixture
def crew(ws: Workspace) -> Workspace:
    actions.create_team(ws, TEAM)
    for name in NAMES:
        actions.spawn(ws, TEAM, name, "work")
    return ws


def set_error(ws: Workspace, name: str, text: str) -> None:
    roster.update_status(ws, TEAM, name, lambda m: m.update(last_error=text))


def test_the_cached_view_is_the_roster(crew: Workspace) -> None:
    cached = roster_cache.Cached(crew, TEAM)
    assert cached.load() == roster.load(crew, TEAM)


def test_only_the_member_named_is_read_again(crew: Workspace) -> None:
    cached = roster_cache.Cached(crew, TEAM)
    assert status_files_read(cached.load) == sorted(NAMES)  # the first read is whole
    set_error(crew, "bob", "trouble")
    assert status_files_read(cached.load) == []  # nothing named: nothing read
    assert roster.get(cached.load(), "bob")["last_error"] is None  # so not seen yet
    cached.member_changed("bob")
    assert status_files_read(cached.load) == ["bob"]
    assert roster.get(cached.load(), "bob")["last_error"] == "trouble"
    assert cached.load() == roster.load(crew, TEAM)


def test_a_changed_config_reads_every_status_again(crew: Workspace) -> None:
    """A two-file step writes config.json first: with the spec re-read, the statuses are
    too, so a new `desired` is never paired with a status from before the step."""
    cached = roster_cache.Cached(crew, TEAM)
    cached.load()
    actions.stop(crew, TEAM, "carol")
    set_error(crew, "dave", "later")
    cached.spec_changed()
    assert status_files_read(cached.load) == sorted(NAMES)
    assert cached.load() == roster.load(crew, TEAM)
    assert roster.get(cached.load(), "carol")["desired"] == "stopped"


def test_a_removed_member_leaves_the_view(crew: Workspace) -> None:
    cached = roster_cache.Cached(crew, TEAM)
    cached.load()
    actions.remove_member(crew, TEAM, "bob")
    cached.spec_changed()
    assert roster.names(cached.load()) == ["alice", "carol", "dave"]
    assert "bob" not in cached.status
