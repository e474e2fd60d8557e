"""The model, through the official `anthropic` SDK.

The client is built in the teammate after the fork (never inherited: its connection pool
and locks belong to one process). The SDK retries 429, 5xx and overloaded itself; what
still fails comes back as `ModelUnavailable` with a line fit for `last_error`.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import Any

import anthropic

from teamd.files import Json

log = logging.getLogger(__name__)

MAX_RETRIES = 4
TIMEOUT = 600.0


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


def make_client() -> anthropic.Anthropic:
    # ANTHROPIC_BASE_URL is read by the SDK itself; a missing key is an error the SDK
    # raises on the first call, which we report like any other
    return anthropic.Anthropic(max_retries=MAX_RETRIES, timeout=TIMEOUT,
                               api_key=os.environ.get("ANTHROPIC_API_KEY") or "missing")


def call(client: anthropic.Anthropic, **params: Any) -> Reply:
    started = time.monotonic()
    try:
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
