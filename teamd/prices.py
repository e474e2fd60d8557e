"""What a model call costs: the built-in price table, `[prices]` in teamd.toml, and the
arithmetic (CONTRACT.md section 12).

Prices are US dollars per million tokens, input and output; a cache write costs 1.25 × the
input price and a cache read 0.1 ×. The built-in table covers the current models the
installed SDK knows (Opus, Sonnet, Haiku); `[prices]` overrides or adds
(`"claude-sonnet-5-5" = {input = 3.0, output = 15.0}`). A model with no price costs
`None`: its calls are counted in tokens, not in dollars, and nothing is blocked.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from teamd.errors import BadInput

log = logging.getLogger(__name__)

CACHE_WRITE = 1.25  # × the input price
CACHE_READ = 0.1  # × the input price
PER = 1_000_000  # prices are per million tokens
#: a cost is kept to this many decimals (a ten-thousandth of a cent): sums stay readable
DECIMALS = 8

#: the token counts of one call's `usage`, as the Messages API names them
TOKEN_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens",
              "cache_creation_input_tokens")
#: the input side of a call: uncached, cache-read and cache-write tokens (the context's size)
INPUT_KEYS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
#: a member's `usage` (CONTRACT §4): its token counts and what they cost
USAGE_KEYS = (*TOKEN_KEYS, "cost_usd")


def input_tokens(usage: Mapping[str, Any]) -> int:
    """Every input token of `usage`: uncached + cache-read + cache-write."""
    return sum(int(usage.get(key) or 0) for key in INPUT_KEYS)


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens."""

    input: float
    output: float

    def as_toml(self) -> dict[str, float]:
        return {"input": self.input, "output": self.output}


_OPUS, _SONNET, _HAIKU = Price(15.0, 75.0), Price(3.0, 15.0), Price(1.0, 5.0)
#: the current Opus, Sonnet and Haiku models of the installed SDK's model list
BUILTIN: dict[str, Price] = {
    "claude-opus-5-5": _OPUS, "claude-opus-5": _OPUS, "claude-opus-4-8": _OPUS,
    "claude-opus-4-7": _OPUS, "claude-opus-4-6": _OPUS, "claude-opus-4-5": _OPUS,
    "claude-sonnet-5-5": _SONNET, "claude-sonnet-5": _SONNET, "claude-sonnet-4-6": _SONNET,
    "claude-sonnet-4-5": _SONNET,
    "claude-haiku-5-5": _HAIKU, "claude-haiku-4-5": _HAIKU,
}
# a dated snapshot ("claude-haiku-4-5-20251001") or an alias ("…-latest") is priced as its model
_VARIANT = re.compile(r"-(\d{8}|latest)$")


def price_of(model: str, overrides: Mapping[str, Price] | None = None) -> Price | None:
    """The price of `model`: `[prices]` first, then the built-in table; None if unknown."""
    table = overrides or {}
    for name in (model, _VARIANT.sub("", model)):
        if name in table:
            return table[name]
        if name in BUILTIN:
            return BUILTIN[name]
    return None


def cost(usage: Mapping[str, Any], price: Price | None) -> float | None:
    """US dollars for one call's `usage` (input, output, cache write and read tokens), or
    None when the model has no price."""
    if price is None:
        return None

    def tokens(key: str) -> int:
        return int(usage.get(key) or 0)

    dollars = (tokens("input_tokens") * price.input
               + tokens("cache_creation_input_tokens") * price.input * CACHE_WRITE
               + tokens("cache_read_input_tokens") * price.input * CACHE_READ
               + tokens("output_tokens") * price.output) / PER
    return round(dollars, DECIMALS)


def add(total: Any, amount: float) -> float:
    """`total` (a stored sum: a number, or absent/bad = 0) plus `amount`, kept rounded."""
    base = float(total) if isinstance(total, int | float) and not isinstance(total, bool) \
        and math.isfinite(total) else 0.0
    return round(base + amount, DECIMALS)


def parse_table(value: Any, where: str) -> dict[str, Price]:
    """`[prices]` of teamd.toml: model → {input, output}, both dollars per million tokens."""
    if not isinstance(value, dict):
        raise BadInput(f"{where}: [prices] must be a table of models")
    table: dict[str, Price] = {}
    for model, entry in value.items():
        at = f"{where}: [prices] {model!r}"
        if not isinstance(entry, dict):
            raise BadInput(f"{at} must be a table like {{input = 3.0, output = 15.0}}")
        unknown = sorted(set(entry) - {"input", "output"})
        if unknown:
            raise BadInput(f"{at}: unknown key {unknown[0]!r} (input and output only: cache "
                           "writes and reads are priced from input)")
        numbers = []
        for key in ("input", "output"):
            raw = entry.get(key)
            if raw is None:
                raise BadInput(f"{at} needs {key} (dollars per million tokens)")
            if isinstance(raw, bool) or not isinstance(raw, int | float) \
                    or not math.isfinite(raw) or raw < 0:
                raise BadInput(f"{at}: {key} must be a number >= 0, got {raw!r}")
            numbers.append(float(raw))
        table[str(model)] = Price(*numbers)
    return table


def dollars(amount: float) -> str:
    """"$20.03": money in words (last_error, messages)."""
    return f"${amount:,.2f}" if amount >= 0.01 or amount == 0 else f"${amount:.4f}"
