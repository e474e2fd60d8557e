"""What changed, for the web view's live pages: the names of the teams whose files changed.

`changes` is the one source of "team X changed" (the integrator switches it to the store's
change feed here alone). It waits on inotify over each team's folders, as `teamctl status
--watch` does (`teamd.watch.Watcher`): idle, it blocks in the kernel and costs nothing.
`Hub` runs it on one thread for the whole server and hands each change to every open page.
"""

from __future__ import annotations

import asyncio
import logging
import select
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from teamd.layout import Workspace
from teamd.watch import Watcher

log = logging.getLogger(__name__)

SETTLE = 0.05  #: a burst of writes (a status, a task, a journal line) is one change


def _folders(ws: Workspace, team: str) -> list[Path]:
    return [ws.team_dir(team), ws.members_dir(team), ws.requests_dir(team),
            ws.sessions_dir(team), ws.tasks_dir(team)]


def changes(ws: Workspace) -> Iterator[set[str]]:
    """Each time something changes under the root's teams, the names of the teams it
    touched ("" for the list of teams itself: one created or deleted). Blocks between
    changes; lock files alone are no change."""
    with Watcher([]) as watcher:
        owner: dict[Path, str] = {}

        def watch_all() -> None:
            # a root with no team yet: its .teams/ folder is awaited in the root itself
            first = ws.root if not ws.teams_dir.is_dir() else ws.teams_dir
            if first not in owner:
                watcher.add(first)
                owner[first] = ""
            if first == ws.teams_dir and ws.root in owner:
                watcher.remove(ws.root)
                del owner[ws.root]
            for team in ws.team_names():
                for folder in _folders(ws, team):
                    if folder.is_dir() and folder not in owner:
                        watcher.add(folder)
                        owner[folder] = team

        watch_all()
        while True:
            if watcher.polling:
                watcher.wait(None)
            else:  # not Watcher.wait: it would take the events drain_events reads below
                select.select([watcher.fileno()], [], [])
            time.sleep(SETTLE)
            found, overflow = watcher.drain_events()
            teams = {owner.get(folder, "") if folder else "" for folder, name in found
                     if not name.endswith(".lock")}
            if overflow:
                teams |= {"", *ws.team_names()}
            if not found and not overflow and not watcher.polling:
                continue
            for folder in [f for f in owner if not f.is_dir()]:
                watcher.remove(folder)
                del owner[folder]
            watch_all()  # a team made, or a folder it made later (requests/, sessions/)
            if watcher.polling:
                teams = {"", *ws.team_names()}
            if teams:
                yield teams


class Hub:
    """One thread reading `changes`, telling every subscribed page's queue."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.queues: set[tuple[asyncio.AbstractEventLoop, asyncio.Queue[set[str]]]] = set()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None

    def subscribe(self) -> asyncio.Queue[set[str]]:
        queue: asyncio.Queue[set[str]] = asyncio.Queue()
        with self.lock:
            self.queues.add((asyncio.get_running_loop(), queue))
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="web-live", daemon=True)
                self.thread.start()
        return queue

    def unsubscribe(self, queue: asyncio.Queue[set[str]]) -> None:
        with self.lock:
            self.queues = {(loop, q) for loop, q in self.queues if q is not queue}

    def _run(self) -> None:
        try:
            for teams in changes(self.ws):
                with self.lock:
                    targets = list(self.queues)
                for loop, queue in targets:
                    loop.call_soon_threadsafe(queue.put_nowait, teams)
        except Exception:  # the page falls back to what it shows; say why, once
            log.exception("the live feed stopped")
