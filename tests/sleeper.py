"""A sleeper's day, lived by a real member under a real `teamd run`: it sleeps (exit 75)
after each answer, and is woken by a message after a gap that the scripted server's cache
clock lives (`PromptCache.advance`) while the test waits only for the work. Shared by
tests/e2e/test_cache_ttl.py and bench/bench_sleeper.py."""

from __future__ import annotations

from typing import Any

from teamd import actions
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import events_of, wait_status

#: the member's first prompt
PROMPT = "You review changes for the team as they come. " * 20
#: a day: 20 wakes, gaps of 2 to 40 minutes (mean 17)
DAY = (2, 12, 40, 7, 25, 3, 18, 33, 9, 15, 38, 5, 21, 2, 30, 11, 27, 6, 35, 14)
#: what each wake takes a member: a change of ~1.5 KB to review
SETTINGS = {"idle_timeout": 0.3}  # asleep soon after each answer


def change(i: int) -> str:
    return f"Change {i} is ready for review:\n" + f"- line {i}: edited\n" * 80


def live_a_day(ws: Workspace, server: ScriptedServer, team: str, name: str, cwd: str,
               gaps: tuple[int, ...] = DAY, timeout: float = 30.0) -> list[dict[str, Any]]:
    """Spawn `name` in `team` (teamd running), let it answer its prompt and sleep; then for
    each gap (minutes): move the cache clock on by it, wake it with a change, wait until it
    has answered and sleeps again. Returns its `model_call` events, in order."""
    actions.spawn(ws, team, name, PROMPT, cwd=cwd)
    wait_status(ws, name, "sleeping", timeout, team=team)
    for i, gap in enumerate(gaps, 1):
        server.cache.advance(gap * 60)
        since = len(server.requests)
        actions.send(ws, team, name, change(i))
        server.wait_for(lambda r: r["agent"] == name, timeout, since=since)
        wait_status(ws, name, "sleeping", timeout, team=team)
    calls = events_of(ws, name, "model_call", team=team)
    assert len(calls) == len(gaps) + 1 and all(c["error"] is None for c in calls), calls
    return calls


def day_cost(calls: list[dict[str, Any]]) -> float:
    return sum(float(c["cost_usd"]) for c in calls)
