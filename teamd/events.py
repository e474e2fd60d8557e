"""The team's journal: `.teams/{team}/events.jsonl` (CONTRACT.md section 7).

Append-only, one object per line with `ts`, `event` and `member` where one applies;
rotated to `events.1.jsonl` … `events.{keep}.jsonl` once it passes `events_max_bytes`.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Generator
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


def _open(path: Path) -> int | None:
    try:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None


def _successor(path: Path, old_ino: int) -> int | None:
    """Open the journal file written right after the one with inode `old_ino`, which was
    rotated away: the next newer `events.N.jsonl`, or the journal itself.

    Rotation only ever moves a file to a higher number, so a file found under the same name
    when stat-ed and when opened did not move in between: the neighbour seen is the real one.
    """
    for _ in range(100):
        chain: list[tuple[Path, int | None]] = []
        n = 0
        while n < 10_000:
            name = path if n == 0 else rotated(path, n)
            try:
                chain.append((name, name.stat().st_ino))
            except FileNotFoundError:
                if n > 0:
                    break
                chain.append((name, None))
            n += 1
        k = next((i for i, (_, ino) in enumerate(chain) if ino == old_ino), None)
        if not k:
            return _open(path)  # rotated out of events_keep: lost track, take the journal
        name, ino = chain[k - 1]
        fd = _open(name)
        if fd is not None:
            if os.fstat(fd).st_ino == ino:
                return fd
            os.close(fd)
    return _open(path)


def follow(ws: Workspace, team: str, member: str | None = None,
           poll: float = 0.2, from_start: bool = False) -> Generator[Json, None, None]:
    """Yield new events as they are appended (survives rotation). Runs until interrupted.
    With `from_start`, first every event already in the journal (no gap between the two).

    The file being read is held open: after a rotation, what was appended to it before the
    rename is read out, then each newer rotated file in turn, then the journal: none is lost.
    """
    from teamd.watch import Watcher

    path = ws.events(team)
    with Watcher([path.parent]) as watcher:
        fd = _open(path)
        offset = os.fstat(fd).st_size if fd is not None and not from_start else 0
        try:
            while True:
                # look at the name first: if it moved on, every write to the file we hold
                # happened before (rotation and appends share the lock), so reading that
                # file to its end misses nothing
                try:
                    current: int | None = path.stat().st_ino
                except FileNotFoundError:
                    current = None
                if fd is not None:
                    size = os.fstat(fd).st_size
                    if size < offset:
                        offset = 0  # truncated in place (events_keep = 0)
                    if size > offset:
                        data = os.pread(fd, size - offset, offset)
                        cut = data.rfind(b"\n") + 1  # a torn tail waits for its newline
                        offset += cut
                        for rec in files.parse_lines(data[:cut]).records:
                            if member is None or _concerns(rec, member):
                                yield rec
                if current is not None and (fd is None or os.fstat(fd).st_ino != current):
                    if fd is None:
                        fd = _open(path)
                    else:
                        old = os.fstat(fd).st_ino
                        os.close(fd)
                        fd = _successor(path, old)
                    offset = 0
                    continue
                watcher.wait(poll)
        finally:
            if fd is not None:
                os.close(fd)


def status_changed(ws: Workspace, team: str, member: str,
                   moved: tuple[str, str] | None) -> None:
    """Journal a `status` event for a (from, to) change, if there was one."""
    if moved and moved[0] != moved[1]:
        emit(ws, team, "status", member=member, **{"from": moved[0], "to": moved[1]})
