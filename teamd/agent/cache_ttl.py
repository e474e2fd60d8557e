"""The TTLs of a member's prompt-cache breakpoints, from the `cache_ttl` setting
(CONTRACT.md sections 6 and 10).

`5m`: every breakpoint for 5 minutes (a write costs 1.25 × input). `1h`: the stable prefix
(system prompt and tools) for an hour (2 × input, written once while the member is woken
within the hour), the conversation's tail for 5 minutes. `auto`, chosen per member from what
it has seen: 5 minutes until it has slept and been woken (a process started on a session
whose last turn had ended) or a call found the cache it had written gone; from then on
1 hour for the prefix and the conversation alike, so each wake reads the whole conversation
(0.1 × input or less) instead of writing it again (1.25 ×) — a 1-hour breakpoint also reads
what a 5-minute one wrote, so switching costs nothing while that is still alive. The rule
was chosen by measurement (`python -m bench.bench_sleeper`: a sleeper's day of 20 wakes,
gaps of 2 to 40 minutes; README's table): a 1-hour prefix alone saves only the prefix's
rewrites, while the conversation, which grows with every wake, is most of what a wake after
a long gap costs. Its price: a member that sleeps but is always woken within 5 minutes
writes its new tokens at 2 × instead of 1.25 × input.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

FIVE_MINUTES, ONE_HOUR = "5m", "1h"


class CacheTTL:
    """What one member has seen of the cache, and the TTLs it asks for. `woken`: this
    process resumed a session whose last turn had ended (it slept, or was restarted idle)."""

    def __init__(self, woken: bool = False) -> None:
        self.cached = False  # a call of this process has read or written the cache
        self.lost = woken  # it slept and was woken, or a call found its cache gone

    def saw(self, usage: Mapping[str, Any]) -> None:
        """Learn from one reply's usage."""
        read = int(usage.get("cache_read_input_tokens") or 0)
        written = int(usage.get("cache_creation_input_tokens") or 0)
        if self.cached and read == 0 and written > 0:
            self.lost = True
        self.cached = self.cached or read > 0 or written > 0

    def ttls(self, setting: str) -> tuple[str, str]:
        """(the stable prefix's TTL, the conversation tail's) for `cache_ttl` = `setting`."""
        if setting == ONE_HOUR:
            return ONE_HOUR, FIVE_MINUTES
        if setting == FIVE_MINUTES or not self.lost:
            return FIVE_MINUTES, FIVE_MINUTES
        return ONE_HOUR, ONE_HOUR
