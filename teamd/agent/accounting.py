"""A model call counted, and the root held back, whoever made the call (CONTRACT §12, §14):
the built-in loop (`teamd.agent.builtin`) and the forwarder a Claude Code member's calls go
through (`teamd.agent.forwarder`) count each call here, the same way.

A call that came back is priced with its model's rates and recorded in one step: its
`model_call` event (usage, `cost_usd`), the member's `usage` and the team's `spend.json`
(`Standing.add_usage`). A call that failed is a `model_call` with its `error` and no tokens.
A 429 or 529, or an answer whose rate-limit headers say a family is used up, holds the whole
root back (`.teams/ratelimit.json`); `backoff_line` is what a member waiting on that says.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from teamd import events, prices, ratelimit
from teamd.files import Json

if TYPE_CHECKING:
    from teamd.agent.member import Member


def count_call(m: Member, model_name: str, usage: Json | None, *, ms: float | None,
               stop_reason: str | None, error: str | None = None,
               thinking: str | None = None) -> float | None:
    """Record one call of `m` to `model_name`: with `usage` (it came back) or an `error`
    (it did not). Returns its cost (None: no price for the model, or no answer)."""
    price = prices.price_of(model_name, m.conf.prices)
    if usage is None:
        events.emit(m.ws, m.team, "model_call", member=m.name, model=model_name,
                    error=error or "no answer", ms=None, stop_reason=None,
                    cost_usd=prices.cost({}, price), **dict.fromkeys(prices.CALL_KEYS, 0))
        return None
    cost = prices.cost(usage, price)
    events.emit(m.ws, m.team, "model_call", member=m.name, model=model_name,
                ms=None if ms is None else round(ms, 1), error=None, cost_usd=cost,
                stop_reason=stop_reason, **usage, thinking=thinking)
    m.standing.add_usage(usage, clear_error=True, cost=cost)
    return cost


def hold_root_back(m: Member, model_name: str, until: float) -> None:
    """An answer said a rate-limit family is used up until `until`: the whole root waits
    until then (ratelimit.json, `source: headers`), before any 429."""
    until = min(until, time.time() + m.conf.retry_max_wait)
    if until <= time.time():
        return
    now_in_force = ratelimit.record(m.ws, until=until, status=None, model=model_name,
                                    source="headers")
    if now_in_force.get("until") == until:  # ours, not an earlier, longer one
        events.emit(m.ws, m.team, "rate_limited", member=m.name, status=None,
                    until=until, source="headers")


def rate_limited(m: Member, model_name: str, status: int, until: float, source: str) -> None:
    """A 429 or 529: the whole root holds off until `until` (ratelimit.json)."""
    ratelimit.record(m.ws, until=until, status=status, model=model_name, source=source)
    events.emit(m.ws, m.team, "rate_limited", member=m.name, status=status, until=until,
                source=source)


def backoff_line(limit: Json) -> str:
    """`last_error` of a member waiting out the root's shared back-off `limit`."""
    what = limit.get("status") or "a rate limit used up, said the headers"
    return (f"model API: rate limited (shared) until {clock(float(limit['until']))}: the "
            f"root is rate limited ({what} for {limit.get('model')})")


def clock(epoch: float) -> str:
    """A time of day for `last_error` ("retrying at 14:03:21")."""
    return time.strftime("%H:%M:%S", time.localtime(epoch))
