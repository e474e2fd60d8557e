"""Who may use the web view (CONTRACT §16), as one ASGI middleware before every route.

- The URL printed carries a fresh random token: `?token=` (or `--open`'s one-time `?code=`,
  since a command line shows in `ps`) sets an `HttpOnly; SameSite=Strict` cookie named
  with the port (cookies are not kept apart by port) and redirects to the same page
  without it. Every request — pages, assets, the event stream — needs the cookie: 401.
- A `Host` or `Origin` that is not the served address: 403 (DNS rebinding, other sites).
- Every POST carries the CSRF token (`X-CSRF-Token`, handed to the page in its HTML): 403.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

CODE_LIFE = 60.0  #: seconds a one-time code for `--open` stays good


def loopback(address: str) -> bool:
    """Is `address` this machine's loopback (where only local users can reach)?"""
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address == "localhost"


def _same(given: str | None, wanted: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), wanted.encode())


@dataclass
class Keys:
    """This run's secrets and the addresses it answers to (`host:port`, lower case)."""

    hosts: set[str]
    port: int
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    codes: dict[str, float] = field(default_factory=dict)

    @property
    def cookie(self) -> str:
        return f"teamd_web_{self.port}"

    def one_time_code(self) -> str:
        code = secrets.token_urlsafe(24)
        self.codes[code] = time.monotonic() + CODE_LIFE
        return code

    def take_code(self, code: str) -> bool:
        now = time.monotonic()
        self.codes = {c: t for c, t in self.codes.items() if t > now}
        for known in list(self.codes):
            if _same(code, known):
                del self.codes[known]
                return True
        return False


async def _answer(send: Send, status: int, text: str,
                  headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = (text + "\n").encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()),
                            (b"cache-control", b"no-store"), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


def _cookies(header: str) -> dict[str, str]:
    out = {}
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        out[key] = value
    return out


class Guard:
    """The middleware: `Guard(app, keys)`."""

    def __init__(self, app: ASGIApp, keys: Keys) -> None:
        self.app = app
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # a WebSocket would skip every check below: refused
            raise RuntimeError(f"teamctl web serves no {scope['type']} connection")
        headers = _headers(scope)
        host = headers.get("host", "").lower()
        origin = headers.get("origin")
        if host not in self.keys.hosts or (
                origin is not None and origin.lower().removeprefix("http://")
                not in self.keys.hosts):
            await _answer(send, 403, "403: not the address teamctl web serves")
            return
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"))
        given = dict(query)
        if "token" in given or "code" in given:
            good = _same(given.get("token"), self.keys.token) if "token" in given \
                else self.keys.take_code(given.get("code", ""))
            if not good:
                await _answer(send, 401, "401: wrong or used token; open the URL "
                              "`teamctl web` printed")
                return
            rest = urlencode([(k, v) for k, v in query if k not in ("token", "code")])
            where = scope["path"] + (f"?{rest}" if rest else "")
            cookie = (f"{self.keys.cookie}={self.keys.token}; HttpOnly; SameSite=Strict; "
                      "Path=/")
            await _answer(send, 303, "303: see " + where,
                          [(b"location", where.encode()), (b"set-cookie", cookie.encode())])
            return
        if not _same(_cookies(headers.get("cookie", "")).get(self.keys.cookie),
                     self.keys.token):
            await _answer(send, 401, "401: open the URL `teamctl web` printed (it carries "
                          "the token)")
            return
        if scope["method"] not in ("GET", "HEAD") and \
                not _same(headers.get("x-csrf-token"), self.keys.csrf):
            await _answer(send, 403, "403: no valid CSRF token")
            return
        await self.app(scope, receive, send)
