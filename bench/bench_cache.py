#!/usr/bin/env python3
"""Prompt caching over a 20-turn session: the share of input read from cache, and the cost.

One teammate under a real `teamd run` has a 20-call session: its first prompt, then 19
messages of ~1.5 KB each, every one answered (~600 characters) before the next is sent. The
scripted server accounts for prompt caching as the API does for the request's
`cache_control` breakpoints (teamd.scripted.cache: the shared prefix read, the new part
written, a 1,024-token minimum), and reports it in each reply's usage, which the teammate
journals (`model_call` events). Baseline: the very same 20 requests with every
`cache_control` removed, replayed through the `anthropic` SDK to a fresh scripted server.

Cost at the default model's rates from the price table (Sonnet 5.5: $2 per million input
tokens, $10 output, 5-minute cache writes $2.50, cache reads $0.10), and beside it at the old
built-in table's Sonnet price ($3 / $15, writes 1.25× and reads 0.1× input) for comparison.
Tokens are the server's estimate (4 characters each).

    python -m bench.bench_cache [--quick]
"""

from __future__ import annotations

import sys
from functools import partial
from typing import Any

import anthropic

from bench.common import Context, Row, figure, row
from bench.lab import TEAM, Lab
from teamd import prices
from teamd.scripted import ScriptedServer
from tests.harness import wait_until

NAME = "cache"
TITLE = "prompt-cache share and cost of a 20-turn session (breakpoints vs none)"
LIMIT = (120.0, 30.0)
MEMBER = "writer"
MODEL = "claude-sonnet-5-5"  # the default model, which the member calls
PRICE = prices.price_of(MODEL)
#: what the built-in table said before it was checked against the pricing page
OLD_PRICE = prices.Price(prices.Rates(3.0, 15.0, 3.75, 6.0, 0.3))
KEYS = prices.CALL_KEYS
SCENARIO = {"rules": [], "default": {"content": [
    {"type": "text", "text": "Noted; I will look at it and report back. " * 14}]}}


def cost(usage: dict[str, int], price: prices.Price | None = PRICE) -> float:
    return prices.cost(usage, price) or 0.0


def strip(value: Any) -> Any:
    """The request without any cache_control, everything else as it was."""
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


def replay(bodies: list[dict[str, Any]]) -> list[dict[str, int]]:
    usages = []
    # a timeout of its own, as teamd's client has: with the SDK's default it refuses a
    # non-streamed call whose max_tokens (32000, teamd's default) could run past 10 minutes
    with ScriptedServer(SCENARIO) as server, anthropic.Anthropic(
            base_url=server.url, api_key="bench-key", max_retries=0, timeout=60) as client:
        for body in bodies:
            usage = client.messages.create(**strip(body)).usage
            usages.append(prices.usage_of(usage))
    return usages


def session(lab: Lab, ctx: Context, turns: int) -> list[dict[str, int]]:
    lab.spawn(MEMBER, "You review changes for the team. " * 40)
    lab.wait_idle([MEMBER], 60)
    for i in range(1, turns):
        done = lab.turns_done(MEMBER)
        lab.send(MEMBER, f"Change {i} is ready for review:\n" + f"- line {i}: edited\n" * 80)
        wait_until(partial(lab.idle_after, MEMBER, done), 30, "the answer", interval=0.005)
    calls = [r for r in lab.ws.store.read_journal(TEAM)
             if r.get("event") == "model_call" and r.get("member") == MEMBER]
    return [{k: int(r.get(k) or 0) for k in KEYS} for r in calls]


def run(ctx: Context) -> list[Row]:
    turns = ctx.n(20, 3)
    with Lab(ctx) as lab:
        lab.server.set_scenario(SCENARIO)
        ctx.progress(f"a {turns}-turn session with breakpoints")
        ours = session(lab, ctx, turns)
        bodies = [r["body"] for r in lab.server.requests if r["agent"] == MEMBER]
    ctx.progress(f"replaying its {len(bodies)} requests without cache_control")
    base = replay(bodies)

    def total(usages: list[dict[str, int]]) -> dict[str, int]:
        return {k: sum(u[k] for u in usages) for k in KEYS}

    def share(u: dict[str, int]) -> float:
        inp = prices.input_tokens(u)
        return 100.0 * u["cache_read_input_tokens"] / inp if inp else 0.0

    t_ours, t_base = total(ours), total(base)
    per_call = [share(u) for u in ours]

    def tokens(t: dict[str, int]) -> str:
        return (f"tokens: input {t['input_tokens']:,}, cache write "
                f"{t['cache_creation_input_tokens']:,}, cache read "
                f"{t['cache_read_input_tokens']:,}, output {t['output_tokens']:,}")

    what = (f"One teammate's {len(ours)}-call session (first prompt + {turns - 1} messages of "
            "~1.5 KB, each answered before the next); usage as the scripted server reports "
            "it for the breakpoints teamd sets (system, tools, conversation tail), journalled "
            "by the teammate. Baseline: the same requests without `cache_control`, replayed "
            "to a fresh server. Prices: Sonnet 5.5's from the price table ($2/MTok input, "
            "$10 output, 5-minute cache write $2.50, cache read $0.10), the old table's "
            "($3 / $15, write 1.25×, read 0.1×) in the detail; tokens are the server's "
            "estimate.")
    return [
        row("cache_share", f"prompt-cache share of input over a {len(ours)}-turn session",
            what, figure("breakpoints", "% of input", [share(t_ours)],
                         detail=f"per call: min {min(per_call):.0f} %, max "
                         f"{max(per_call):.0f} %"),
            figure("no cache_control", "% of input", [share(t_base)]), better="higher"),
        row("cache_cost", f"cost of that {len(ours)}-turn session", what,
            figure("breakpoints", "$", [cost(t_ours)], detail=tokens(t_ours)
                   + f"; at the old table's $3 / $15: ${cost(t_ours, OLD_PRICE):.2f}"),
            figure("no cache_control", "$", [cost(t_base)], detail=tokens(t_base)
                   + f"; at the old table's $3 / $15: ${cost(t_base, OLD_PRICE):.2f}")),
    ]


if __name__ == "__main__":
    from bench.suite import standalone

    sys.exit(standalone(sys.modules[__name__]))
