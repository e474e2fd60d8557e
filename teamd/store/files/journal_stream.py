"""Reading the journal files as a stream: from either end, across rotated files, and
following new lines (`logs -f`) with the descriptors held open, so a rotation between two
reads loses nothing. Memory stays flat whatever the journal's size.

The files store's `stream_journal` (teamd.store.files.journal) is the only user; which
records are wanted (by member, by time) is the caller's `match`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Generator
from pathlib import Path

from teamd import files
from teamd.files import Json


def rotated(path: Path, n: int) -> Path:
    return path.with_name(f"events.{n}.jsonl")


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
                 history: bool) -> tuple[int, int]:
    """(file index, offset) where showing starts: after the last `last` events that match
    (read backwards), at the start, or (no history) at the end. A line `match` refuses only
    is not counted (a time filter is no end: a clock may have stepped back)."""
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
                if match(rec):
                    found += 1
                    where = (i, start)
                    if found >= last:
                        return where
        return 0, 0
    if not history:
        return len(fds) - 1, _complete_end(fds[-1])
    return 0, 0


def stream(path: Path, *, match: Callable[[Json], bool] | None = None,
           last: int | None = None, follow: bool = False,
           history: bool = True, poll: float = 0.5,
           stop_at_deletion: bool = True,
           on_bad: Callable[[bytes], None] | None = None,
           on_caught_up: Callable[[], None] | None = None) -> Generator[Json, None, None]:
    """The journal at `path` (and its rotated files, oldest first) as it is read: memory
    stays flat whatever its size.

    `match` filters; `last` starts after the last N events that pass the filters (read
    backwards from the end); without `history` (and without
    `last`) it starts at the end. With `follow` it then waits for new events, across
    rotations; with `stop_at_deletion` it ends after `team_deleted`, or once the team's
    folder is gone (what was written to the file it holds is read out first).
    `on_bad` is called with each line read in passing that is not a JSON object (garbage a
    person or a broken disk put there): it is skipped, and the caller can say so.
    `on_caught_up` is called once the history is read, before following.
    """
    wanted = match or (lambda _r: True)
    fds = open_journal(path)
    try:
        index, offset = _start_point(fds, wanted, last, history)
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
