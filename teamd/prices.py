"""What a model call costs: the price table (data, in `teamd/prices.toml`), `[prices]` in
teamd.toml, and the arithmetic (CONTRACT.md section 12).

Prices are US dollars per million tokens, five rates per model: `input`, `output`,
`cache_write_5m`, `cache_write_1h`, `cache_read` — the cache rates are the model's own (a
cache read is 0.1 × input for most models, 0.05 × or 0.025 × for some). A model priced by the
prompt's length has a `long` tier: above its `threshold` prompt tokens (input + cache read +
cache write) its five rates apply to every token of the call. A call's cache writes are split
by TTL as the API reports them (`cache_creation_1h` here; the rest are 5-minute writes).
`[prices]` overrides or adds (`"claude-sonnet-5-5" = {input = 2.0, output = 10.0}`; an
omitted cache rate is 1.25 ×, 2 ×, 0.1 × the input rate). A model with no price costs `None`.
"""

from __future__ import annotations

import functools
import logging
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from teamd.errors import BadInput

log = logging.getLogger(__name__)

TABLE_FILE = Path(__file__).with_name("prices.toml")
PER = 1_000_000  # prices are per million tokens
#: a cost is kept to this many decimals (a ten-thousandth of a cent): sums stay readable
DECIMALS = 8
#: an omitted cache rate, as a multiple of the (tier's) input rate
DEFAULT_MULTIPLES = {"cache_write_5m": 1.25, "cache_write_1h": 2.0, "cache_read": 0.1}
RATE_KEYS = ("input", "output", "cache_write_5m", "cache_write_1h", "cache_read")
BUILT_IN, FROM_SETTINGS = "built-in", "teamd.toml"

#: the token counts of one call's `usage`, as the Messages API names them
TOKEN_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens",
              "cache_creation_input_tokens")
#: of `cache_creation_input_tokens`, those written with a 1-hour TTL (`model_call` carries it)
ONE_HOUR = "cache_creation_1h"
#: a call's usage as teamd records it (the journal's `model_call`, the member's `usage`)
CALL_KEYS = (*TOKEN_KEYS, ONE_HOUR)
#: the input side of a call: uncached, cache-read and cache-write tokens (the context's size)
INPUT_KEYS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
#: a member's `usage` (CONTRACT §4): its token counts and what they cost
USAGE_KEYS = (*TOKEN_KEYS, "cost_usd")


def input_tokens(usage: Mapping[str, Any]) -> int:
    """Every input token of `usage`: uncached + cache-read + cache-write."""
    return sum(int(usage.get(key) or 0) for key in INPUT_KEYS)


def usage_of(usage: Any) -> dict[str, int]:
    """A reply's `usage` (the SDK's object, or the JSON a forwarded reply carries) as teamd
    records it: the four counts and the 1-hour part of the cache writes (0 when the API
    reports no split)."""
    def field(of: Any, key: str) -> Any:
        return of.get(key) if isinstance(of, Mapping) else getattr(of, key, None)

    counts = {key: int(field(usage, key) or 0) for key in TOKEN_KEYS}
    split = field(usage, "cache_creation")
    counts[ONE_HOUR] = min(int(field(split, "ephemeral_1h_input_tokens") or 0),
                           counts["cache_creation_input_tokens"])
    return counts


@dataclass(frozen=True)
class Rates:
    """US dollars per million tokens of each kind."""

    input: float
    output: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float


@dataclass(frozen=True)
class Long:
    """A tier priced by the prompt's length: above `threshold` prompt tokens, `rates`."""

    threshold: int
    rates: Rates


@dataclass(frozen=True)
class Price:
    """A model's rates, its `long` tier if any, the day they were checked and where from."""

    rates: Rates
    long: Long | None = None
    checked: str | None = None
    source: str = BUILT_IN

    def rates_for(self, prompt_tokens: int) -> Rates:
        """The rates of a call whose prompt is `prompt_tokens` long."""
        if self.long is not None and prompt_tokens > self.long.threshold:
            return self.long.rates
        return self.rates

    def as_json(self, model: str) -> dict[str, Any]:
        """A row of `teamctl prices --json` (CONTRACT §12)."""
        long = None if self.long is None else {"threshold": self.long.threshold,
                                                **asdict(self.long.rates)}
        return {"model": model, **asdict(self.rates), "long": long, "checked": self.checked,
                "source": self.source}


# a dated snapshot ("claude-haiku-4-5-20251001") or an alias ("…-latest") is priced as its model
_VARIANT = re.compile(r"-(\d{8}|latest)$")


def price_of(model: str, overrides: Mapping[str, Price] | None = None) -> Price | None:
    """The price of `model`: `[prices]` first, then the built-in table; None if unknown."""
    table = overrides or {}
    builtin = built_in()
    for name in (model, _VARIANT.sub("", model)):
        if name in table:
            return table[name]
        if name in builtin:
            return builtin[name]
    return None


def cost(usage: Mapping[str, Any], price: Price | None) -> float | None:
    """US dollars for one call's `usage` (input, output, cache writes by TTL, cache reads),
    or None when the model has no price."""
    if price is None:
        return None

    def tokens(key: str) -> int:
        return int(usage.get(key) or 0)

    rates = price.rates_for(input_tokens(usage))
    written = tokens("cache_creation_input_tokens")
    one_hour = min(tokens(ONE_HOUR), written)
    dollars = (tokens("input_tokens") * rates.input
               + (written - one_hour) * rates.cache_write_5m
               + one_hour * rates.cache_write_1h
               + tokens("cache_read_input_tokens") * rates.cache_read
               + tokens("output_tokens") * rates.output) / PER
    return round(dollars, DECIMALS)


def add(total: Any, amount: float) -> float:
    """`total` (a stored sum: a number, or absent/bad = 0) plus `amount`, kept rounded."""
    base = float(total) if isinstance(total, int | float) and not isinstance(total, bool) \
        and math.isfinite(total) else 0.0
    return round(base + amount, DECIMALS)


def dollars(amount: float) -> str:
    """"$20.03": money in words (last_error, messages)."""
    return f"${amount:,.2f}" if amount >= 0.01 or amount == 0 else f"${amount:.4f}"


# -- the tables --------------------------------------------------------------------------------
@functools.cache
def _shipped() -> tuple[dict[str, Price], dict[str, str]]:
    data = tomllib.loads(TABLE_FILE.read_text(encoding="utf-8"))
    where = str(TABLE_FILE)
    models = {str(model): _price(entry, f"{where}: {model!r}", built_in=True)
              for model, entry in data.get("models", {}).items()}
    return models, {str(k): str(v) for k, v in data.get("unpriced", {}).items()}


def built_in() -> dict[str, Price]:
    """Model → price, as shipped in teamd/prices.toml (read once)."""
    return _shipped()[0]


def known_unpriced() -> dict[str, str]:
    """Models of the SDK's list the table knowingly leaves unpriced, with the reason."""
    return _shipped()[1]


def in_force(overrides: Mapping[str, Price]) -> dict[str, Price]:
    """The whole table in force: the built-in rows, `[prices]` over them, by model name."""
    return dict(sorted({**built_in(), **overrides}.items()))


def parse_table(value: Any, where: str) -> dict[str, Price]:
    """`[prices]` of teamd.toml: model → the built-in table's keys (`input` and `output`
    required; cache rates and a `long` tier optional)."""
    if not isinstance(value, dict):
        raise BadInput(f"{where}: [prices] must be a table of models")
    return {str(model): _price(entry, f"{where}: [prices] {model!r}", built_in=False)
            for model, entry in value.items()}


def _price(entry: Any, at: str, *, built_in: bool) -> Price:
    if not isinstance(entry, dict):
        raise BadInput(f"{at} must be a table like {{input = 2.0, output = 10.0}}")
    allowed = {*RATE_KEYS, "long"} | ({"checked", "page"} if built_in else set())
    _no_unknown(entry, allowed, at)
    long = None
    if entry.get("long") is not None:
        tier = entry["long"]
        if not isinstance(tier, dict):
            raise BadInput(f"{at}: long must be a table like {{threshold = 100000, "
                           "input = 0.5, output = 2.5}")
        _no_unknown(tier, {*RATE_KEYS, "threshold"}, f"{at} long")
        threshold = _number(tier, "threshold", f"{at} long", "prompt tokens")
        if not float(threshold).is_integer():
            raise BadInput(f"{at} long: threshold must be a whole number of prompt tokens")
        long = Long(int(threshold), _rates(tier, f"{at} long"))
    checked = entry.get("checked") if built_in else None
    return Price(_rates(entry, at), long, str(checked) if checked else None,
                 BUILT_IN if built_in else FROM_SETTINGS)


def _rates(entry: Mapping[str, Any], at: str) -> Rates:
    given = {key: _number(entry, key, at) for key in ("input", "output")}
    for key, times in DEFAULT_MULTIPLES.items():
        given[key] = (_number(entry, key, at) if entry.get(key) is not None
                      else round(given["input"] * times, DECIMALS))
    return Rates(**given)


def _number(entry: Mapping[str, Any], key: str, at: str,
            unit: str = "dollars per million tokens") -> float:
    raw = entry.get(key)
    if raw is None:
        raise BadInput(f"{at} needs {key} ({unit})")
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw) \
            or raw < 0:
        raise BadInput(f"{at}: {key} must be a number >= 0, got {raw!r}")
    return float(raw)


def _no_unknown(entry: Mapping[str, Any], allowed: set[str], at: str) -> None:
    unknown = sorted(set(entry) - allowed)
    if unknown:
        known = [k for k in (*RATE_KEYS, "long", "threshold") if k in allowed]
        raise BadInput(f"{at}: unknown key {unknown[0]!r} (one of: {', '.join(known)})")
