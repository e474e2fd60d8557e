"""Fixtures of the web view's tests: Debian's Chromium (the tests skip, saying why, where
it or Playwright is missing) and the real `teamctl web` on the test's root."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from teamd.layout import Workspace
from tests.web.webkit import Web, chromium, running_web, why_no_browser

if TYPE_CHECKING:
    from playwright.sync_api import Browser


@pytest.fixture
def browser() -> Iterator[Browser]:
    reason = why_no_browser()
    if reason:
        pytest.skip(reason)
    with chromium() as found:
        yield found


@pytest.fixture
def web(ws: Workspace) -> Iterator[Web]:
    with running_web(ws) as served:
        yield served
    assert served.proc.returncode == 0, served.output()  # Ctrl-C ends it with 0
