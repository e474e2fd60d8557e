"""`max_concurrent_calls`: at most N model calls in flight across the root (CONTRACT.md
section 12).

A member takes one of N slot locks, `.teams/.calls/{i}.lock`, for the length of one call.
They are flocks (through filelock, files 0600): a member that dies mid-call, even by
`kill -9`, frees its slot with its last descriptor. A slot is never held together with
another lock (the caller writes the roster before taking one and after releasing it).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

import filelock

from teamd import files
from teamd.layout import Workspace

log = logging.getLogger(__name__)

#: how long a member that found every slot taken waits on one of them before trying all
#: again: one flock cannot wait on "any of N", so the wait moves round the slots
SWEEP = 0.1


def take(ws: Workspace, limit: int, between: Callable[[], None] | None = None
         ) -> filelock.FileLock:
    """Block until one of `limit` slots is ours; return its (held) lock. `between` runs
    each time every slot was found taken (e.g. to answer a shutdown request meanwhile)."""
    folder = files.ensure_dir(ws.calls_dir)
    # members start their sweep at different slots, so they do not all queue on slot 0
    order = [(os.getpid() + i) % limit for i in range(limit)]
    waited = False
    while True:
        for index in order:
            slot = files.lock(folder / str(index), timeout=0)
            try:
                slot.acquire()
            except filelock.Timeout:
                continue
            if waited:
                log.debug("took call slot %d after waiting", index)
            return slot
        if not waited:
            log.info("all %d call slots are taken (max_concurrent_calls): waiting", limit)
            waited = True
        if between is not None:
            between()
        slot = files.lock(folder / str(order[0]), timeout=SWEEP)
        try:
            slot.acquire()
            return slot
        except filelock.Timeout:
            order = order[1:] + order[:1]
