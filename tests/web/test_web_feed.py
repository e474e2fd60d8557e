"""`teamctl.web.live.changes`, the one source of "team X changed" (no browser): a root
with no team yet, a team created, a task added, a lock file taken alone (no change); on
real inotify, with a real thread reading the feed."""

from __future__ import annotations

import queue
import threading

from filelock import FileLock

from teamctl.web.live import changes
from teamd import actions, board
from teamd.layout import Workspace
from tests.harness import wait_until


def test_changes_names_the_teams_that_changed(ws: Workspace) -> None:
    seen: queue.Queue[set[str]] = queue.Queue()
    ready = threading.Event()

    def feed() -> None:
        feeder = changes(ws)
        ready.set()
        for teams in feeder:
            seen.put(teams)

    threading.Thread(target=feed, daemon=True).start()
    assert ready.wait(10)
    next_change = lambda: seen.get(timeout=10)  # noqa: E731

    warm = iter(range(1000))

    def poked() -> bool:  # the feed is armed on the generator's first step
        actions.create_team(ws, f"warm{next(warm)}")  # the first: .teams/ did not exist
        return not seen.empty()

    wait_until(poked, 10, "the feed to see a team made in a bare root", interval=0.05)
    while not seen.empty():
        seen.get()
    actions.create_team(ws, "shop")
    assert "" in next_change()
    board.create(ws, "shop", "a task")
    wait_until(lambda: "shop" in next_change(), 10, "the task seen as a change of shop")
    actions.create_team(ws, "other")
    wait_until(lambda: "" in next_change(), 10, "the new team seen")
    with FileLock(str(ws.store.paths.team_dir("shop") / "alone.lock"), mode=0o600):
        pass  # a lock taken and let go in shop: no change of shop
    board.create(ws, "other", "a task there")
    got = [next_change()]
    while "other" not in got[-1]:  # each wait ends within 10 s (queue.Empty)
        got.append(next_change())
    assert not any("shop" in teams for teams in got), got
