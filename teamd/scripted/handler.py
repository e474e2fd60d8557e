"""The scripted server's HTTP side: routing, the endpoints, and how each answer is sent.

This module owns `POST /v1/messages` (with or without Claude Code's `?beta=true`: plain
JSON, SSE streaming, errors with retry headers, and the faults a rule can ask for: a delay,
a body that never ends, a body no client can parse, a reply cut halfway),
`/v1/messages/count_tokens`, Claude Code's `HEAD /api/hello` (`teamd.scripted.claude_code`
reads what Claude Code sends), and the control endpoints (`GET /_health`, `GET /_requests`,
`GET|POST /_scenario`). The shapes of the bytes are `teamd.scripted.wire`'s; the record of
requests is the server's (`ScriptedServer`, a `teamd.scripted.record.Recorder`), which this
handler reaches as its `owner`.
"""

from __future__ import annotations

import json
import logging
import socket
import sys
import time
from collections.abc import Mapping
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, cast

from teamd.scripted import checks, claude_code
from teamd.scripted.request import RequestView
from teamd.scripted.rules import ErrorSpec
from teamd.scripted.scenario import Decision, Scenario
from teamd.scripted.wire import (
    build_message,
    error_body,
    input_tokens,
    new_id,
    stream_events,
    validate,
)

if TYPE_CHECKING:  # the server holds the handler's class; the handler only types its owner
    from teamd.scripted.server import ScriptedServer

log = logging.getLogger(__name__)


class HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # Handler threads are daemons and stop() cuts their sockets, so never join them.
    block_on_close = False
    owner: ScriptedServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client killed between keep-alive requests resets its connection: that is the
        # client's business (tests and benchmarks end teammates on purpose), not a traceback.
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError):
            log.debug("client %s went away: %s", client_address, exc)
            return
        super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 so the SDK's connection pool can keep connections alive between calls.
    protocol_version = "HTTP/1.1"
    # headers and body go out in separate writes: with Nagle each reply waits ~40 ms for
    # the client's delayed ACK
    disable_nagle_algorithm = True
    server_version = "teamd-scripted/1"
    # Idle keep-alive connections give up after this long rather than pin a thread forever.
    timeout = 60

    @property
    def owner(self) -> ScriptedServer:
        return cast(HTTPServer, self.server).owner

    def setup(self) -> None:
        super().setup()
        self.owner._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.owner._track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    # -- routing ---------------------------------------------------------------------

    def do_HEAD(self) -> None:
        path = self.path.split("?", 1)[0]
        self.owner._record_other("HEAD", self.path)
        self.send_response(200 if path in (claude_code.HELLO, "/_health") else 404)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path != "/v1/messages":
            self.owner._record_other("GET", self.path)
        if path == claude_code.HELLO:
            self._send_json(200, {"message": "hello"})
        elif path == "/_health":
            self._send_json(200, {"ok": True})
        elif path == "/_requests":
            self._send_json(200, self.owner.requests)
        elif path == "/_scenario":
            self._send_json(200, self.owner.scenario.to_dict())
        else:
            self._read_body()
            self._send_not_found(path)

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        raw = self._read_body()
        received_at = time.time()
        if path != "/v1/messages":
            self.owner._record_other("POST", self.path)
        if path == "/v1/messages":
            self._messages(raw, received_at)
        elif path == "/v1/messages/count_tokens":
            self._count_tokens(raw)
        elif path == "/_scenario":
            self._replace_scenario(raw)
        else:
            self._send_not_found(path)

    # -- endpoints -------------------------------------------------------------------

    def _messages(self, raw: bytes, received_at: float) -> None:
        owner = self.owner
        problem: str | None
        try:
            body: Any = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            body, problem = None, f"request body is not valid JSON: {exc}"
        else:
            problem = (validate(body) or claude_code.refusal(body)
                       or checks.refusal(body, owner.thinking))
        where: dict[str, Any] = {"path": self.path, "betas": claude_code.betas(
            self.headers.get(claude_code.BETA_HEADER)), "peer": self.client_address[0]}
        if problem is not None:
            view = RequestView.from_body(body if isinstance(body, dict) else {})
            owner._record(received_at, view, body, "invalid", 400, stream=False, reply=None,
                          **where)
            self._send_json(400, error_body("invalid_request_error", problem))
            return

        stream = body.get("stream") is True
        view = RequestView.from_body(body)
        view = replace(view, n=owner._count(view.agent, view.team))
        decision = owner.scenario.choose(view)
        plain = decision.error is None and decision.trickle is None and decision.raw is None
        # a cut reply is built like a whole one, and sent only in part
        message = build_message(body, decision, owner.cache) if plain else None
        if message is not None:
            owner.thinking.remember(message["content"])
        status = decision.error.status if decision.error else 200
        # Recorded before any delay, so a test can see that a call is "in flight" while the
        # server is still sitting on the answer (kill-during-model-call tests need that).
        owner._record(
            received_at,
            view,
            body,
            decision.label,
            status,
            stream=stream, api_key=self.headers.get("x-api-key") or self.headers.get(
                "authorization", "").removeprefix("Bearer ") or None,
            reply=message["content"] if message else None, **where,
        )
        owner._in_flight(+1)
        try:
            if decision.delay > 0 and owner._stopping.wait(decision.delay):
                self.close_connection = True
                return
            self._answer(decision, message, stream)
        except (BrokenPipeError, ConnectionResetError):
            # The client hung up (e.g. its process was killed mid-call); nothing to answer.
            log.debug("client went away before the reply to agent=%s", view.agent)
            self.close_connection = True
        finally:
            owner._in_flight(-1)

    def _answer(self, decision: Decision, message: dict[str, Any] | None, stream: bool) -> None:
        headers = decision.headers
        if decision.error is not None:
            self._send_error_reply(decision.error, headers)
        elif decision.trickle is not None:
            self._send_trickle(decision.trickle, stream)
        elif decision.raw is not None:
            self._send_raw(decision.raw)
        elif decision.cut:
            assert message is not None
            self._send_cut(message, stream)
        elif stream:
            assert message is not None
            self._send_stream(message, headers)
        else:
            assert message is not None
            self._send_json(200, message, headers)

    def _count_tokens(self, raw: bytes) -> None:
        # Same estimate as a reply's usage.input_tokens, so callers that pre-count agree
        # with what the following call reports. Not recorded: it is not a model call.
        try:
            body = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError):
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            self._send_json(400, error_body("invalid_request_error", "messages: Field required"))
            return
        self._send_json(200, {"input_tokens": input_tokens(body)})

    def _replace_scenario(self, raw: bytes) -> None:
        try:
            scenario = Scenario.from_json(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            self._send_json(400, error_body("invalid_request_error", str(exc)))
            return
        self.owner.set_scenario(scenario)
        self._send_json(200, {"ok": True, "rules": len(scenario.rules)})

    # -- writing ---------------------------------------------------------------------

    def _read_body(self) -> bytes:
        try:
            length = int(self.headers.get("content-length") or 0)
        except ValueError:
            length = 0
        return self.rfile.read(length) if length > 0 else b""

    def _send_json(
        self, status: int, payload: Any, headers: Mapping[str, str] | None = None
    ) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", new_id("req"))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _send_not_found(self, path: str) -> None:
        self._send_json(404, error_body("not_found_error", f"no such endpoint: {path}"))

    def _send_error_reply(self, error: ErrorSpec, extra: Mapping[str, str] | None = None
                          ) -> None:
        headers: dict[str, str] = dict(extra or {})
        if error.retry_after is not None:
            headers["retry-after"] = f"{error.retry_after:g}"
            # The SDK treats a wait of 0 as "no advice" and falls back to its own backoff
            # (0.5 s and up); 1 ms in the more precise header makes "0" mean "retry now".
            headers["retry-after-ms"] = str(max(1, round(error.retry_after * 1000)))
        if error.should_retry is not None:
            headers["x-should-retry"] = "true" if error.should_retry else "false"
        self._send_json(error.status, error_body(error.type, error.message), headers)

    def _send_raw(self, text: str) -> None:
        data = text.encode("utf-8")
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", new_id("req"))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _send_cut(self, message: Mapping[str, Any], stream: bool) -> None:
        """A 200 that stops halfway: the headers promise the whole reply (its length, or
        a stream), half of it is sent, and the connection closes. What a dropped
        connection or a proxy's reset does to a reply in flight."""
        self.close_connection = True
        if stream:
            events = stream_events(message)
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("request-id", new_id("req"))
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for name, data in events[: max(1, len(events) // 2)]:
                chunk = f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"
                raw = chunk.encode("utf-8")
                self.wfile.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")
        else:
            body = json.dumps(message, ensure_ascii=False).encode("utf-8")
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.send_header("request-id", new_id("req"))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
        self.wfile.flush()
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _send_trickle(self, every: float, stream: bool) -> None:
        """A 200 that never ends: a filler chunk every `every` s (JSON may open with
        whitespace; an SSE stream may carry comments), so no read ever waits long enough
        to time out. Ends only when the client hangs up or the server stops."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream" if stream else "application/json")
        self.send_header("request-id", new_id("req"))
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        filler = b": keep-alive\n\n" if stream else b" "
        chunk = f"{len(filler):x}\r\n".encode() + filler + b"\r\n"
        self.close_connection = True  # the answer is never complete: no reuse
        while True:
            self.wfile.write(chunk)
            self.wfile.flush()
            if self.owner._stopping.wait(every):
                return

    def _send_stream(self, message: Mapping[str, Any],
                     headers: Mapping[str, str] | None = None) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("request-id", new_id("req"))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        # Chunked, so the connection stays reusable without knowing the length up front.
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for name, data in stream_events(message):
            event = f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"
            chunk = event.encode("utf-8")
            self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
