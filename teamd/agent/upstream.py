"""The forwarder's connections to the real API (`teamd.agent.forwarder`): one kept-alive
`http.client` connection per forwarding thread, to `ANTHROPIC_BASE_URL`.

The standard library's client, not httpx: a forwarded call's first byte is on Claude
Code's path to every answer, and httpx spends ~1.5 ms of Python per request on it
(measured by bench/bench_forwarder.py) where `http.client` spends a fraction. TLS uses the
context the supervisor built once before forking (`model.warm_up`), else the system's
default; an `https_proxy` (or `HTTPS_PROXY`, `no_proxy`) in the environment is honoured
with a CONNECT tunnel, as the SDK would honour it. A kept connection the API closed
meanwhile is opened again once, for a request not yet answered.
"""

from __future__ import annotations

import http.client
import ssl
import threading
import urllib.parse
import urllib.request

from teamd.agent import model

#: errors of a kept-alive connection the other end closed while it sat idle
STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError,
         http.client.CannotSendRequest)


class Upstream:
    """Where calls are forwarded to, with this thread's connection to it."""

    def __init__(self, base_url: str, timeout: float) -> None:
        url = urllib.parse.urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"ANTHROPIC_BASE_URL {base_url!r} is not an http(s) URL")
        self.tls = url.scheme == "https"
        self.host = url.hostname
        self.port = url.port or (443 if self.tls else 80)
        self.prefix = url.path.rstrip("/")  # a base URL may carry a path of its own
        self.timeout = timeout
        self.local = threading.local()

    def connection(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = self.connect()
        return conn

    def connect(self) -> http.client.HTTPConnection:
        proxy = None
        if self.tls and not urllib.request.proxy_bypass(self.host):
            proxy = urllib.request.getproxies().get("https")
        if not self.tls:
            return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        context = model.tls_context() or ssl.create_default_context()
        if proxy is None:
            return http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout,
                                               context=context)
        via = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        conn = http.client.HTTPSConnection(via.hostname or "", via.port or 80,
                                           timeout=self.timeout, context=context)
        conn.set_tunnel(self.host, self.port)
        return conn

    def send(self, method: str, path: str, headers: dict[str, str], body: bytes
             ) -> http.client.HTTPResponse:
        """Send the request on this thread's connection and return the answer as it
        begins (its status and headers read, its body not yet)."""
        for attempt in (1, 2):
            conn = self.connection()
            try:
                conn.request(method, self.prefix + path, body=body, headers=headers)
                return conn.getresponse()
            except STALE:
                self.drop()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def drop(self) -> None:
        """Close this thread's connection (after an answer not read to its end, or a
        failure): the next request opens a new one."""
        conn = getattr(self.local, "conn", None)
        self.local.conn = None
        if conn is not None:
            conn.close()
