#!/usr/bin/env python3
"""A sleeper's day under each `cache_ttl`: what the prompt cache makes it cost.

One teammate under a real `teamd run` (`idle_timeout` 0.3 s: asleep, exit 75, soon after
each answer) answers its prompt, then is woken 20 times by a change of ~1.5 KB to review,
the gaps between wakes 2 to 40 minutes (`tests/sleeper.py`'s DAY) lived by the scripted
server's cache clock (`PromptCache.advance`: entries expire by their TTL as the API's do)
while the benchmark waits only for the work. The same day under `cache_ttl` `5m` (every
breakpoint for 5 minutes: what teamd did before), `1h` (the stable prefix for an hour) and
`auto` (1 hour for the prefix and the conversation once the member has slept and been
woken); each day starts with a cold cache. Cost: every `model_call`'s `cost_usd` at Sonnet
5.5's rates from the price table ($2 in, $10 out, 5-minute write $2.50, 1-hour $4, read
$0.10 per million tokens); tokens are the server's estimate (4 characters each).

    python -m bench.bench_sleeper [--quick]
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from bench.common import Context, Row, figure, row
from bench.lab import TEAM, Lab
from tests.sleeper import DAY, SETTINGS, day_cost, live_a_day

NAME = "sleeper"
TITLE = "a sleeper's day (20 wakes, gaps of 2-40 min): its cost under cache_ttl 5m, 1h, auto"
LIMIT = (240.0, 60.0)
MEMBER = "sleeper"
SCENARIO = {"rules": [], "default": {"content": [
    {"type": "text", "text": "Noted; I will look at it and report back. " * 14}]}}


def one_day(ctx: Context, ttl: str, gaps: tuple[int, ...]) -> list[dict[str, Any]]:
    """The day under `ttl`, in a workspace and a scripted server of its own."""
    own = dataclasses.replace(ctx, workdir=ctx.workdir / ttl)
    own.workdir.mkdir()
    with Lab(own, cache_ttl=ttl, **SETTINGS) as lab:
        lab.server.set_scenario(SCENARIO)
        return live_a_day(lab.ws, lab.server, TEAM, MEMBER, str(own.workdir), gaps)


def tokens(calls: list[dict[str, Any]]) -> str:
    def total(key: str) -> int:
        return sum(int(c.get(key) or 0) for c in calls)

    written = total("cache_creation_input_tokens")
    return (f"tokens: input {total('input_tokens'):,}, cache write {written:,} "
            f"({total('cache_creation_1h'):,} for 1 h), cache read "
            f"{total('cache_read_input_tokens'):,}, output {total('output_tokens'):,}")


def run(ctx: Context) -> list[Row]:
    gaps = DAY if not ctx.quick else DAY[:4]
    days = {}
    for ttl in ("5m", "1h", "auto"):
        ctx.progress(f"a day of {len(gaps)} wakes under cache_ttl = {ttl}")
        days[ttl] = one_day(ctx, ttl, gaps)

    def fig(ttl: str) -> dict[str, Any]:
        return figure(f"cache_ttl {ttl}", "$", [day_cost(days[ttl])], detail=tokens(days[ttl]))

    what = (f"One teammate's day: its prompt, then {len(gaps)} wakes (a ~1.5 KB change each, "
            f"gaps of {min(gaps)}-{max(gaps)} minutes on the scripted server's cache clock), "
            "asleep (exit 75) between them, under a real teamd; priced at Sonnet 5.5's rates "
            "from the price table. `5m` is every breakpoint for 5 minutes (teamd before "
            "cache_ttl); `1h` the stable prefix for an hour; `auto` 1 hour for the prefix and "
            "the conversation once it has slept and been woken.")
    return [
        row("sleeper_5m", f"a sleeper's day ({len(gaps)} wakes): auto vs 5m", what,
            fig("auto"), fig("5m")),
        row("sleeper_1h", f"a sleeper's day ({len(gaps)} wakes): auto vs 1h", what,
            fig("auto"), fig("1h")),
    ]


if __name__ == "__main__":
    from bench.suite import standalone

    sys.exit(standalone(sys.modules[__name__]))
