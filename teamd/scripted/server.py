"""The scripted Anthropic Messages API server: real HTTP, answers chosen by a Scenario.

This module owns the HTTP side: `POST /v1/messages` (plain JSON and SSE streaming, in the
shapes the `anthropic` SDK parses) and `/v1/messages/count_tokens`, error replies with
retry headers, the control endpoints (`GET /_health`, `GET /_requests`,
`GET|POST /_scenario`), the record of every request (in memory and as a JSONL log; its key —
`x-api-key` or the bearer token — as a SHA-256) and `ScriptedServer`, the object tests hold.
Its content blocks, thinking first, are made by `teamd.scripted.thinking`; what today's API
refuses with a 400 is told by `teamd.scripted.checks`. A reply's usage splits the input into
cache reads and writes for requests with `cache_control` breakpoints, by TTL
(`teamd.scripted.cache`). Which answer a request gets is decided in `teamd.scripted.scenario`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, cast

from teamd.scripted import checks, thinking
from teamd.scripted.cache import PromptCache
from teamd.scripted.cache import split as cache_split
from teamd.scripted.scenario import ERROR_TYPES, Decision, ErrorSpec, RequestView, Rule, Scenario
from teamd.scripted.thinking import Ledger

log = logging.getLogger(__name__)

# Deltas are cut this small so a client really has to accumulate text and tool JSON.
_DELTA_CHARS = 16

Record = dict[str, Any]
Predicate = Callable[[Record], bool]


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


def _estimate_tokens(value: Any) -> int:
    # Four characters per token is the usual rule of thumb; exact counts do not matter,
    # only that bigger conversations look bigger (compaction thresholds key off it).
    return len(json.dumps(value, ensure_ascii=False)) // 4


def _input_tokens(body: Mapping[str, Any]) -> int:
    return _estimate_tokens(
        {"system": body.get("system"), "messages": body.get("messages"), "tools": body.get("tools")}
    )


def _error_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _validate(body: Any) -> str | None:
    """Why the request body is not a Messages API request, or None if it looks fine."""
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    if not isinstance(body.get("model"), str) or not body.get("model"):
        return "model: Field required"
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
        return "max_tokens: Field required"
    if max_tokens < 1:
        return "max_tokens: must be at least 1"
    if not isinstance(body.get("messages"), list):
        return "messages: Field required"
    return None


def build_message(body: Mapping[str, Any], decision: Decision,
                  cache: PromptCache | None = None) -> dict[str, Any]:
    """The Message object for a reply decision, with fresh ids and estimated usage; with a
    `cache`, the input splits into cache reads, cache writes and the rest as the API's
    prompt caching would report it for the request's `cache_control` breakpoints."""
    content = thinking.reply_content(decision.content, body, decision.thinking)
    stop_reason = decision.stop_reason or (
        "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
    )
    total = _input_tokens(body)
    usage = cache.usage(body, total) if cache is not None else cache_split(total)
    usage["output_tokens"] = max(1, _estimate_tokens(content))
    usage.update(decision.usage)
    return {
        "id": _new_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": body.get("model"),
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }


def stream_events(message: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events (name, data) that stream `message`, in the API's order."""
    usage = message["usage"]
    start = dict(message)
    start["content"] = []
    start["stop_reason"] = None
    start["usage"] = {**usage, "output_tokens": 1}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(message["content"]):
        opening, deltas = thinking.streamed(block)
        events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                               "content_block": opening}))
        events.extend(("content_block_delta", {"type": "content_block_delta", "index": index,
                                               "delta": piece})
                      for delta in deltas for piece in thinking.pieces(delta, _DELTA_CHARS))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                # Totals, not increments: the SDK overwrites its snapshot with these.
                "usage": dict(usage),
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


class _HTTPServer(ThreadingHTTPServer):
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


class _Handler(BaseHTTPRequestHandler):
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
        return cast(_HTTPServer, self.server).owner

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

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/_health":
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
            problem = _validate(body) or checks.refusal(body, owner.thinking)
        if problem is not None:
            view = RequestView.from_body(body if isinstance(body, dict) else {})
            owner._record(received_at, view, body, "invalid", 400, stream=False, reply=None)
            self._send_json(400, _error_body("invalid_request_error", problem))
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
            reply=message["content"] if message else None,
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
            self._send_json(400, _error_body("invalid_request_error", "messages: Field required"))
            return
        self._send_json(200, {"input_tokens": _input_tokens(body)})

    def _replace_scenario(self, raw: bytes) -> None:
        try:
            scenario = Scenario.from_json(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            self._send_json(400, _error_body("invalid_request_error", str(exc)))
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
        self.send_header("request-id", _new_id("req"))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _send_not_found(self, path: str) -> None:
        self._send_json(404, _error_body("not_found_error", f"no such endpoint: {path}"))

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
        self._send_json(error.status, _error_body(error.type, error.message), headers)

    def _send_raw(self, text: str) -> None:
        data = text.encode("utf-8")
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", _new_id("req"))
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
            self.send_header("request-id", _new_id("req"))
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
            self.send_header("request-id", _new_id("req"))
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
        self.send_header("request-id", _new_id("req"))
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
        self.send_header("request-id", _new_id("req"))
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


class ScriptedServer:
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
        self._scenario = self._as_scenario(scenario)
        self._scenario_lock = threading.Lock()
        self._host = host
        self._port = port
        self.log_path = os.fspath(log_path) if log_path is not None else None
        self._log_fd: int | None = None
        self._log_lock = threading.Lock()
        # One condition guards the records and the per-agent counters; wait_for sleeps on it.
        self._cond = threading.Condition()
        self._records: list[Record] = []
        self._counts: dict[tuple[str | None, str | None], int] = {}
        # `/v1/messages` requests being answered now, and the most there ever were at once
        self.in_flight = 0
        self.peak_in_flight = 0
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
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
        if self.log_path is not None:
            self._log_fd = os.open(
                self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600
            )
        try:
            httpd = _HTTPServer((self._host, self._port), _Handler)
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

    # -- records ---------------------------------------------------------------------

    @property
    def requests(self) -> list[Record]:
        """Copies of the recorded `/v1/messages` requests, oldest first."""
        with self._cond:
            return [dict(r) for r in self._records]

    def wait_for(
        self, predicate: Predicate | None = None, timeout: float = 5.0, *, since: int = 0
    ) -> Record:
        """Block until a recorded request (index >= since) satisfies predicate; return it.

        Raises TimeoutError listing what did arrive, so a failing test says why.
        """
        deadline = time.monotonic() + timeout
        checked = since
        with self._cond:
            while True:
                while checked < len(self._records):
                    record = self._records[checked]
                    checked += 1
                    if predicate is None or predicate(record):
                        return dict(record)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    seen = self._records[since:]
                    summary = "; ".join(
                        f"#{i + since} agent={r['agent']} rule={r['rule']} status={r['status']}"
                        f" last_user_text={r['last_user_text'][:60]!r}"
                        for i, r in enumerate(seen[-5:], start=max(0, len(seen) - 5))
                    )
                    raise TimeoutError(
                        f"no matching request to the scripted API within {timeout:g}s"
                        f" ({len(seen)} request(s) seen since #{since}"
                        f"{': ' + summary if summary else ''})"
                    )
                self._cond.wait(remaining)

    def reset_peak(self) -> None:
        """Start counting `peak_in_flight` afresh (from the requests in flight now)."""
        with self._cond:
            self.peak_in_flight = self.in_flight

    def _in_flight(self, change: int) -> None:
        with self._cond:
            self.in_flight += change
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            self._cond.notify_all()

    def _count(self, agent: str | None, team: str | None) -> int:
        with self._cond:
            n = self._counts.get((team, agent), 0) + 1
            self._counts[(team, agent)] = n
            return n

    def _record(
        self,
        received_at: float,
        view: RequestView,
        body: Any,
        rule: str | int,
        status: int,
        *,
        stream: bool, api_key: str | None = None,
        reply: list[dict[str, Any]] | None,
    ) -> None:
        record: Record = {
            "received_at": received_at, "agent": view.agent,
            "api_key_sha256": hashlib.sha256(api_key.encode()).hexdigest() if api_key else None,
            "team": view.team,
            "n": view.n,
            "stream": stream, "rule": rule,
            "status": status,
            "last_user_text": view.last_user_text, "n_messages": view.n_messages,
            "body": body,
            "reply": reply,
        }
        # The log line is written before waiters are woken, so a test that saw the request
        # in memory also finds it in the file.
        self._write_log(record)
        with self._cond:
            self._records.append(record)
            self._cond.notify_all()

    def _write_log(self, record: Record) -> None:
        if self._log_fd is None:
            return
        line = (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode("utf-8")
        with self._log_lock:
            if self._log_fd is None:
                return
            # One write on an O_APPEND descriptor: readers never see half a line.
            os.write(self._log_fd, line)

    def _close_log(self) -> None:
        with self._log_lock:
            if self._log_fd is not None:
                os.close(self._log_fd)
                self._log_fd = None

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._connections_lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)


__all__ = ["ERROR_TYPES", "ScriptedServer", "build_message", "stream_events"]
