"""One scenario rule: its format and validation, and whether it matches a request.

This module owns a rule's fields (conditions, use count, answer), reading one from its
JSON shape with a ValueError that names the bad field, the error answers a rule can give
(`ErrorSpec`, the API's error type per status), the `anthropic-ratelimit-*` headers it
sends, and matching a `RequestView`. Choosing among rules is `teamd.scripted.scenario`'s.
"""

from __future__ import annotations

import copy
import re
import time
from dataclasses import dataclass, field
from typing import Any

from teamd.scripted.replies import check_keys, check_reply
from teamd.scripted.request import RequestView

ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}

_RULE_KEYS = frozenset(
    {
        "name", "comment", "agent", "team", "contains", "regex", "tool_result",
        "system_contains", "any_contains", "nth", "times", "delay", "reply", "error",
        "trickle", "raw", "cut", "headers", "ratelimit", "window",
    }
)
_ERROR_KEYS = frozenset({"status", "type", "message", "retry_after", "should_retry"})
_RATELIMIT_KEYS = frozenset({"family", "limit", "remaining", "reset_in"})
_FAMILY_RE = re.compile(r"[a-z0-9-]+")


@dataclass(frozen=True)
class ErrorSpec:
    """An error answer: HTTP status, Anthropic error type and optional retry headers."""

    status: int
    type: str
    message: str
    retry_after: float | None = None
    should_retry: bool | None = None

    @classmethod
    def from_dict(cls, data: Any, where: str) -> ErrorSpec:
        if isinstance(data, int) and not isinstance(data, bool):
            data = {"status": data}
        if not isinstance(data, dict):
            raise ValueError(f"{where}: must be an object like {{\"status\": 529}}")
        check_keys(data, _ERROR_KEYS, where)
        status = data.get("status")
        if not isinstance(status, int) or isinstance(status, bool) or not 400 <= status <= 599:
            raise ValueError(f"{where}.status: must be an HTTP error status (400-599)")
        kind = data.get("type", ERROR_TYPES.get(status, "api_error"))
        message = data.get("message", f"scripted {status} {kind}")
        if not isinstance(kind, str) or not isinstance(message, str):
            raise ValueError(f"{where}: type and message must be strings")
        retry_after = data.get("retry_after")
        if retry_after is not None and (
            not isinstance(retry_after, int | float) or isinstance(retry_after, bool)
            or retry_after < 0
        ):
            raise ValueError(f"{where}.retry_after: must be a number of seconds >= 0")
        should_retry = data.get("should_retry")
        if should_retry is not None and not isinstance(should_retry, bool):
            raise ValueError(f"{where}.should_retry: must be true or false")
        return cls(
            status=status,
            type=kind,
            message=message,
            retry_after=float(retry_after) if retry_after is not None else None,
            should_retry=should_retry,
        )

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"status": self.status, "type": self.type, "message": self.message}
        if self.retry_after is not None:
            data["retry_after"] = self.retry_after
        if self.should_retry is not None:
            data["should_retry"] = self.should_retry
        return data


@dataclass
class Rule:
    """One scenario rule: conditions (all must hold), a use count, and the answer."""

    label: str | int
    agent: str | None = None
    team: str | None = None
    contains: str | None = None
    regex: re.Pattern[str] | None = None
    tool_result: str | None = None
    system_contains: str | None = None
    any_contains: str | None = None
    nth: int | None = None
    # Uses left; None is unlimited. Guarded by the owning Scenario's lock.
    times: int | None = None
    delay: float = 0.0
    reply: dict[str, Any] | None = None
    error: ErrorSpec | None = None
    # A 200 whose body never ends: one filler byte (or SSE comment) every `trickle` s.
    trickle: float | None = None
    # A 200 whose body is this text, as is (e.g. not JSON): a reply no client can parse.
    raw: str | None = None
    # Extra response headers, as given.
    headers: dict[str, str] = field(default_factory=dict)
    # `anthropic-ratelimit-{family}-*` headers, the reset time `reset_in` s after the answer.
    ratelimit: list[dict[str, Any]] = field(default_factory=list)
    # Once this rule first answers, it answers *every* request (whatever its conditions: a
    # rate limit is everyone's) for `window` s, then is spent. Guarded by the Scenario lock.
    window: float | None = None
    window_until: float | None = None
    # The reply sent only in part: the connection closes halfway through its body.
    cut: bool = False
    source: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, data: Any, index: int, where: str | None = None) -> Rule:
        where = where or f"rules[{index}]"
        if not isinstance(data, dict):
            raise ValueError(f"{where}: a rule must be an object")
        check_keys(data, _RULE_KEYS, where)
        strings: dict[str, str | None] = {}
        for key in (
            "name", "agent", "team", "contains", "regex", "tool_result",
            "system_contains", "any_contains",
        ):
            value = data.get(key)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{where}.{key}: must be a string")
            strings[key] = value
        regex: re.Pattern[str] | None = None
        if strings["regex"] is not None:
            try:
                regex = re.compile(strings["regex"])
            except re.error as exc:
                raise ValueError(f"{where}.regex: {exc}") from None
        nth = _optional_int(data.get("nth"), f"{where}.nth", minimum=1)
        times = _optional_int(data.get("times"), f"{where}.times", minimum=0)
        delay = data.get("delay", 0.0)
        if not isinstance(delay, int | float) or isinstance(delay, bool) or delay < 0:
            raise ValueError(f"{where}.delay: must be a number of seconds >= 0")
        reply = (
            check_reply(data["reply"], f"{where}.reply") if data.get("reply") is not None
            else None
        )
        trickle = data.get("trickle")
        if trickle is not None and (
            not isinstance(trickle, int | float) or isinstance(trickle, bool) or trickle <= 0
        ):
            raise ValueError(f"{where}.trickle: must be a number of seconds > 0")
        raw = data.get("raw")
        if raw is not None and not isinstance(raw, str):
            raise ValueError(f"{where}.raw: must be a string")
        headers = data.get("headers") or {}
        if not isinstance(headers, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
            raise ValueError(f"{where}.headers: must be an object of strings")
        ratelimit = _check_ratelimit(data.get("ratelimit"), f"{where}.ratelimit")
        window = data.get("window")
        if window is not None and (
            not isinstance(window, int | float) or isinstance(window, bool) or window <= 0
        ):
            raise ValueError(f"{where}.window: must be a number of seconds > 0")
        cut = data.get("cut", False)
        if not isinstance(cut, bool):
            raise ValueError(f"{where}.cut: must be true or false")
        answers = [k for k in ("reply", "error", "trickle", "raw") if data.get(k) is not None]
        if cut and any(k in answers for k in ("error", "trickle", "raw")):
            raise ValueError(f"{where}: cut applies to a reply, not to error, trickle or raw")
        if len(answers) > 1:
            raise ValueError(f"{where}: {' and '.join(answers)} exclude each other")
        error = (
            ErrorSpec.from_dict(data["error"], f"{where}.error")
            if data.get("error") is not None
            else None
        )
        return cls(
            label=strings["name"] if strings["name"] is not None else index,
            agent=strings["agent"],
            team=strings["team"],
            contains=strings["contains"],
            regex=regex,
            tool_result=strings["tool_result"],
            system_contains=strings["system_contains"],
            any_contains=strings["any_contains"],
            nth=nth,
            times=times,
            delay=float(delay),
            reply=reply,
            error=error,
            trickle=float(trickle) if trickle is not None else None,
            raw=raw,
            headers=dict(headers),
            ratelimit=ratelimit,
            window=float(window) if window is not None else None,
            cut=cut,
            source=copy.deepcopy(data),
        )

    def response_headers(self, now: float) -> dict[str, str]:
        """The extra headers of this rule's answer, sent at `now` (epoch)."""
        out = dict(self.headers)
        for limit in self.ratelimit:
            prefix = f"anthropic-ratelimit-{limit['family']}"
            reset = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now + limit["reset_in"]))
            fraction = f"{(now + limit['reset_in']) % 1:.3f}"[1:]
            out[f"{prefix}-limit"] = str(limit["limit"])
            out[f"{prefix}-remaining"] = str(limit["remaining"])
            out[f"{prefix}-reset"] = f"{reset}{fraction}Z"
        return out

    def match(self, view: RequestView) -> dict[str, str] | None:
        """The regex variables if every named condition holds, else None. Ignores `times`."""
        if self.agent is not None and view.agent != self.agent:
            return None
        if self.team is not None and view.team != self.team:
            return None
        if self.nth is not None and view.n != self.nth:
            return None
        if self.contains is not None and self.contains not in view.last_user_text:
            return None
        if self.system_contains is not None and self.system_contains not in view.system_text:
            return None
        if self.any_contains is not None and self.any_contains not in view.conversation_text:
            return None
        if self.tool_result is not None and self.tool_result not in view.tool_results:
            return None
        variables: dict[str, str] = {}
        if self.regex is not None:
            found = self.regex.search(view.last_user_text)
            if found is None:
                return None
            variables = {k: v or "" for k, v in found.groupdict().items()}
        return variables


def _check_ratelimit(data: Any, where: str) -> list[dict[str, Any]]:
    """`ratelimit`: one object or a list of them, each {family, remaining, reset_in, limit?}."""
    if data is None:
        return []
    items = data if isinstance(data, list) else [data]
    out = []
    for i, item in enumerate(items):
        at = f"{where}[{i}]" if isinstance(data, list) else where
        if not isinstance(item, dict):
            raise ValueError(f"{at}: must be an object like "
                             '{"family": "tokens", "remaining": 0, "reset_in": 2}')
        check_keys(item, _RATELIMIT_KEYS, at)
        family = item.get("family")
        if not isinstance(family, str) or not _FAMILY_RE.fullmatch(family):
            raise ValueError(f"{at}.family: must be a name such as 'requests' or 'tokens'")
        remaining = _optional_int(item.get("remaining", 0), f"{at}.remaining", minimum=0)
        limit = _optional_int(item.get("limit", 1000), f"{at}.limit", minimum=0)
        reset_in = item.get("reset_in", 60)
        if not isinstance(reset_in, int | float) or isinstance(reset_in, bool) or reset_in < 0:
            raise ValueError(f"{at}.reset_in: must be a number of seconds >= 0")
        out.append({"family": family, "remaining": remaining, "limit": limit,
                    "reset_in": float(reset_in)})
    return out


def _optional_int(value: Any, where: str, *, minimum: int) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{where}: must be an integer >= {minimum}")
    return value
