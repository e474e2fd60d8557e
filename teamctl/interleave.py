"""Several journals read as one, by time: `teamctl logs` with no team (CONTRACT §9).

Each source (a team's journal, streamed by `teamd.events.stream`) is read on a thread of
its own into a small bounded queue. While any source is still reading its history, the
oldest head is given only once every such source has one: a k-way merge whose memory is
the queues', whatever the size of the journals. Once every source has read its history
(or ended), what the followed ones append is given as it comes.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from teamd.events import ts_of
from teamd.files import Json

#: a source: given the function to call once its history is read, its records
Source = Callable[[Callable[[], None]], Iterator[Json]]
QUEUE = 256  #: records a source may read ahead of the merge

_CAUGHT_UP = object()
_ENDED = object()


class _Failed:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def interleave(sources: Mapping[str, Source]
               ) -> Iterator[tuple[str, Json | None] | None]:
    """(name, record) from every source: oldest first while reading history; then None,
    once, when every source has read its history or ended; then records as they come, and
    (name, None) when a followed source ends. Returns when every source has ended."""
    own: dict[str, queue.Queue[Any]] = {n: queue.Queue(QUEUE) for n in sources}
    live: queue.Queue[tuple[str, Any]] = queue.Queue()
    stop = threading.Event()

    def read(name: str, source: Source) -> None:
        caught_up = False

        def put(item: Any) -> None:
            if caught_up:
                live.put((name, item))
                return
            while not stop.is_set():
                try:
                    own[name].put(item, timeout=0.2)
                    return
                except queue.Full:
                    continue

        def on_caught_up() -> None:
            nonlocal caught_up
            put(_CAUGHT_UP)
            caught_up = True

        try:
            for rec in source(on_caught_up):
                if stop.is_set():
                    return
                put(rec)
            put(_ENDED)
        except BaseException as exc:  # handed to the reader, raised there
            put(_Failed(exc))

    for name, source in sources.items():
        threading.Thread(target=read, args=(name, source), daemon=True,
                         name=f"logs-{name}").start()
    try:
        yield from _merge(own, live)
    finally:
        stop.set()


def _take(item: Any) -> Any:
    if isinstance(item, _Failed):
        raise item.exc
    return item


def _merge(own: dict[str, queue.Queue[Any]], live: queue.Queue[tuple[str, Any]]
           ) -> Iterator[tuple[str, Json | None] | None]:
    reading = set(own)  # still in their history
    following = 0
    heads: dict[str, Json] = {}
    while reading:
        for name in [n for n in reading if n not in heads]:
            item = _take(own[name].get())
            if item is _CAUGHT_UP:
                reading.discard(name)
                following += 1
            elif item is _ENDED:
                reading.discard(name)
            else:
                heads[name] = item
        if reading and all(n in heads for n in reading):
            name = min(heads, key=lambda n: ts_of(heads[n]))
            yield name, heads.pop(name)
    yield None
    while following:
        name, item = live.get()
        item = _take(item)
        if item is _ENDED:
            following -= 1
            yield name, None
        else:
            yield name, item
