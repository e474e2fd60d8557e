"""teamd.ratelimit: the root's shared back-off file (CONTRACT.md sections 2 and 12)."""

from __future__ import annotations

import os
import time

import pytest

from teamd import actions, files, ratelimit
from teamd.layout import Workspace


@pytest.fixture
def root(ws: Workspace) -> Workspace:
    actions.create_team(ws, "t")  # .teams/ exists, as it does once any team does
    return ws


def test_a_record_is_the_contracts_document_private_and_whole(root: Workspace) -> None:
    until = time.time() + 5
    ratelimit.record(root, until=until, status=529, model="claude-x", source="backoff")
    assert files.read_json(root.store.paths.ratelimit_file) == {
        "schema": 1, "until": until, "status": 529, "model": "claude-x", "source": "backoff"}
    assert root.store.paths.ratelimit_file.stat().st_mode & 0o777 == 0o600
    assert not [p.name for p in root.store.paths.teams_dir.iterdir() if p.name.endswith(".tmp")]
    assert (ratelimit.in_force(root, 60) or {}).get("until") == until


def test_a_later_until_is_never_shortened(root: Workspace) -> None:
    now = time.time()
    ratelimit.record(root, until=now + 10, status=429, model="a", source="retry-after")
    kept = ratelimit.record(root, until=now + 2, status=529, model="b", source="backoff")
    assert kept["until"] == now + 10 and kept["model"] == "a"
    longer = ratelimit.record(root, until=now + 20, status=529, model="b", source="backoff")
    assert files.read_json(root.store.paths.ratelimit_file) == longer


def test_nothing_is_in_force_once_until_has_passed(root: Workspace) -> None:
    assert ratelimit.in_force(root, 60) is None  # no file
    now = time.time()
    ratelimit.record(root, until=now + 3, status=429, model="a", source="retry-after")
    assert ratelimit.in_force(root, 60, now=now + 2.9) is not None
    assert ratelimit.in_force(root, 60, now=now + 3) is None


def test_until_is_capped_at_retry_max_wait_past_the_write(root: Workspace) -> None:
    # a hand-edited or stale far-future until cannot stall the root longer than a writer
    # could have asked for
    files.write_json(root.store.paths.ratelimit_file, {"schema": 1, "until": time.time() + 3600,
                                           "status": 429, "model": "a", "source": "backoff"})
    written = root.store.paths.ratelimit_file.stat().st_mtime
    limit = ratelimit.in_force(root, 60)
    assert limit is not None and limit["until"] == pytest.approx(written + 60)
    os.utime(root.store.paths.ratelimit_file, (written - 120, written - 120))
    assert ratelimit.in_force(root, 60) is None


@pytest.mark.parametrize("text", [b"{not json", b"[]", b'{"schema": 1, "until": "soon"}',
                                  b'{"schema": 1, "until": NaN}', b'{"schema": 1}'])
def test_a_bad_file_is_ignored_and_replaced_by_the_next_record(root: Workspace,
                                                               text: bytes) -> None:
    root.store.paths.ratelimit_file.write_bytes(text)
    assert ratelimit.in_force(root, 60) is None
    until = time.time() + 5
    ratelimit.record(root, until=until, status=429, model="a", source="retry-after")
    assert (ratelimit.in_force(root, 60) or {}).get("until") == until


def test_an_unknown_source_is_refused(root: Workspace) -> None:
    with pytest.raises(ValueError, match="source"):
        ratelimit.record(root, until=time.time(), status=429, model="a", source="guess")
    assert not root.store.paths.ratelimit_file.exists()
