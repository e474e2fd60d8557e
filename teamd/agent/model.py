"""The model, through the official `anthropic` SDK.

The client is built in the teammate after the fork (never inherited: its connection pool
and locks belong to one process). The SDK does not retry (`max_retries=0`): it would wait
out any `retry-after`, even an hour, silently, with the member `active`. A failed call comes
back as `ModelUnavailable` saying whether retrying can mend it and what the server advised;
the teammate's loop does the waiting, in the open (CONTRACT.md section 12). Every call is
bounded as a whole by `api_timeout`, a response that never ends included.
"""

from __future__ import annotations

import inspect
import json
import logging
import socket
import ssl
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anthropic

try:
    import httpx2 as httpx  # what the SDK uses from 2.x on
except ImportError:  # pragma: no cover - older SDKs
    import httpx  # type: ignore[no-redef]

from teamd import apikey, prices
from teamd.agent.retry_advice import limited_until, retry_after
from teamd.files import Json

log = logging.getLogger(__name__)

# `Anthropic.post` takes a ready JSON body (`content=`) in the SDK versions that have it
_RAW_BODY = "content" in inspect.signature(anthropic.Anthropic.post).parameters
# Answers a later try may get right; any other 4xx (400, 401, 403, 404, 413, …) will not mend
RETRYABLE_STATUSES = frozenset({408, 409, 429})
# Answers that mean the API itself is saturated: the whole root backs off (ratelimit.json)
SHARED_BACKOFF_STATUSES = frozenset({429, 529})
# built once by `warm_up` in the supervisor, before it forks the teammates
_TLS_CONTEXT: ssl.SSLContext | None = None
# `anthropic-ratelimit-{family}-remaining`: a family (requests, tokens, input-tokens, …) at 0
# holds the whole root back until its `-reset` time, ahead of the 429 (CONTRACT §12)


class ModelUnavailable(Exception):
    """A call that failed. `retryable`: whether a later try may succeed; `status`: the HTTP
    status (None for a connection error or a bad body); `retry_after`: the server's advice in
    seconds (None when it gave none)."""

    def __init__(self, text: str, retryable: bool, status: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(text)
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after


@dataclass
class Reply:
    content: list[Json]
    stop_reason: str | None
    usage: Json
    ms: float
    #: the latest `-reset` (epoch) of a rate-limit family the answer said is used up
    limited_until: float | None = None


class AfterSend:
    """Runs a callback once a request has left (its body sent), before the answer is
    awaited, through the HTTP transport's `trace` extension. Work that belongs with the
    call but need not precede it (the roster's "active") thus stays off the path from a
    new message to the model. If the request never got sent, the callback runs after."""

    def __init__(self) -> None:
        self.pending: Callable[[], None] | None = None
        self.error: Exception | None = None

    def on_request(self, request: Any) -> None:
        if self.pending is None:
            return
        earlier = request.extensions.get("trace")

        def trace(event: str, info: dict[str, Any]) -> None:
            if earlier is not None:
                earlier(event, info)
            if event.endswith(("send_request_body.complete",
                               "receive_response_headers.started")):
                self.fire()

        request.extensions["trace"] = trace

    def fire(self) -> None:
        callback, self.pending = self.pending, None
        if callback is not None:
            try:
                callback()
            except Exception as exc:  # raised by `call`, not into the HTTP stack
                self.error = exc


class Deadline:
    """Cuts a call that outlives its bound. httpx's timeouts are per read: a response that
    trickles a byte now and then never trips them. So the sockets the client opens are
    noted (from the transport's trace), and at the deadline a watchdog thread shuts them
    down: the blocked read returns at once and the SDK reports a connection error."""

    def __init__(self) -> None:
        self.sockets: weakref.WeakSet[socket.socket] = weakref.WeakSet()
        self.cond = threading.Condition()
        self.due: float | None = None
        self.fired = False
        self.thread: threading.Thread | None = None

    def note(self, sock: socket.socket) -> None:
        """A socket of this client (a new connection, or its TLS layer)."""
        with self.cond:
            self.sockets.add(sock)
            late = self.fired and self.due is None
        if late:  # connected after the deadline passed: this call is over
            _shut(sock)

    def arm(self, seconds: float) -> None:
        with self.cond:
            self.due, self.fired = time.monotonic() + seconds, False
            if self.thread is None:  # started lazily: in the teammate, after the fork
                self.thread = threading.Thread(target=self._watch, name="api-deadline",
                                               daemon=True)
                self.thread.start()
            self.cond.notify()

    def disarm(self) -> bool:
        """End the call's watch; True if the deadline cut it."""
        with self.cond:
            self.due = None
            fired, self.fired = self.fired, False
            return fired

    def _watch(self) -> None:
        with self.cond:
            while True:
                if self.due is None:
                    self.cond.wait()
                    continue
                left = self.due - time.monotonic()
                if left > 0:
                    self.cond.wait(left)
                    continue
                self.due, self.fired = None, True
                for sock in list(self.sockets):
                    _shut(sock)


def _shut(sock: socket.socket) -> None:
    # the plain socket's shutdown, even for a TLS socket (whose own would drop its TLS
    # state under the reading thread): the connection ends, the descriptor stays the
    # owner's to close
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass  # closed already, or never connected


@dataclass
class Client:
    sdk: anthropic.Anthropic
    api_timeout: float
    after_send: AfterSend = field(default_factory=AfterSend)
    deadline: Deadline = field(default_factory=Deadline)
    #: the headers of the latest response (the SDK's parsed `Message` carries none)
    headers: dict[str, str] = field(default_factory=dict)
    refused: str | None = None  #: why no call can succeed (no API key: `apikey.refusal`)


def tls_context() -> ssl.SSLContext | None:
    """The TLS context `warm_up` built before the fork (None when it did not run)."""
    return _TLS_CONTEXT


def http_client(**options: Any) -> Any:
    """The SDK's HTTP client, with the TLS context `warm_up` built once before the fork."""
    if _TLS_CONTEXT is not None:
        options["verify"] = _TLS_CONTEXT
    return anthropic.DefaultHttpxClient(**options)


def guard_writes(stream: Any, guard: Callable[[], None]) -> None:
    """Run `guard` before each write to `stream` (httpcore's network stream of one
    connection: every request on it)."""
    write = stream.write

    def guarded(buffer: bytes, timeout: float | None = None) -> None:
        guard()  # the last moment before these bytes leave
        write(buffer, timeout)

    stream.write = guarded


def make_client(api_timeout: float = 600.0,
                guard: Callable[[], None] | None = None) -> Client:
    """A client that never retries by itself, every call bounded by `api_timeout` s.
    `guard` runs just before each write of a request's bytes to the socket (its exception
    stops them there): the member's fence, again if it has grown old (CONTRACT §15). At
    the write itself, not when the request is being built: a process stopped anywhere
    before it (SIGSTOP, a paused VM) checks again once it runs, so what a frozen host
    could still send on waking is down to the bytes of a write already begun."""
    # ANTHROPIC_BASE_URL is read by the SDK itself; with no key and no base URL of one's
    # own no call is made (`refused`): Claude would only answer 401
    hook, deadline = AfterSend(), Deadline()

    def on_request(request: Any) -> None:
        hook.on_request(request)
        earlier = request.extensions.get("trace")

        def trace(event: str, info: dict[str, Any]) -> None:
            if earlier is not None:
                earlier(event, info)
            if event.endswith(("connect_tcp.complete", "start_tls.complete")):
                stream = info.get("return_value")
                if guard is not None and stream is not None:
                    guard_writes(stream, guard)
                sock = stream.get_extra_info("socket") if stream is not None else None
                if isinstance(sock, socket.socket):
                    deadline.note(sock)

        request.extensions["trace"] = trace

    seen: dict[str, str] = {}

    def on_response(response: Any) -> None:
        seen.clear()
        seen.update((k.lower(), v) for k, v in response.headers.items()
                    if k.lower().startswith("anthropic-ratelimit-"))

    http = http_client(event_hooks={"request": [on_request], "response": [on_response]})
    sdk = anthropic.Anthropic(max_retries=0, timeout=anthropic.Timeout(api_timeout),
                              http_client=http,
                              api_key=apikey.get() or "missing")
    return Client(sdk, api_timeout, hook, deadline, seen, apikey.refusal())


def call(client: Client, after_send: Callable[[], None] | None = None,
         **params: Any) -> Reply:
    """One Messages API call; `after_send` runs once the request is on its way (or, if it
    never left, once the call is over). Its exception, if any, is raised here."""
    if client.refused is not None:
        raise ModelUnavailable(client.refused, retryable=False)
    hook = client.after_send
    hook.pending, hook.error = after_send, None
    body = json.dumps(params, ensure_ascii=False, separators=(",", ":")).encode()
    client.deadline.arm(client.api_timeout)
    client.headers.clear()
    try:
        return _call(client, body, params)
    finally:
        hook.fire()
        if hook.error is not None:
            error, hook.error = hook.error, None
            raise error


def _call(client: Client, body: bytes, params: Mapping[str, Any]) -> Reply:
    started = time.monotonic()
    try:
        try:
            if _RAW_BODY:
                # The same request `messages.create` makes, with the JSON body serialised
                # here: `create` copies and walks the whole conversation twice before it
                # serialises it, ~1.5 ms per call on a few hundred turns, on the path from
                # a new message to the model. Errors and the parsed `Message` are the SDK's.
                response = client.sdk.post("/v1/messages", cast_to=anthropic.types.Message,
                                           content=body)
            else:  # an SDK whose `post` takes no raw body
                response = client.sdk.messages.create(**params)
        finally:
            cut = client.deadline.disarm()
        ms = (time.monotonic() - started) * 1000
        reply = _reply(response, ms)
        reply.limited_until = limited_until(client.headers)
        return reply
    except anthropic.APIStatusError as exc:
        status = exc.status_code
        retryable = status in RETRYABLE_STATUSES or status >= 500
        text = f"model API: {status} {_kind(exc)}"
        if not retryable and _message(exc):
            text += f" ({_message(exc)})"
        advice = retry_after(exc.response.headers)
        if advice is None and status in SHARED_BACKOFF_STATUSES:
            # no retry-after: the used-up family's reset time is the next best advice
            until = limited_until(exc.response.headers)
            advice = None if until is None else max(0.0, until - time.time())
        raise ModelUnavailable(text, retryable, status, advice) from None
    except anthropic.APIConnectionError as exc:
        if cut:
            text = f"model API: no answer within {client.api_timeout:g} s"
        elif isinstance(exc, anthropic.APITimeoutError):
            text = "model API: timed out"
        else:
            text = f"model API: cannot connect ({_cause(exc)})"
        raise ModelUnavailable(text, True) from None
    except (anthropic.APIResponseValidationError, ValueError, TypeError, AttributeError,
            KeyError) as exc:
        # a 2xx whose body is not a Message (not JSON, or not that shape): sending the same
        # request again will not make it one
        raise ModelUnavailable(f"model API: not a valid response ({_cause(exc)})", False) \
            from None


def _reply(response: Any, ms: float) -> Reply:
    usage = response.usage
    return Reply(
        content=[_plain(block.model_dump(exclude_none=True)) for block in response.content],
        stop_reason=response.stop_reason,
        usage=prices.usage_of(usage),  # an older SDK's may lack the cache fields
        ms=ms,
    )


def _kind(exc: anthropic.APIStatusError) -> str:
    return error_kind(_error_of(exc).get("type"))


def error_kind(error_type: Any) -> str:
    """An API error's type in `last_error`'s words: `rate_limit_error` → "rate limited"."""
    kind = str(error_type or "error").replace("_error", "")
    return {"overloaded": "overloaded", "rate_limit": "rate limited"}.get(kind, kind)


def _message(exc: anthropic.APIStatusError) -> str:
    """The API's own words about a refused request, cut to fit a status line."""
    text = str(_error_of(exc).get("message") or "").strip().replace("\n", " ")
    return text if len(text) <= 200 else text[:199] + "…"


def _error_of(exc: anthropic.APIStatusError) -> dict[str, Any]:
    body = exc.body if isinstance(exc.body, dict) else {}
    err = body.get("error")
    return err if isinstance(err, dict) else {}


def _cause(exc: BaseException) -> str:
    inner = exc.__cause__ or exc
    text = str(inner).strip().splitlines()[0] if str(inner).strip() else ""
    name = inner.__class__.__name__
    return f"{name}: {text[:120]}" if text else name


def _plain(block: Json) -> Json:
    """Keep the fields the API accepts back in a later request."""
    if block.get("type") == "text":
        return {"type": "text", "text": block.get("text", "")}
    if block.get("type") == "tool_use":
        return {"type": "tool_use", "id": block["id"], "name": block["name"],
                "input": block.get("input") or {}}
    return block


WARM_REPLY: Json = {
    "id": "msg_warm_up", "type": "message", "role": "assistant", "model": "warm-up",
    "content": [{"type": "text", "text": "ok"},
                {"type": "tool_use", "id": "toolu_warm_up", "name": "bash", "input": {}}],
    "stop_reason": "tool_use", "stop_sequence": None,
    "usage": {"input_tokens": 1, "output_tokens": 1}}


def warm_up() -> None:
    """Do the SDK's first-use work once, in the supervisor, so every fork shares it.

    Importing anthropic is not all: its first client imports the HTTP stack (httpcore, h11,
    truststore …), and its first call builds request transforms and the pydantic schemas of
    the reply. Done in each teammate, that cost ~50 ms on the way to its first request and
    ~8 MB of private memory apiece. Here one client is built and closed, and one call is
    answered by an in-memory transport (no network, no thread; nothing of it is kept: each
    teammate builds its own client). An optimisation only: any failure is logged and ignored.

    The TLS context is built here too, and kept: loading the CA bundle takes 45-90 ms,
    which every teammate's client would otherwise spend on its way to its first request
    (even over plain HTTP). The context is inherited, copy-on-write, by every fork.
    """
    global _TLS_CONTEXT
    chatty = [logging.getLogger(n) for n in ("httpx", "httpx2", "anthropic")]
    levels = [logger.level for logger in chatty]
    for logger in chatty:  # no "HTTP Request: POST http://warm-up.invalid" in teamd's log
        logger.setLevel(logging.WARNING)
    try:
        _TLS_CONTEXT = httpx.create_ssl_context()  # as httpx would, trust store and env
        anthropic.Anthropic(api_key="warm-up", http_client=http_client()).close()
        transport = httpx.MockTransport(lambda request: httpx.Response(200, json=WARM_REPLY))
        cache = {"type": "ephemeral"}
        params: dict[str, Any] = dict(  # the shapes a teammate sends: caching, tools, results
            model="warm-up", max_tokens=1,
            system=[{"type": "text", "text": "warm-up", "cache_control": cache}],
            tools=[{"name": "bash", "description": "warm-up", "cache_control": cache,
                    "input_schema": {"type": "object", "properties": {}}}],
            messages=[
                {"role": "user", "content": [{"type": "text", "text": "warm-up"}]},
                {"role": "assistant", "content": WARM_REPLY["content"]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_warm_up", "content": "ok",
                     "is_error": False, "cache_control": cache}]}])
        with anthropic.Anthropic(
                api_key="warm-up", base_url="http://warm-up.invalid", max_retries=0,
                http_client=anthropic.DefaultHttpxClient(transport=transport)) as client:
            reply = client.messages.create(**params)
            for block in reply.content:
                block.model_dump(exclude_none=True)
    except Exception as exc:
        _TLS_CONTEXT = None
        log.warning("could not warm up the anthropic SDK before forking (%s: %s); "
                    "teammates will start slower", type(exc).__name__, exc)
    finally:
        for logger, level in zip(chatty, levels, strict=True):
            logger.setLevel(level)


def preload() -> None:
    """Ready the supervisor to fork teammates that start warm: import everything a teammate
    runs, do the SDK's first-use work (`warm_up`), and freeze the heap so each member
    process's garbage collector leaves the pages it shares with the supervisor alone. Called once,
    before the first fork."""
    import gc

    # the teammate's whole import graph; the loop imports this module, so this lazy import
    # is the one import cycle allowed (tests/project/test_imports.py)
    import teamd.agent.loop  # noqa: F401

    warm_up()
    gc.collect()
    gc.freeze()
