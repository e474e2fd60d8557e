"""What the web view's tests, its benchmark and its screenshot script share: the real
`teamctl web` as a subprocess (its URL read from its one line of standard output), and
Debian's Chromium driven by Playwright (never `playwright install`: it downloads a browser).
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from teamd.layout import Workspace
from tests.helpers_proc import TEAMCTL, clean_env

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def why_no_browser() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[test]')"
    if not CHROMIUM.exists():
        return f"no Chromium at {CHROMIUM} (apt-get install -y chromium; .ci/run does)"
    return None


class Web:
    """A running `teamctl --root ROOT web`: `url` (with the token), `base`, `port`."""

    def __init__(self, ws: Workspace, *args: str, env: dict[str, str] | None = None,
                 log: Path | None = None) -> None:
        self.log_path = log or ws.root.parent / "web.log"
        self.log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen([str(TEAMCTL), "--root", str(ws.root), "web", *args],
                                     stdout=subprocess.PIPE, stderr=self.log,
                                     stdin=subprocess.DEVNULL,
                                     env=clean_env() if env is None else env)
        assert self.proc.stdout is not None
        self.line = self.proc.stdout.readline().decode()  # blocks until served or gone
        if not self.line:
            raise AssertionError(f"teamctl web exited {self.proc.wait(10)}: {self.output()}")
        self.url = self.line.strip()
        parts = urlsplit(self.url)
        self.base = f"{parts.scheme}://{parts.netloc}"
        self.port = int(parts.port or 80)
        self.token = parts.query.removeprefix("token=")

    def output(self) -> str:
        """What it logged (its standard error)."""
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> int:
        """Ctrl-C, as a person ends it; its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            code = self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(10)
        rest = self.proc.stdout.read() if self.proc.stdout else b""
        self.extra_stdout = rest.decode()
        self.log.close()
        return code


@contextmanager
def running_web(ws: Workspace, *args: str, env: dict[str, str] | None = None
                ) -> Iterator[Web]:
    web = Web(ws, *args, env=env)
    try:
        yield web
    finally:
        web.stop()


@contextmanager
def chromium() -> Iterator[Browser]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        try:
            yield browser
        finally:
            browser.close()


class Watched:
    """A page with every dialog, console error and page error it raised recorded."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        page.on("dialog", self._dialog)
        page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    def _dialog(self, dialog: Any) -> None:
        """Recorded; the page's own "stop …?" and "remove …?" confirmed, anything else
        (an `alert` a payload would raise) dismissed."""
        self.dialogs.append(dialog.message)
        if dialog.type == "confirm":
            dialog.accept()
        else:
            dialog.dismiss()


def open_page(browser: Browser, web: Web, path: str = "/", width: int = 1400,
              height: int = 900) -> Watched:
    """A new page logged in with the token (the cookie set), then at `path`, loaded."""
    page = browser.new_page(viewport={"width": width, "height": height})
    watched = Watched(page)
    page.goto(web.url)
    if path != "/":
        page.goto(web.base + path)
    page.wait_for_selector("main[data-loaded]")
    return watched
