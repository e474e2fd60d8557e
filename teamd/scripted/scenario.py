"""Scenario rules for the scripted Messages API server, and how a request picks one.

This module owns the scenario format (rules plus a default reply), its validation, the
reading of a Messages API request into the facts rules test (who is asking, the last user
text, which tool results came back), and the thread-safe choice of the answering rule with
its `{var}` substitution. It knows nothing about HTTP: `teamd.scripted.server` turns a
`Decision` into bytes.
"""

from __future__ import annotations

import copy
import json
import logging
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

from teamd.scripted.replies import check_keys, check_reply

log = logging.getLogger(__name__)

# The harness writes this line into the system prompt and again at the head of a compacted
# conversation (CONTRACT section 6, "Context"), so it is the one reliable way to tell which
# agent process sent a request.
IDENTITY_RE = re.compile(
    r"You are (?:teammate '(?P<teammate>[^']+)'|the lead '(?P<lead>[^']+)')"
    r" in team '(?P<team>[^']+)'\."
)

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

DEFAULT_REPLY: dict[str, Any] = {"content": [{"type": "text", "text": "Nothing to do."}]}

_RULE_KEYS = frozenset(
    {
        "name", "comment", "agent", "team", "contains", "regex", "tool_result",
        "system_contains", "any_contains", "nth", "times", "delay", "reply", "error",
        "trickle", "raw", "cut", "headers", "ratelimit", "window",
    }
)
_SCENARIO_KEYS = frozenset({"rules", "default", "description"})
_ERROR_KEYS = frozenset({"status", "type", "message", "retry_after", "should_retry"})
_RATELIMIT_KEYS = frozenset({"family", "limit", "remaining", "reset_in"})
_FAMILY_RE = re.compile(r"[a-z0-9-]+")

# Only identifier-shaped names in single braces are variables, so JSON text such as
# `{"a": 1}` and unknown names pass through untouched (str.format would choke on both).
_VAR_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_INT_RE = re.compile(r"\{int:([A-Za-z_][A-Za-z0-9_]*)\}")


# ---------------------------------------------------------------------------------------
# Reading a request
# ---------------------------------------------------------------------------------------


def system_text(system: Any) -> str:
    """The system prompt as plain text (a string, or the text blocks of a list joined)."""
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "\n".join(
            b["text"] for b in system if isinstance(b, dict) and isinstance(b.get("text"), str)
        )
    return ""


def content_text(content: Any) -> str:
    """Text of a message's content: text blocks and tool_result contents, joined by newlines."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "tool_result":
            text = content_text(block.get("content"))
            if text:
                parts.append(text)
    return "\n".join(parts)


def _conversation_text(system: str, messages: list[Any]) -> str:
    parts = [system] if system else []
    for message in messages:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        text = content_text(content)
        if text:
            parts.append(text)
        # Tool inputs are part of what the model "said"; `any_contains` should see them.
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    parts.append(json.dumps(block.get("input"), ensure_ascii=False))
    return "\n".join(parts)


def _last_index(messages: list[Any], role: str, before: int | None = None) -> int | None:
    end = len(messages) if before is None else before
    for i in range(end - 1, -1, -1):
        message = messages[i]
        if isinstance(message, dict) and message.get("role") == role:
            return i
    return None


def _answered_tools(messages: list[Any], user_index: int | None) -> frozenset[str]:
    """Names of the tools whose results the last user message carries.

    A tool_result names only a tool_use id, so the name comes from the assistant turn
    before it; a result whose id no earlier tool_use carries is ignored.
    """
    if user_index is None:
        return frozenset()
    content = messages[user_index].get("content")
    if not isinstance(content, list):
        return frozenset()
    result_ids = {
        b.get("tool_use_id")
        for b in content
        if isinstance(b, dict) and b.get("type") == "tool_result"
    }
    if not result_ids:
        return frozenset()
    assistant_index = _last_index(messages, "assistant", before=user_index)
    if assistant_index is None:
        return frozenset()
    assistant_content = messages[assistant_index].get("content")
    if not isinstance(assistant_content, list):
        return frozenset()
    return frozenset(
        b["name"]
        for b in assistant_content
        if isinstance(b, dict)
        and b.get("type") == "tool_use"
        and b.get("id") in result_ids
        and isinstance(b.get("name"), str)
    )


@dataclass(frozen=True)
class Identity:
    """Who sent a request, from the harness's identity line."""

    name: str
    team: str
    kind: str  # "teammate" or "lead"


def parse_identity(system: Any, messages: Any = None) -> Identity | None:
    """Find the identity line in the system prompt, else at the head of the conversation."""
    texts = [system_text(system)]
    if isinstance(messages, list) and messages and isinstance(messages[0], dict):
        texts.append(content_text(messages[0].get("content")))
    for text in texts:
        found = IDENTITY_RE.search(text)
        if found:
            if found.group("lead") is not None:
                return Identity(found.group("lead"), found.group("team"), "lead")
            return Identity(found.group("teammate"), found.group("team"), "teammate")
    return None


@dataclass(frozen=True)
class RequestView:
    """The facts about one request that rules test."""

    body: dict[str, Any]
    system_text: str
    last_user_text: str
    conversation_text: str
    n_messages: int
    agent: str | None = None
    team: str | None = None
    kind: str | None = None
    # Tool names whose tool_result is in the last user message.
    tool_results: frozenset[str] = frozenset()
    # 1-based count of requests from this agent, including this one (set by the server,
    # which is the one that sees every request).
    n: int = 0

    @classmethod
    def from_body(cls, body: Mapping[str, Any], n: int = 0) -> RequestView:
        messages = body.get("messages")
        if not isinstance(messages, list):
            messages = []
        system = system_text(body.get("system"))
        user_index = _last_index(messages, "user")
        last_user = (
            content_text(messages[user_index].get("content")) if user_index is not None else ""
        )
        identity = parse_identity(body.get("system"), messages)
        return cls(
            body=dict(body),
            system_text=system,
            last_user_text=last_user,
            conversation_text=_conversation_text(system, messages),
            n_messages=len(messages),
            agent=identity.name if identity else None,
            team=identity.team if identity else None,
            kind=identity.kind if identity else None,
            tool_results=_answered_tools(messages, user_index),
            n=n,
        )


# ---------------------------------------------------------------------------------------
# Rules
# ---------------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class Decision:
    """What to answer one request with: the rule chosen and its substituted reply or error."""

    label: str | int  # the rule's name or index, or "default"
    content: list[dict[str, Any]]
    stop_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    thinking: Any = None  # the reply's "thinking": False, a text, or None (the default)
    error: ErrorSpec | None = None
    delay: float = 0.0
    trickle: float | None = None
    raw: str | None = None
    cut: bool = False
    variables: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


class Scenario:
    """An ordered list of rules and a default reply; safe to use from many threads."""

    def __init__(
        self, rules: list[Rule] | None = None, default: Mapping[str, Any] | None = None
    ) -> None:
        self._lock = threading.Lock()
        self._rules: list[Rule] = list(rules or [])
        self._next_index = len(self._rules)
        self.default: dict[str, Any] = check_reply(
            copy.deepcopy(dict(default)) if default is not None else copy.deepcopy(DEFAULT_REPLY),
            "default",
        )

    # -- construction ----------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Any) -> Scenario:
        """Build from the JSON-shaped dict; raises ValueError naming the bad field."""
        if isinstance(data, Scenario):
            return data
        if not isinstance(data, Mapping):
            raise ValueError('a scenario must be an object like {"rules": [...]}')
        check_keys(data, _SCENARIO_KEYS, "scenario")
        raw_rules = data.get("rules", [])
        if not isinstance(raw_rules, list):
            raise ValueError("rules: must be a list")
        rules = [Rule.from_dict(r, i) for i, r in enumerate(raw_rules)]
        default = data.get("default")
        return cls(rules, default)

    @classmethod
    def from_json(cls, text: str) -> Scenario:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            where = f"line {exc.lineno} column {exc.colno}"
            raise ValueError(f"invalid JSON at {where}: {exc.msg}") from None
        return cls.from_dict(data)

    @classmethod
    def load(cls, path: str | PathLike[str]) -> Scenario:
        """Read a scenario file; every failure is a ValueError with a one-line message."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read scenario {path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise ValueError(f"scenario {path} is not UTF-8 text") from None
        try:
            return cls.from_json(text)
        except ValueError as exc:
            raise ValueError(f"scenario {path}: {exc}") from None

    # -- editing ---------------------------------------------------------------------

    def add_rule(self, rule: Rule | Mapping[str, Any], *, first: bool = False) -> Rule:
        """Append a rule (or put it in front with first=True); returns the Rule."""
        with self._lock:
            index = self._next_index
            self._next_index += 1
            if not isinstance(rule, Rule):
                rule = Rule.from_dict(dict(rule), index)
            if first:
                self._rules.insert(0, rule)
            else:
                self._rules.append(rule)
            return rule

    @property
    def rules(self) -> list[Rule]:
        with self._lock:
            return list(self._rules)

    def to_dict(self) -> dict[str, Any]:
        with self._lock:
            rules = []
            for rule in self._rules:
                data = copy.deepcopy(rule.source)
                if rule.times is not None:
                    data["times"] = rule.times  # what is left, not what it started with
                rules.append(data)
            return {"rules": rules, "default": copy.deepcopy(self.default)}

    # -- matching --------------------------------------------------------------------

    def choose(self, view: RequestView) -> Decision:
        """Pick the first matching rule with uses left, spend one use, build the answer."""
        builtins: dict[str, str] = {"n": str(view.n)}
        if view.agent is not None:
            builtins["agent"] = view.agent
        if view.team is not None:
            builtins["team"] = view.team
        now = time.time()
        with self._lock:
            for rule in self._rules:
                if rule.window_until is not None:
                    if now >= rule.window_until:
                        continue  # the window is over: the rule is spent
                    # inside an open window every request gets this answer
                    found: dict[str, str] | None = {}
                else:
                    if rule.times is not None and rule.times <= 0:
                        continue
                    found = rule.match(view)
                    if found is None:
                        continue
                    if rule.times is not None:
                        rule.times -= 1
                    if rule.window is not None:
                        rule.window_until = now + rule.window
                variables = {**builtins, **(found or {})}
                reply = rule.reply if rule.reply is not None else self.default
                log.debug("rule %r answers agent=%s n=%d", rule.label, view.agent, view.n)
                return _decision(rule.label, reply, variables, rule.error, rule.delay,
                                 trickle=rule.trickle, raw=rule.raw, cut=rule.cut,
                                 headers=rule.response_headers(now))
            return _decision("default", self.default, builtins, None, 0.0)


# ---------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------


def substitute(value: Any, variables: Mapping[str, str]) -> Any:
    """Replace `{name}` in every string inside value (recursively); unknown names stay."""
    if isinstance(value, str):
        # "{int:name}" as a whole value becomes a number: tool inputs such as task_id are
        # integers, and a regex group is always text
        typed = _INT_RE.fullmatch(value)
        if typed and variables.get(typed.group(1), "").lstrip("-").isdigit():
            return int(variables[typed.group(1)])
        return _VAR_RE.sub(lambda m: variables.get(m.group(1), m.group(0)), value)
    if isinstance(value, list):
        return [substitute(v, variables) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, variables) for k, v in value.items()}
    return value


def _decision(
    label: str | int,
    reply: Mapping[str, Any],
    variables: dict[str, str],
    error: ErrorSpec | None,
    delay: float,
    *,
    trickle: float | None = None,
    raw: str | None = None,
    headers: dict[str, str] | None = None,
    cut: bool = False,
) -> Decision:
    return Decision(
        label=label,
        content=substitute(copy.deepcopy(reply.get("content", [])), variables),
        stop_reason=reply.get("stop_reason"),
        usage=dict(reply.get("usage") or {}), thinking=reply.get("thinking"), error=error,
        delay=delay,
        trickle=trickle,
        raw=raw,
        cut=cut,
        variables=variables,
        headers=dict(headers or {}),
    )


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
