"""The scripted Anthropic Messages API server: `ScriptedServer`, the object tests hold.

This module owns the server's life (bind, serve on a daemon thread, stop: cut open
connections, wake delayed answers) and its scenario (replace it, add a rule). What it
keeps of each request is its `Recorder`'s (`teamd.scripted.record`); the HTTP side is
`teamd.scripted.handler`'s, the bytes' shapes `teamd.scripted.wire`'s; which answer a
request gets is decided in `teamd.scripted.scenario`.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from teamd.scripted.cache import PromptCache
from teamd.scripted.handler import Handler, HTTPServer
from teamd.scripted.record import Recorder
from teamd.scripted.rules import Rule
from teamd.scripted.scenario import Scenario
from teamd.scripted.thinking import Ledger

log = logging.getLogger(__name__)


class ScriptedServer(Recorder):
    """A scripted Messages API on a background thread; use as a context manager.

    `url` is what goes into `ANTHROPIC_BASE_URL` (or `anthropic.Anthropic(base_url=...)`).
    Every `/v1/messages` request is recorded (see `requests`), and `wait_for` blocks until
    one matching a predicate arrives.
    """

    def __init__(
        self,
        scenario: Scenario | Mapping[str, Any] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        log_path: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(log_path)
        self._scenario = self._as_scenario(scenario)
        self._scenario_lock = threading.Lock()
        self._host = host
        self._port = port
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: HTTPServer | None = None
        self._thread: threading.Thread | None = None
        # prompt caching, reported in each reply's usage (see teamd.scripted.cache)
        self.cache = PromptCache()
        # which thinking came with which tool call (see teamd.scripted.checks)
        self.thinking = Ledger()

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> ScriptedServer:
        """Bind, start serving on a daemon thread, and return self."""
        if self._httpd is not None:
            return self
        self._open_log()
        try:
            httpd = HTTPServer((self._host, self._port), Handler)
        except BaseException:
            self._close_log()
            raise
        httpd.owner = self
        self._httpd = httpd
        self._stopping.clear()
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"scripted-api:{httpd.server_address[1]}",
            daemon=True,
        )
        self._thread.start()
        log.info("scripted API listening on %s", self.url)
        return self

    def stop(self) -> None:
        """Stop serving, cut open connections and wake any delayed answers. Idempotent."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.server_close()
        with self._connections_lock:
            connections = list(self._connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        self._close_log()
        log.info("scripted API stopped")

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the scripted server is not running; call start() first")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}"

    # -- scenario --------------------------------------------------------------------

    @property
    def scenario(self) -> Scenario:
        with self._scenario_lock:
            return self._scenario

    def set_scenario(self, scenario: Scenario | Mapping[str, Any]) -> Scenario:
        """Replace the scenario; requests already being answered keep their decision."""
        new = self._as_scenario(scenario)
        with self._scenario_lock:
            self._scenario = new
        return new

    def add_rule(self, rule: Rule | Mapping[str, Any], *, first: bool = False) -> Rule:
        """Add a rule to the current scenario (at the end, or in front with first=True)."""
        return self.scenario.add_rule(rule, first=first)

    @staticmethod
    def _as_scenario(scenario: Scenario | Mapping[str, Any] | None) -> Scenario:
        if scenario is None:
            return Scenario()
        return Scenario.from_dict(scenario)

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._connections_lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

