"""The team's journal: `.teams/{team}/events.jsonl` (CONTRACT.md section 7).

Append-only, one object per line with `ts`, `event` and `member` where one applies;
rotated to `events.1.jsonl` … `events.{keep}.jsonl` once it passes `events_max_bytes`.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from teamd import files, settings
from teamd.errors import BadInput
from teamd.files import Json
from teamd.layout import Workspace

log = logging.getLogger(__name__)


def emit(ws: Workspace, team: str, event: str, member: str | None = None,
         **fields: Any) -> Json:
    """Append one event (rotating first if the journal is too big). Returns the record."""
    record: Json = {"ts": time.time(), "event": event}
    if member is not None:
        record["member"] = member
    record.update(fields)
    emit_many(ws, team, [record])
    return record


def emit_many(ws: Workspace, team: str, records: list[Json]) -> None:
    path = ws.events(team)
    if not path.parent.is_dir():
        log.debug("team %s is gone; not journalling %d event(s)", team, len(records))
        return
    try:
        conf = settings.load(ws)
    except BadInput as exc:
        # A broken teamd.toml must not lose the journal entry of a write already made.
        log.warning("%s; rotating events with the default limits", exc)
        conf = settings.Settings()
    with files.lock(path):
        _rotate_if_needed(path, conf.events_max_bytes, conf.events_keep)
        files.append_jsonl(path, records, locked=True)


def rotated(path: Path, n: int) -> Path:
    return path.with_name(f"events.{n}.jsonl")


def _rotate_if_needed(path: Path, max_bytes: int, keep: int) -> None:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    if size < max_bytes:
        return
    if keep <= 0:
        os.truncate(path, 0)
        return
    rotated(path, keep).unlink(missing_ok=True)
    for n in range(keep - 1, 0, -1):
        if rotated(path, n).exists():
            os.replace(rotated(path, n), rotated(path, n + 1))
    os.replace(path, rotated(path, 1))
    log.info("rotated %s", path)


def read(ws: Workspace, team: str, member: str | None = None) -> list[Json]:
    """Current journal records (oldest first), optionally only those about `member`."""
    records = files.read_jsonl(ws.events(team)).records
    if member is None:
        return records
    return [r for r in records if _concerns(r, member)]


def _concerns(record: Json, member: str) -> bool:
    if record.get("member") == member:
        return True
    msg = record.get("message")
    return isinstance(msg, dict) and member in (msg.get("sender"), msg.get("recipient"))


def follow(ws: Workspace, team: str, member: str | None = None,
           poll: float = 0.2) -> Iterator[Json]:
    """Yield new events as they are appended (survives rotation). Runs until interrupted."""
    from teamd.watch import Watcher

    path = ws.events(team)
    offset = path.stat().st_size if path.exists() else 0
    inode = path.stat().st_ino if path.exists() else None
    with Watcher([path.parent]) as watcher:
        while True:
            try:
                st = path.stat()
            except FileNotFoundError:
                st = None
            if st is not None and (st.st_ino != inode or st.st_size < offset):
                inode, offset = st.st_ino, 0  # rotated or truncated: start the new file
            if st is not None and st.st_size > offset:
                with open(path, "rb") as fh:
                    fh.seek(offset)
                    data = fh.read()
                cut = data.rfind(b"\n") + 1
                offset += cut
                for rec in files.parse_lines(data[:cut]).records:
                    if member is None or _concerns(rec, member):
                        yield rec
            watcher.wait(poll)


def status_changed(ws: Workspace, team: str, member: str,
                   moved: tuple[str, str] | None) -> None:
    """Journal a `status` event for a (from, to) change, if there was one."""
    if moved and moved[0] != moved[1]:
        emit(ws, team, "status", member=member, **{"from": moved[0], "to": moved[1]})
