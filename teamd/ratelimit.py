"""The root's shared API back-off: `.teams/ratelimit.json` (CONTRACT.md section 12).

One rate limit slows the whole root together rather than N members retrying into it: a
member that gets a 429 or 529 writes until when the root should hold off, and every member
reads the file before a call and waits until then instead of sending. The document is
replaced atomically under its own lock, which is never held together with another lock.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from teamd import files
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
    path = ws.ratelimit_file
    doc: Json = {"schema": SCHEMA, "until": until, "status": status, "model": model,
                 "source": source}
    with files.lock(path):
        current = _read(path)
        if current is not None and current["until"] >= until:
            return current
        files.write_json(path, doc)
    log.info("root rate limited until %s (%s %s)", time.strftime(
        "%H:%M:%S", time.localtime(until)), status, source)
    return doc


def in_force(ws: Workspace, longest: float, now: float | None = None) -> Json | None:
    """The back-off to wait out before a call, or None. Its `until` is never more than
    `longest` seconds past the time the file was written (what a writer may choose), so a
    hand-edited or stale far-future `until` cannot stall the root for longer."""
    path = ws.ratelimit_file
    try:
        written = os.stat(path).st_mtime
    except FileNotFoundError:
        return None
    doc = _read(path)
    now = time.time() if now is None else now
    if doc is None:
        return None
    until = min(float(doc["until"]), written + longest)
    if until <= now:
        return None
    return {**doc, "until": until}


def _read(path: Path) -> Json | None:
    """The document, or None when absent or unusable (said once in the log, never fatal:
    a bad back-off file must not stop the model calls of a whole root)."""
    try:
        doc = files.read_json(path)
    except (TeamdError, OSError) as exc:
        log.warning("%s; ignoring the shared back-off", exc)
        return None
    if doc is None:
        return None
    until = doc.get("until")
    if isinstance(until, bool) or not isinstance(until, int | float) or until != until:
        log.warning("%s: no usable 'until'; ignoring the shared back-off", path)
        return None
    return doc
