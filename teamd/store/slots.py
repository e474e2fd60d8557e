"""How any store takes one of N call slots (CONTRACT §12 `max_concurrent_calls`): try
every slot; when all are taken, say so once, run the caller's `between`, wait a while on
one of them, then try them all again starting at the next. One lock cannot wait on "any
of N", so this sweep is the wait; what a slot's lock is, is the store's."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

log = logging.getLogger(__name__)

#: how long a caller that found every slot taken waits on one of them before trying all
SWEEP = 0.1

H = TypeVar("H")


def sweep(order: list[int], take: Callable[[int, float], H | None],
          between: Callable[[], None] | None) -> tuple[H, int]:
    """The first slot of `order` that `take(index, wait)` gets (wait 0: only try), and
    its index."""
    waited = False
    while True:
        for index in order:
            got = take(index, 0)
            if got is not None:
                if waited:
                    log.debug("took call slot %d after waiting", index)
                return got, index
        if not waited:
            log.info("all %d call slots are taken (max_concurrent_calls): waiting", len(order))
            waited = True
        if between is not None:
            between()
        got = take(order[0], SWEEP)
        if got is not None:
            return got, order[0]
        order = order[1:] + order[:1]
