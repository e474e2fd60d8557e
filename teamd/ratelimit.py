"""The root's shared API back-off (CONTRACT.md section 12; the files' `.teams/ratelimit.json`).

One rate limit slows the whole root together rather than N members retrying into it: a
member that gets a 429 or 529 records until when the root should hold off, and every member
reads the record before a call and waits until then instead of sending. The record is
replaced as one step of the store (`update_backoff`), never inside another unit.
"""

from __future__ import annotations

import logging
import time

from teamd.errors import TeamdError
from teamd.files import Json
from teamd.layout import Workspace

log = logging.getLogger(__name__)

SCHEMA = 1
SOURCES = ("retry-after", "headers", "backoff")


def record(ws: Workspace, *, until: float, status: int | None, model: str,
           source: str) -> Json:
    """Hold the root off until `until` (epoch). A later `until` already in force is kept:
    two members limited at once must not shorten each other's wait. Returns what is now
    in force."""
    if source not in SOURCES:
        raise ValueError(f"unknown rate-limit source {source!r}")
    doc: Json = {"schema": SCHEMA, "until": until, "status": status, "model": model,
                 "source": source}
    now_in_force = doc

    def change(current: Json | None) -> Json | None:
        nonlocal now_in_force
        current = _usable(current)
        if current is not None and current["until"] >= until:
            now_in_force = current
            return None
        return doc

    ws.store.update_backoff(change)
    if now_in_force is not doc:
        return now_in_force
    log.info("root rate limited until %s (%s %s)", time.strftime(
        "%H:%M:%S", time.localtime(until)), status, source)
    return doc


def in_force(ws: Workspace, longest: float, now: float | None = None) -> Json | None:
    """The back-off to wait out before a call, or None. Its `until` is never more than
    `longest` seconds past the time it was written (what a writer may choose), so a
    hand-edited or stale far-future `until` cannot stall the root for longer."""
    try:
        found = ws.store.read_backoff()
    except (TeamdError, OSError) as exc:
        log.warning("%s; ignoring the shared back-off", exc)
        return None
    doc, written = (None, 0.0) if found is None else (_usable(found[0]), found[1])
    if doc is None:
        return None
    now = time.time() if now is None else now
    until = min(float(doc["until"]), written + longest)
    if until <= now:
        return None
    return {**doc, "until": until}


def _usable(doc: Json | None) -> Json | None:
    """The document, or None when absent or unusable (said in the log, never fatal: a bad
    back-off record must not stop the model calls of a whole root)."""
    if doc is None:
        return None
    until = doc.get("until")
    if isinstance(until, bool) or not isinstance(until, int | float) or until != until:
        log.warning("the shared back-off has no usable 'until' (%r); ignoring it", until)
        return None
    return doc
