"""The model, through the official `anthropic` SDK.

The client is built in the teammate after the fork (never inherited: its connection pool
and locks belong to one process). The SDK retries 429, 5xx and overloaded itself; what
still fails comes back as `ModelUnavailable` with a line fit for `last_error`.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anthropic

from teamd.files import Json

log = logging.getLogger(__name__)

MAX_RETRIES = 4
TIMEOUT = 600.0
# `Anthropic.post` takes a ready JSON body (`content=`) in the SDK versions that have it
_RAW_BODY = "content" in inspect.signature(anthropic.Anthropic.post).parameters


class ModelUnavailable(Exception):
    """The API still failed after the SDK's retries; `retryable` says whether to wait."""

    def __init__(self, text: str, retryable: bool) -> None:
        super().__init__(text)
        self.retryable = retryable


@dataclass
class Reply:
    content: list[Json]
    stop_reason: str | None
    usage: Json
    ms: float


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


@dataclass
class Client:
    sdk: anthropic.Anthropic
    after_send: AfterSend = field(default_factory=AfterSend)


def make_client() -> Client:
    # ANTHROPIC_BASE_URL is read by the SDK itself; a missing key is an error the SDK
    # raises on the first call, which we report like any other
    hook = AfterSend()
    http = anthropic.DefaultHttpxClient(event_hooks={"request": [hook.on_request]})
    sdk = anthropic.Anthropic(max_retries=MAX_RETRIES, timeout=TIMEOUT, http_client=http,
                              api_key=os.environ.get("ANTHROPIC_API_KEY") or "missing")
    return Client(sdk, hook)


def call(client: Client, after_send: Callable[[], None] | None = None,
         **params: Any) -> Reply:
    """One Messages API call; `after_send` runs once the request is on its way (or, if it
    never left, once the call is over). Its exception, if any, is raised here."""
    hook = client.after_send
    hook.pending, hook.error = after_send, None
    try:
        return _call(client.sdk, **params)
    finally:
        hook.fire()
        if hook.error is not None:
            error, hook.error = hook.error, None
            raise error


def _call(client: anthropic.Anthropic, **params: Any) -> Reply:
    started = time.monotonic()
    try:
        if _RAW_BODY:
            # The same request `messages.create` makes, with the JSON body serialised here:
            # `create` copies and walks the whole conversation twice before it serialises
            # it, ~1.5 ms per call on a few hundred turns, on the path from a new message
            # to the model. Retries, errors and the parsed `Message` are the SDK's as ever.
            response = client.post("/v1/messages", cast_to=anthropic.types.Message,
                                   content=json.dumps(params, ensure_ascii=False,
                                                      separators=(",", ":")).encode())
        else:  # an SDK whose `post` takes no raw body
            response = client.messages.create(**params)
    except anthropic.APIStatusError as exc:
        retryable = exc.status_code in (408, 409, 429) or exc.status_code >= 500
        raise ModelUnavailable(f"model API: {exc.status_code} {_kind(exc)}", retryable) \
            from None
    except anthropic.APIConnectionError as exc:
        raise ModelUnavailable(f"model API: cannot connect ({exc.__class__.__name__})",
                               True) from None
    ms = (time.monotonic() - started) * 1000
    usage = response.usage
    return Reply(
        content=[_plain(block.model_dump(exclude_none=True)) for block in response.content],
        stop_reason=response.stop_reason,
        usage={"input_tokens": usage.input_tokens or 0,
               "output_tokens": usage.output_tokens or 0,
               "cache_read_input_tokens": getattr(usage, "cache_read_input_tokens", 0) or 0,
               "cache_creation_input_tokens":
                   getattr(usage, "cache_creation_input_tokens", 0) or 0},
        ms=ms,
    )


def _kind(exc: anthropic.APIStatusError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    err = body.get("error")
    err = err if isinstance(err, dict) else {}
    kind = str(err.get("type") or "error").replace("_error", "")
    return {"overloaded": "overloaded", "rate_limit": "rate limited"}.get(kind, kind)


def _plain(block: Json) -> Json:
    """Keep the fields the API accepts back in a later request."""
    if block.get("type") == "text":
        return {"type": "text", "text": block.get("text", "")}
    if block.get("type") == "tool_use":
        return {"type": "tool_use", "id": block["id"], "name": block["name"],
                "input": block.get("input") or {}}
    return block
