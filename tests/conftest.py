"""Shared fixtures. Every test runs hermetic: its own workspace root, no API key, and no
systemd variables leaking in from the environment that runs pytest."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from teamd.layout import Workspace

SCRUB = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "NOTIFY_SOCKET",
         "WATCHDOG_USEC", "WATCHDOG_PID")


@pytest.fixture(autouse=True)
def hermetic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = tmp_path / "ws"
    root.mkdir()
    monkeypatch.setenv("TEAMD_ROOT", str(root))
    for key in SCRUB:
        monkeypatch.delenv(key, raising=False)
    for key in list(os.environ):
        if key.startswith("TEAMD_") and key != "TEAMD_ROOT":
            monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(tmp_path)
    yield root


@pytest.fixture
def ws(hermetic: Path) -> Workspace:
    return Workspace.at(hermetic)
