"""What every store's change feed is used for the same way: waiting for a check to come
true (`Store.wait_for`), re-checked on every change and at least every tick."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from teamd.store.api import Feed


def wait_on_feed(store: Any, teams: Sequence[str], check: Callable[[], Any], timeout: float,
             tick: float = 0.5) -> Any:
    """check()'s first truthy value, re-checked on every change of `teams` and at least
    every `tick` seconds; falsy at the deadline."""
    deadline = time.monotonic() + timeout
    feed: Feed
    with store.changes(teams, poll_fallback=min(tick, 0.5)) as feed:
        while True:
            result = check()
            left = deadline - time.monotonic()
            if result or left <= 0:
                return result
            feed.wait(min(tick, left))
            feed.drain()
