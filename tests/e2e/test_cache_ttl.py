"""`cache_ttl` (CONTRACT.md sections 6 and 10): the breakpoints' TTLs a member asks for, the
scripted server's cache that keeps and reports them (`usage.cache_creation` by TTL, entries
expiring by TTL on a clock a test moves on), and a sleeper's day priced under `5m`, `1h`
and `auto` — `auto` no worse than the better of the two."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import pytest

from teamd import actions, prices
from teamd.agent import context
from teamd.agent.cache_ttl import CacheTTL
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import running_teamd
from tests.sleeper import DAY, SETTINGS, day_cost, live_a_day

LONG = "You are teammate 'web' in team 't'. " + "Stable instructions. " * 400  # ~2,000 tokens


def ask(server: ScriptedServer, system_ttl: str, tail_ttl: str, turn: str) -> Any:
    system, _, messages = context.with_cache_breakpoints(
        LONG, [], [{"role": "user", "content": [{"type": "text", "text": turn * 300}]}],
        system_ttl, tail_ttl)
    with anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=0) as client:
        return client.messages.create(model="claude-sonnet-5-5", max_tokens=100,
                                      system=system, messages=messages).usage


def test_writes_are_reported_by_ttl_and_entries_expire_by_theirs(server: ScriptedServer
                                                                  ) -> None:
    first = ask(server, "1h", "5m", "one ")
    split = first.cache_creation
    assert first.cache_read_input_tokens == 0 and split is not None
    # the system prompt (to its 1-hour breakpoint) and the turn (to its 5-minute one)
    assert split.ephemeral_1h_input_tokens > len(LONG) // 4 > 0
    assert split.ephemeral_5m_input_tokens > 0
    assert split.ephemeral_1h_input_tokens + split.ephemeral_5m_input_tokens == \
        first.cache_creation_input_tokens
    assert prices.usage_of(first)[prices.ONE_HOUR] == split.ephemeral_1h_input_tokens
    whole = first.cache_creation_input_tokens
    assert ask(server, "1h", "5m", "one ").cache_read_input_tokens == whole  # both alive
    server.cache.advance(301)  # the 5-minute entry is gone, the 1-hour one is not
    later = ask(server, "1h", "5m", "one ")
    assert later.cache_read_input_tokens == split.ephemeral_1h_input_tokens
    assert later.cache_creation.ephemeral_5m_input_tokens == split.ephemeral_5m_input_tokens
    server.cache.advance(3601)  # and an hour after its last use, the 1-hour one
    assert ask(server, "1h", "5m", "one ").cache_read_input_tokens == 0


def test_a_1_hour_breakpoint_reads_what_a_5_minute_one_wrote(server: ScriptedServer) -> None:
    written = ask(server, "5m", "5m", "two ").cache_creation_input_tokens
    upgraded = ask(server, "1h", "1h", "two ")
    assert upgraded.cache_read_input_tokens == written  # read, and refreshed for an hour
    server.cache.advance(1800)
    assert ask(server, "5m", "5m", "two ").cache_read_input_tokens == written


def test_the_ttls_a_member_asks_for() -> None:
    assert context.cache_control("5m") == {"type": "ephemeral"}
    assert context.cache_control("1h") == {"type": "ephemeral", "ttl": "1h"}
    fresh = CacheTTL()
    assert fresh.ttls("5m") == fresh.ttls("auto") == ("5m", "5m")
    assert fresh.ttls("1h") == ("1h", "5m")
    fresh.saw({"cache_read_input_tokens": 0, "cache_creation_input_tokens": 3000})
    assert fresh.ttls("auto") == ("5m", "5m")  # its first write: nothing was lost
    fresh.saw({"cache_read_input_tokens": 3000, "cache_creation_input_tokens": 200})
    assert fresh.ttls("auto") == ("5m", "5m")
    fresh.saw({"cache_read_input_tokens": 0, "cache_creation_input_tokens": 3300})
    assert fresh.ttls("auto") == ("1h", "1h")  # its cache was gone: long gaps, from now on
    assert fresh.ttls("5m") == ("5m", "5m") and fresh.ttls("1h") == ("1h", "5m")
    # a member forked again on a session whose turn had ended: it slept and was woken
    assert CacheTTL(woken=True).ttls("auto") == ("1h", "1h")


@pytest.mark.parametrize("script", [{"rules": [], "default": {"content": [
    {"type": "text", "text": "Noted; I will look at it and report back. " * 14}]}}])
def test_a_sleepers_day_costs_least_under_auto(ws: Workspace, server: ScriptedServer,
                                               workdir: Path) -> None:
    """20 wakes, gaps of 2 to 40 minutes on the server's clock: the same day under each
    `cache_ttl`, priced at Sonnet 5.5's rates; `auto` no worse than the better of the two."""
    days: dict[str, list[dict[str, Any]]] = {}
    for ttl in ("5m", "1h", "auto"):
        team = f"day-{ttl}"
        actions.create_team(ws, team)
        server.cache.clear()  # each day starts cold, as the first of its kind would
        with running_teamd(ws, server.url, cache_ttl=ttl, **SETTINGS):
            days[ttl] = live_a_day(ws, server, team, "sleeper", str(workdir))
        bodies = [r["body"] for r in server.requests if r["team"] == team]
        controls = {str(b["system"][0]["cache_control"]) for b in bodies}
        if ttl == "5m":
            assert controls == {str({"type": "ephemeral"})}
        elif ttl == "1h":
            assert controls == {str({"type": "ephemeral", "ttl": "1h"})}
    costs = {ttl: day_cost(calls) for ttl, calls in days.items()}
    long_gaps = [i for i, gap in enumerate(DAY, 1) if gap > 5]
    # the fault the TTL is for happened: under 5m every long gap found the cache gone
    assert all(days["5m"][i]["cache_read_input_tokens"] == 0 for i in long_gaps)
    # under 1h the prefix was written for an hour once, and read after every long gap
    assert days["1h"][0]["cache_creation_1h"] > 0
    assert all(days["1h"][i]["cache_read_input_tokens"] > 0 for i in long_gaps)
    # auto began at 5 minutes; woken from its first sleep it took 1 hour for everything,
    # and read its whole conversation after every long gap
    assert days["auto"][0]["cache_creation_1h"] == 0
    assert all(c["cache_creation_1h"] > 0 for c in days["auto"][1:])
    assert all(days["auto"][i]["cache_read_input_tokens"] >= days["auto"][i - 1][
        "cache_read_input_tokens"] for i in long_gaps)
    assert costs["auto"] <= min(costs["5m"], costs["1h"]), costs
