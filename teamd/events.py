"""The team's journal: `.teams/{team}/events.jsonl` (CONTRACT.md section 7).

Append-only, one object per line with `ts`, `event` and `member` where one applies;
rotated to `events.1.jsonl` … `events.{keep}.jsonl` once it passes `events_max_bytes`.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import Any

from teamd import files, removals, settings
from teamd.errors import BadInput, TeamdError
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


#: the settings in force of a process that holds them (teamd, a teammate), by settings file:
#: its journal writes rotate by these instead of reading teamd.toml again for each event
_in_force: dict[Path, settings.Settings] = {}


def use_settings(ws: Workspace, conf: settings.Settings) -> None:
    """Rotate this process's journal writes under `ws` by `conf` from now on: for the
    supervisor and a teammate, which read teamd.toml themselves (at start, on SIGHUP, before
    a model call). A process that never calls this (teamctl) reads teamd.toml at each write."""
    _in_force[ws.settings_file] = conf


def _settings(ws: Workspace) -> settings.Settings:
    conf = _in_force.get(ws.settings_file)
    if conf is not None:
        return conf
    try:
        return settings.load(ws)
    except BadInput as exc:
        # A broken teamd.toml must not lose the journal entry of a write already made.
        log.warning("%s; rotating events with the default limits", exc)
        return settings.Settings()


def emit_many(ws: Workspace, team: str, records: list[Json]) -> None:
    path = ws.events(team)
    if not path.parent.is_dir():
        log.debug("team %s is gone; not journalling %d event(s)", team, len(records))
        return
    conf = _settings(ws)
    try:
        with files.lock(path):
            _rotate_if_needed(path, conf.events_max_bytes, conf.events_keep)
            files.append_jsonl(path, records, locked=True)
    except (FileNotFoundError, TeamdError):
        if path.parent.is_dir():
            raise
        # the team was removed between the check and the write (its deletion raced us)
        log.debug("team %s is gone; not journalling %d event(s)", team, len(records))


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
    removals.remove_file(rotated(path, keep))
    for n in range(keep - 1, 0, -1):
        if rotated(path, n).exists():
            removals.rename(rotated(path, n), rotated(path, n + 1))
    removals.rename(path, rotated(path, 1))
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


def concerns(record: Json, names: Sequence[str]) -> bool:
    """Is the record about one of `names` (as the member, or a message's sender or
    recipient)? Every record is, when `names` is empty."""
    return not names or any(_concerns(record, n) for n in names)


def is_chatter(record: Json) -> bool:
    """Routine records `teamctl logs` shows only with -v: model calls, idle notices."""
    if record.get("event") == "model_call":
        return True
    msg = record.get("message")
    return record.get("event") == "message" and isinstance(msg, dict) \
        and msg.get("type") == "idle_notification"


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
    With `from_start`, first every event already in the journal (no gap between the two)."""
    yield from stream(ws.events(team), match=None if member is None else
                      (lambda r: _concerns(r, member)),
                      last=None, follow=True, history=from_start, poll=poll,
                      stop_at_deletion=False)


# -- reading: streamed, from either end, across rotated files -----------------------------
#: a journal line longer than this is skipped by readers (a writer never makes one: a
#: message's content is capped at 256 KiB); it keeps a reader's memory bounded
MAX_LINE = 4 << 20
BLOCK = 1 << 16


def _lines_forward(fd: int, start: int) -> Generator[tuple[int, bytes], None, int]:
    """Complete lines from `start` to the current end of the file, each with the offset just
    after it. Returns the offset where an unfinished (torn) tail begins."""
    pos, buf, skipping = start, b"", False
    while True:
        chunk = os.pread(fd, BLOCK, pos + len(buf))
        if not chunk:
            return pos
        buf += chunk
        while True:
            cut = buf.find(b"\n")
            if cut < 0:
                break
            line, buf = buf[:cut], buf[cut + 1:]
            pos += cut + 1
            if skipping:
                skipping = False  # the end of an oversize line
                continue
            yield pos, line
        if len(buf) > MAX_LINE:
            pos += len(buf)
            buf, skipping = b"", True


def _lines_backward(fd: int, end: int) -> Generator[tuple[int, bytes], None, None]:
    """Complete lines before `end` (which follows a newline), newest first, each with the
    offset where it starts. Reads BLOCK bytes at a time: memory does not grow with the file."""
    pos, frag, skipping = end, b"", False
    while pos > 0:
        size = min(BLOCK, pos)
        pos -= size
        chunk = os.pread(fd, size, pos)
        if skipping:
            cut = chunk.rfind(b"\n")
            if cut < 0:
                continue  # still inside the oversize line
            chunk, skipping = chunk[:cut + 1], False
        data = chunk + frag
        parts = data.split(b"\n")  # data ends with a newline: parts[-1] is empty
        cur = pos + len(data)
        for i in range(len(parts) - 2, 0, -1):
            cur -= len(parts[i]) + 1
            yield cur, parts[i]
        head = parts[0]
        if pos == 0:
            if head:
                yield 0, head
        elif len(head) > MAX_LINE:
            frag, skipping = b"", True
        else:
            frag = head + b"\n"


def _parse(line: bytes) -> Json | None:
    if not line.strip():
        return None
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    return rec if isinstance(rec, dict) else None


def _complete_end(fd: int) -> int:
    """The offset just after the file's last newline (a torn tail is not read)."""
    size = os.fstat(fd).st_size
    while size > 0:
        start = max(0, size - BLOCK)
        cut = os.pread(fd, size - start, start).rfind(b"\n")
        if cut >= 0:
            return start + cut + 1
        size = start
    return 0


def open_journal(path: Path) -> list[int]:
    """Descriptors of the journal at `path` and its rotated files, oldest first.

    Opened newest first and kept by inode: rotation only moves a file to a higher number, so
    one that moves while we look is met again under its new name (and skipped), never missed.
    """
    fds: list[int] = []
    seen: set[int] = set()
    n = 0
    while True:
        fd = _open(path if n == 0 else rotated(path, n))
        if fd is None:
            if n > 0:
                break
        else:
            ino = os.fstat(fd).st_ino
            if ino in seen:
                os.close(fd)
            else:
                seen.add(ino)
                fds.append(fd)
        n += 1
    fds.reverse()
    return fds


def _start_point(fds: list[int], match: Callable[[Json], bool], last: int | None,
                 since: float | None, history: bool) -> tuple[int, int]:
    """(file index, offset) where showing starts: after the last `last` events that match
    and are not older than `since` (read backwards), at the start, or (no history) at the
    end. `since` only filters: a line out of time order never hides the lines after it."""
    if not fds:
        return 0, 0
    if last is not None:
        found, where = 0, (len(fds) - 1, _complete_end(fds[-1]))
        if last <= 0:
            return where
        for i in range(len(fds) - 1, -1, -1):
            for start, line in _lines_backward(fds[i], _complete_end(fds[i])):
                rec = _parse(line)
                if rec is None:
                    continue
                if since is not None and ts_of(rec) < since:
                    continue  # filtered, not an end: a clock may have stepped back
                if match(rec):
                    found += 1
                    where = (i, start)
                    if found >= last:
                        return where
        return 0, 0
    if not history:
        return len(fds) - 1, _complete_end(fds[-1])
    return 0, 0


def ts_of(rec: Json) -> float:
    """A record's `ts` (0 when it has none)."""
    ts = rec.get("ts")
    return float(ts) if isinstance(ts, int | float) else 0.0


def stream(path: Path, *, match: Callable[[Json], bool] | None = None,
           last: int | None = None, since: float | None = None, follow: bool = False,
           history: bool = True, poll: float = 0.5,
           stop_at_deletion: bool = True,
           on_bad: Callable[[bytes], None] | None = None,
           on_caught_up: Callable[[], None] | None = None) -> Generator[Json, None, None]:
    """The journal at `path` (and its rotated files, oldest first) as it is read: memory
    stays flat whatever its size.

    `match` filters; `last` starts after the last N events that pass the filters (read
    backwards from the end); `since` drops older events; without `history` (and without
    `last`) it starts at the end. With `follow` it then waits for new events, across
    rotations; with `stop_at_deletion` it ends after `team_deleted`, or once the team's
    folder is gone (what was written to the file it holds is read out first).
    `on_bad` is called with each line read in passing that is not a JSON object (garbage a
    person or a broken disk put there): it is skipped, and the caller can say so.
    `on_caught_up` is called once the history is read, before following.
    """
    keep = match or (lambda _r: True)

    def wanted(rec: Json) -> bool:
        return (since is None or ts_of(rec) >= since) and keep(rec)

    fds = open_journal(path)
    try:
        index, offset = _start_point(fds, keep, last, since, history)
        for i in range(index, len(fds)):
            end = yield from _read_from(fds[i], offset if i == index else 0, wanted, on_bad)
            if end is None:
                return
            offset = end
        if not follow:
            return
        if on_caught_up is not None:
            on_caught_up()
        fd = fds.pop() if fds else None  # the newest: _follow goes on with it, and closes it
        yield from _follow(path, fd, offset if fd is not None else 0, wanted, poll,
                           stop_at_deletion, on_bad)
    finally:
        for fd in fds:
            os.close(fd)


def _read_from(fd: int, start: int, wanted: Callable[[Json], bool],
               on_bad: Callable[[bytes], None] | None = None
               ) -> Generator[Json, None, int | None]:
    """Yield wanted records from `start` to the end; the offset reached, or None after a
    `team_deleted` (nothing of the team follows it)."""
    lines = _lines_forward(fd, start)
    while True:
        try:
            _, line = next(lines)
        except StopIteration as stop:
            return int(stop.value)
        rec = _parse(line)
        if rec is None:
            if on_bad is not None and line.strip():
                on_bad(line)
            continue
        if wanted(rec):
            yield rec
        if rec.get("event") == "team_deleted":
            return None


def _follow(path: Path, fd: int | None, offset: int, wanted: Callable[[Json], bool],
            poll: float, stop_at_deletion: bool,
            on_bad: Callable[[bytes], None] | None = None) -> Generator[Json, None, None]:
    """Go on from `offset` in `fd` (the newest journal file when it was opened).

    The file being read is held open: after a rotation, what was appended to it before the
    rename is read out, then each newer rotated file in turn, then the journal: none is lost.
    """
    from teamd.watch import Watcher

    with Watcher([path.parent]) as watcher:
        try:
            while True:
                # look at the name first: if it moved on, every write to the file we hold
                # happened before (rotation and appends share the lock), so reading that
                # file to its end misses nothing
                current = files.inode(path)
                if fd is not None:
                    if os.fstat(fd).st_size < offset:
                        offset = 0  # truncated in place (events_keep = 0)
                    end = yield from _read_from(fd, offset, wanted, on_bad)
                    if end is None and stop_at_deletion:
                        return
                    offset = end if end is not None else os.fstat(fd).st_size
                if current is None and stop_at_deletion and not path.parent.is_dir():
                    return  # the team is gone (and what was written to `fd` was read)
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
