"""A scenario for the scripted Messages API server, and how a request picks its answer.

This module owns the scenario format (an ordered list of rules plus a default reply) and
its loading, the thread-safe choice of the answering rule (uses left, rate-limit windows)
and the `{var}` substitution that turns it into a `Decision`. A rule's own format and
matching are `teamd.scripted.rules`'s, reading a request `teamd.scripted.request`'s; it
knows nothing about HTTP: `teamd.scripted.server` turns a `Decision` into bytes.
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
from teamd.scripted.request import RequestView
from teamd.scripted.rules import ErrorSpec, Rule

log = logging.getLogger(__name__)

DEFAULT_REPLY: dict[str, Any] = {"content": [{"type": "text", "text": "Nothing to do."}]}

_SCENARIO_KEYS = frozenset({"rules", "default", "description"})

# Only identifier-shaped names in single braces are variables, so JSON text such as
# `{"a": 1}` and unknown names pass through untouched (str.format would choke on both).
_VAR_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_INT_RE = re.compile(r"\{int:([A-Za-z_][A-Za-z0-9_]*)\}")


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
