"""Fixtures of the fault suite: a scripted model server that logs every request to a file
(the log the "shown exactly once" proofs read), and a working directory for the members."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from teamd.scripted import ScriptedServer


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ScriptedServer]:
    with ScriptedServer({"rules": []}, log_path=tmp_path / "requests.jsonl") as srv:
        yield srv


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    d = tmp_path / "work"
    d.mkdir()
    return d
