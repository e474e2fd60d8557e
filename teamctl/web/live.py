"""What changed, for the web view's live pages: the names of the teams whose files changed.

`changes` is the one source of "team X changed": the store's change feed (the same wake-ups
`teamd` uses: inotify in the files store), read by one thread; idle, it blocks in the
kernel and costs nothing.
`Hub` runs it on one thread for the whole server and hands each change to every open page.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator

from teamd.layout import Workspace
from teamd.store.changes import Kind

log = logging.getLogger(__name__)

SETTLE = 0.05  #: a burst of writes (a status, a task, a journal line) is one change


def changes(ws: Workspace) -> Iterator[set[str]]:
    """Each time something changes under the root's teams, the names of the teams it
    touched ("" for the list of teams itself: one created or deleted). Blocks between
    changes, on the store's change feed (the files store: inotify)."""
    with ws.store.changes(None) as feed:  # every team, and teams coming and going
        while True:
            if not feed.wait(None) and not feed.polling:
                continue
            time.sleep(SETTLE)
            found, lost = feed.drain()
            teams = {change.team for change in found}
            if any(change.kind is Kind.TEAM for change in found):
                teams.add("")
            if lost or feed.polling:  # nothing is known of what changed: everything did
                teams |= {"", *ws.store.team_names()}
            if teams:
                yield teams


class Hub:
    """One thread reading `changes`, telling every subscribed page's queue."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.queues: set[tuple[asyncio.AbstractEventLoop, asyncio.Queue[set[str] | None]]] = set()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None

    def subscribe(self) -> asyncio.Queue[set[str] | None]:
        queue: asyncio.Queue[set[str] | None] = asyncio.Queue()
        with self.lock:
            self.queues.add((asyncio.get_running_loop(), queue))
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="web-live", daemon=True)
                self.thread.start()
        return queue

    def unsubscribe(self, queue: asyncio.Queue[set[str] | None]) -> None:
        with self.lock:
            self.queues = {(loop, q) for loop, q in self.queues if q is not queue}

    def _run(self) -> None:
        try:
            for teams in changes(self.ws):
                with self.lock:
                    targets = list(self.queues)
                for loop, queue in targets:
                    loop.call_soon_threadsafe(queue.put_nowait, teams)
        except Exception:  # say why; end every open stream, so each page reconnects
            log.exception("the live feed stopped; starting it again for the next page")
            with self.lock:
                targets, self.queues, self.thread = list(self.queues), set(), None
            for loop, queue in targets:
                loop.call_soon_threadsafe(queue.put_nowait, None)
