"""The forwarder a Claude Code member's model calls go through (CONTRACT §14, "Cost, limits
and the key"): Claude Code never holds the API key, and each of its calls is counted, and
held to the budgets and the root's limits, exactly like a built-in member's.

The member's process starts it (`Forwarder(member).start()`, threads of that process,
ended with it) and gives Claude Code `url` as `ANTHROPIC_BASE_URL` and `stand_in` as its
`ANTHROPIC_API_KEY`. It listens on loopback, not on a Unix socket: Claude Code reaches its
API only through an http(s) URL. What keeps it from being an open proxy: it answers only
a request carrying this member's random stand-in key (compared in constant time), whose
`Host` is its own loopback address (no DNS rebinding) and that no web page sent (no
`Origin`); anything else gets a 401 and reaches nothing. Of what it admits, only what
Claude Code itself sends is passed on (`PASSED`: its model calls, `count_tokens`, its
`HEAD /api/hello` probe): any other method or path — `/v1/messages/batches`, `/v1/files`,
… that a command Claude Code runs could send with the stand-in key from its environment —
gets a 404 and reaches nothing, so no spend escapes the counting below.

A request it admits is sent on to the real `ANTHROPIC_BASE_URL` (default Anthropic's API)
with the stand-in replaced by the key the member holds (`teamd.apikey`), and the answer
streamed back unchanged, byte for byte, as it arrives. A `POST /v1/messages` is a model
call: before it is sent, the member's budget gate (`BudgetGate.pause`: at the cap the call
gets a 400 naming the budget, of the type Claude Code does not retry, and the member is
`paused`), the root's shared back-off (waited out) and a call slot (`max_concurrent_calls`);
once answered, it is counted by `teamd.agent.accounting` (the usage read from the stream's
`message_start` and `message_delta` events), a 429 or 529 holds the root back, and a call
cut short (the client gone, the connection lost) is a `model_call` with its `error`.
"""

from __future__ import annotations

import contextlib
import hmac
import http.client
import json
import logging
import os
import re
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, cast

from teamd import apikey, ratelimit
from teamd.agent import accounting, model, retry_advice
from teamd.agent.sse_usage import UsageReader
from teamd.agent.upstream import Upstream
from teamd.files import Json
from teamd.proc import EXIT_FENCED
from teamd.store.errors import LeaseLost

if TYPE_CHECKING:
    from teamd.agent.member import Member

log = logging.getLogger(__name__)

UPSTREAM = "https://api.anthropic.com"
MESSAGES = "/v1/messages"
#: the only requests passed on (method, path without its query): all Claude Code sends
PASSED = frozenset({("POST", MESSAGES), ("POST", f"{MESSAGES}/count_tokens"),
                    ("HEAD", "/api/hello")})
#: headers that describe one hop, not the request or answer: never passed on
HOP = frozenset({"host", "connection", "keep-alive", "transfer-encoding", "content-length",
                 "te", "trailer", "upgrade", "proxy-connection", "proxy-authorization",
                 "x-api-key", "authorization", "accept-encoding", "content-encoding"})
#: the longest request body taken in (the API's own limit is 32 MB)
MAX_BODY = 64 * 1024 * 1024
#: the most of an answer relayed in one piece (whatever has arrived, up to this)
CHUNK = 64 * 1024
#: a body that names its model first (as Claude Code's do), read without parsing it all
_MODEL_FIRST = re.compile(rb'\{\s*"model"\s*:\s*"([A-Za-z0-9._:@/-]{1,200})"')


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    forwarder: Forwarder


class Forwarder:
    """One member's forwarder: `url` and `stand_in` are what its Claude Code is given."""

    def __init__(self, member: Member, upstream: str | None = None) -> None:
        self.m = member
        self.stand_in = f"teamd-stand-in-{secrets.token_urlsafe(32)}"
        self.base_url = (upstream or os.environ.get(apikey.BASE_URL_ENV)
                         or UPSTREAM).rstrip("/")
        # the member's objects (its status, its gate) are written one call at a time
        self.lock = threading.Lock()
        self.upstream = Upstream(self.base_url, member.conf.api_timeout)
        #: calls answered with what held them (a budget): the runtime's turn ended on one
        self.refused = 0
        self._httpd: _Server | None = None

    def start(self) -> Forwarder:
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.forwarder = self
        self._httpd = httpd
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.5},
                         name="forwarder", daemon=True).start()
        log.info("forwarding Claude Code's calls from %s to %s", self.url, self.base_url)
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the forwarder is not running")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def admits(self, headers: Any) -> bool:
        """The request is this member's Claude Code's: its stand-in key, our own Host, no
        web page's Origin."""
        key = headers.get("x-api-key") or str(headers.get("authorization") or "").removeprefix(
            "Bearer ")
        host = str(headers.get("host") or "")
        return (hmac.compare_digest(str(key).encode(), self.stand_in.encode())
                and host in (f"127.0.0.1:{self.port}", f"localhost:{self.port}")
                and headers.get("origin") is None)

    # -- before and after a model call -------------------------------------------------
    def held(self) -> str | None:
        """What holds the next call (a budget reached, a model with no price): the member
        is paused and the lead told, and the call is answered with this line."""
        with self.lock:
            # the gate reads teamd.toml as it is now into the member's settings (SIGHUP
            # applies from the next call: prices, limits) whenever no budget holds the call
            line, _ = self.m.gate.pause()
            if line is not None:
                self.refused += 1
        return line

    def wait_out_backoff(self) -> None:
        """The root's shared back-off: the call waits here rather than being sent."""
        m = self.m
        while (limit := ratelimit.in_force(m.ws, m.conf.retry_max_wait)) is not None:
            log.info(accounting.backoff_line(limit))
            time.sleep(max(0.0, min(float(limit["until"]) - time.time(), 1.0)))

    def counted(self, model_name: str, status: int | None, headers: Any, reader: UsageReader,
                ms: float, error: str | None) -> None:
        """Count the call once its answer is over (or cut), and hold the root back as the
        answer says."""
        m = self.m
        if error is None and reader.error is not None:  # an error event mid-stream
            error = f"model API: {model.error_kind(reader.error_type())} mid-answer"
        if error is None and status is not None and status >= 400:
            error = f"model API: {status} {model.error_kind(reader.error_type())}"
        usage = None if error is not None else reader.usage()
        if error is None and usage is None:
            error = "model API: the answer carried no usage"
        with self.lock:
            accounting.count_call(m, model_name, usage, ms=ms, stop_reason=reader.stop_reason,
                                  error=error)
            if status in model.SHARED_BACKOFF_STATUSES:
                advice = retry_advice.retry_after(headers)
                wait = min(m.conf.retry_max_wait, 1.0 if advice is None else advice)
                accounting.rate_limited(m, model_name, status, time.time() + wait,
                                        "backoff" if advice is None else "retry-after")
            elif (until := retry_advice.limited_until(headers)) is not None:
                accounting.hold_root_back(m, model_name, until)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server_version = "teamd-forwarder/1"
    timeout = 600

    @property
    def fwd(self) -> Forwarder:
        return cast(_Server, self.server).forwarder

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    # every method is answered by `forward` (what it does not pass on: a 404)
    def do_GET(self) -> None:
        self.forward()

    do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_GET

    def forward(self) -> None:
        fwd = self.fwd
        length = int(self.headers.get("content-length") or 0)
        if not fwd.admits(self.headers) or not 0 <= length <= MAX_BODY:
            self.read_body(min(max(length, 0), MAX_BODY))
            self.close_connection = True
            return self.send_error_json(401, "authentication_error", "this forwarder serves "
                                        "one teamd member's Claude Code only")
        body = self.read_body(length)
        path = self.path.split("?", 1)[0]
        if (self.command, path) not in PASSED:  # not Claude Code's: sent nowhere
            self.close_connection = True
            return self.send_error_json(404, "not_found_error", f"teamd forwarder: "
                                        f"{self.command} {path} is not passed on")
        if (self.command, path) != ("POST", MESSAGES):
            self.relay(body, count=False)  # not a model call (count_tokens, a probe)
            return
        line = fwd.held()
        if line is not None:  # billing_error: Claude Code neither retries it nor probes
            return self.send_error_json(400, "billing_error", f"teamd: {line}")
        fwd.wait_out_backoff()
        try:
            fwd.m.ws.store.fence()  # its host still holds its lease (CONTRACT §15)
        except LeaseLost:  # a thread of the member: the whole process ends, at once
            os._exit(EXIT_FENCED)
        conf = fwd.m.conf
        with contextlib.ExitStack() as slot:  # a call slot, for the length of the call
            if conf.max_concurrent_calls > 0:
                slot.enter_context(fwd.m.ws.store.call_slot(conf.max_concurrent_calls))
            self.relay(body, count=True)

    def relay(self, body: bytes, *, count: bool) -> None:
        """Send the request on with the real key; stream the answer back as it comes,
        each piece passed on before it is read for the usage. With `count`, the call is
        counted (its model read from the body then, not before it is sent)."""
        fwd = self.fwd
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        headers["accept-encoding"] = "identity"  # the stream is read for its usage
        key = apikey.get()
        if key:
            headers["x-api-key"] = key
        reader = UsageReader()
        started = time.monotonic()
        status: int | None = None
        answer_headers: Any = {}
        error: str | None = None
        upstream = fwd.upstream
        try:
            try:
                response = upstream.send(self.command, self.path, headers, body)
            except (OSError, http.client.HTTPException) as exc:  # the API cannot be reached
                upstream.drop()
                error = f"model API: cannot connect ({type(exc).__name__}: {exc})"
                self.send_error_json(502, "api_error", f"teamd forwarder: {error}")
                return
            whole = False
            try:
                status, answer_headers = response.status, response.headers
                fields = [(k, v) for k, v in response.getheaders() if k.lower() not in HOP]
                if self.command == "HEAD":  # an answer with no body
                    self.wfile.write(self.head(status, response.reason,
                                               [*fields, ("content-length", "0")]))
                    whole = True
                    return
                # the head goes out with the first piece of the body: one write, one wake
                pending = self.head(status, response.reason,
                                    [*fields, ("transfer-encoding", "chunked")])
                try:
                    while chunk := response.read1(CHUNK):
                        self.wfile.write(pending + b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        pending = b""
                        if count:
                            reader.feed(chunk)
                    whole = True
                    # counted before the answer ends: the client's next call is checked
                    # against a spend that holds this one
                    if count:
                        fwd.counted(_model_of(body), status, answer_headers, reader,
                                    (time.monotonic() - started) * 1000, None)
                        count = False
                    self.wfile.write(pending + b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    error = "model API: cut short: Claude Code went away mid-answer"
                    self.close_connection = True
                except (OSError, http.client.HTTPException) as exc:  # the API's side broke
                    error = f"model API: cut short ({type(exc).__name__}: {exc})"
                    self.close_connection = True
            finally:
                if not whole:
                    upstream.drop()  # an answer not read to its end: the connection goes
        finally:
            if count:
                fwd.counted(_model_of(body), status, answer_headers, reader,
                            (time.monotonic() - started) * 1000, error)

    def head(self, status: int, reason: str, fields: list[tuple[str, str]]) -> bytes:
        """An answer's status line and headers, as bytes to send with what follows."""
        self.log_request(status)
        lines = [f"{self.protocol_version} {status} {reason}", *(f"{k}: {v}" for k, v in fields)]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def read_body(self, length: int) -> bytes:
        return self.rfile.read(length) if length > 0 else b""

    def send_error_json(self, status: int, kind: str, message: str) -> None:
        data = json.dumps({"type": "error", "error": {"type": kind, "message": message}}
                          ).encode()
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.send_header("x-should-retry", "false")
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            self.close_connection = True


def _model_of(body: bytes) -> str:
    """The model a request asks for ("unknown" when the body does not say): from the
    body's head, where Claude Code puts it, else from the whole body (a parse of a
    long conversation's body takes milliseconds)."""
    head = _MODEL_FIRST.match(body)
    if head is not None:
        return head[1].decode()
    try:
        found: Json = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return "unknown"
    name = found.get("model") if isinstance(found, dict) else None
    return name if isinstance(name, str) and name else "unknown"

