"""Locks, atomic JSON replace, and JSONL append, read and drain.

Every write the contract cares about goes through here:
- a JSON document is written to a temp file in the same folder, fsynced, then `os.replace`d;
- a JSONL record is one complete line written by a single `write` under the file's lock;
- a reader ignores a torn final line; a locked writer or drainer moves it (and any bad line)
  aside to `*.rejected.jsonl` so nothing glues onto it and nobody crashes on it;
- a reader holds at most `MAX_LINE` bytes of any one line (a longer line is refused unread:
  the bounded scan is `teamd.linescan`'s);
- a write that fails (no space, quota, `EFBIG`, I/O error) leaves the file as it found it
  and raises an `OSError` that names the file.
Folders are `0700` and files `0600` whatever the umask.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import secrets
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import filelock

from teamd import crashpoints
from teamd.errors import TeamdError
from teamd.linescan import Judge, RawLine, Sorted, sort_lines

log = logging.getLogger(__name__)

DIR_MODE = 0o700
FILE_MODE = 0o600
# filelock retries a non-blocking flock at this interval while another process holds it;
# its 50 ms default would put a 50 ms floor under every contended send or drain.
LOCK_POLL = 0.001

Json = dict[str, Any]

#: errors that mean "no room to write" (a full disk, a quota, a file-size limit): a start or
#: a write that fails with one is retried later, never counted as a crash (CONTRACT §3, §4)
SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def out_of_space(exc: BaseException) -> bool:
    """True for a write refused for want of space (ENOSPC, EDQUOT, EFBIG)."""
    return isinstance(exc, OSError) and exc.errno in SPACE_ERRNOS


def _failed(path: Path, exc: OSError) -> OSError:
    """`exc` as an error naming `path` (`os.write` names no file), for a write undone."""
    return OSError(exc.errno, f"{exc.strerror or exc} (nothing was written)", str(path))


# -- folders and locks -------------------------------------------------------------------
def ensure_dir(path: Path) -> Path:
    """Create `path` (and parents) as 0700, whatever the umask."""
    if not path.is_dir():
        path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        os.chmod(path, DIR_MODE)
    return path


def lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def lock(path: Path, timeout: float = -1) -> filelock.FileLock:
    """The cross-process lock guarding `path` (a `*.lock` file beside it, kept on release).

    A fresh object per use: flock belongs to an open file description, so objects must not
    be shared across a fork; the kernel drops the lock if the holder dies. The folder
    must exist: filelock would create it, and no write may create a team folder.
    """
    if not path.parent.is_dir():
        raise TeamdError(f"{path.parent} does not exist")
    return filelock.FileLock(
        str(lock_path(path)),
        timeout=timeout,
        mode=FILE_MODE,
        poll_interval=LOCK_POLL,
        preserve_lock_file=True,
    )


@contextmanager
def lock_existing(path: Path) -> Iterator[bool]:
    """Hold the lock of `path` through its lock file if that exists (yields True), opening
    it without O_CREAT: `filelock` makes a missing folder again, so a lock taken just as a
    team folder is renamed away (a delete) would bring the folder back. Yields False,
    holding nothing, when there is no lock file (the caller decides: `lock` creates one).
    Interoperates with `lock` (both are flock on the same file)."""
    try:
        fd = os.open(lock_path(path), os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        yield False
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield True
    finally:
        os.close(fd)  # releases the flock


def _open_new(path: Path, flags: int) -> int:
    fd = os.open(path, flags | os.O_CLOEXEC, FILE_MODE)
    os.fchmod(fd, FILE_MODE)  # the umask may have taken bits we need, or left some we don't
    return fd


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


# -- JSON documents ----------------------------------------------------------------------
def dumps_doc(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode()


def atomic_write_bytes(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace `path` atomically: temp file in the same folder, fsync, os.replace."""
    _atomic_write(path, [data], durable=durable)


def _atomic_write(path: Path, chunks: Iterable[bytes], *, durable: bool = True) -> None:
    """`atomic_write_bytes` of data written piece by piece (never all in memory at once).
    A failure leaves `path` as it was, no temp file, and an OSError naming `path`."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        fd = _open_new(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except OSError as exc:
        raise _failed(path, exc) from exc
    try:
        for data in chunks:
            _write_all(fd, data)
        if durable:
            os.fsync(fd)
    except BaseException as exc:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise _failed(path, exc) from exc
        raise
    os.close(fd)
    crashpoints.before("replace", path)
    try:
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise _failed(path, exc) from exc
    if durable:
        fsync_dir(path.parent)
    crashpoints.after("replace", path)


def write_json(path: Path, obj: Mapping[str, Any], *, durable: bool = True) -> None:
    atomic_write_bytes(path, dumps_doc(obj), durable=durable)


def inode(path: Path) -> int | None:
    """The inode `path` names now, None when there is nothing there: a follower compares
    it with the file it holds open to notice a rotation or a replacement."""
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return None


def read_json(path: Path) -> Json | None:
    """The document at `path`, or None if there is none. Atomic replace means never torn."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        obj = json.loads(data)
    except ValueError as exc:
        raise TeamdError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise TeamdError(f"{path}: expected a JSON object")
    return obj


# -- JSONL -------------------------------------------------------------------------------
def dumps_line(record: Mapping[str, Any]) -> bytes:
    line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    return line.encode() + b"\n"


def rejected_path(path: Path) -> Path:
    """`x.jsonl` → `x.rejected.jsonl`."""
    stem = path.name[: -len(".jsonl")] if path.name.endswith(".jsonl") else path.name
    return path.with_name(f"{stem}.rejected.jsonl")


@dataclass
class Lines:
    """What a JSONL read found: good records, bad raw lines, and a torn tail if any."""

    records: list[Json] = field(default_factory=list)
    bad: list[bytes] = field(default_factory=list)
    torn: bytes = b""
    size: int = 0

    @property
    def clean(self) -> bool:
        return not self.bad and not self.torn


def parse_lines(data: bytes, valid: Callable[[Json], bool] | None = None) -> Lines:
    """Split JSONL: objects (that pass `valid`, if given) are records; the rest are bad."""
    out = Lines(size=len(data))
    body, _, tail = data.rpartition(b"\n")
    if tail:
        out.torn = tail
    if not body and not _:
        return out
    for raw in body.split(b"\n"):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            out.bad.append(raw)
            continue
        if isinstance(obj, dict) and (valid is None or valid(obj)):
            out.records.append(obj)
        else:
            out.bad.append(raw)
    return out


def read_jsonl(path: Path, valid: Callable[[Json], bool] | None = None) -> Lines:
    """Read without the lock: good records only; bad lines and a torn tail are reported."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return Lines()
    found = parse_lines(data, valid)
    if found.bad:
        log.warning("%s: skipping %d bad line(s)", path, len(found.bad))
    return found


# -- rejected lines ----------------------------------------------------------------------
def rejection(line: RawLine | bytes, reason: str, line_id: str | None = None) -> Json:
    """The `*.rejected.jsonl` record of a refused line (only the head of an over-long one,
    with its real size)."""
    raw = line if isinstance(line, bytes) else line.data
    record: Json = {"rejected_at": time.time(), "reason": reason,
                    "line": raw.decode("utf-8", "backslashreplace")}
    if line_id is not None:
        record["id"] = line_id
    if isinstance(line, RawLine) and line.long:
        record.update(bytes=line.length, cut=True)
    return record


def _append_rejected(path: Path, records: list[Json]) -> None:
    """Append to `path`'s `*.rejected.jsonl`. The caller holds `path`'s lock, which guards
    its rejected file too (only `path`'s lock holders write there)."""
    if not records:
        return
    target = rejected_path(path)
    log.warning("%s: moved %d line(s) to %s (%s)", path, len(records), target.name,
                ", ".join(sorted({str(r["reason"]) for r in records})))
    try:
        fd = _open_new(target, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    except OSError as exc:
        raise _failed(target, exc) from exc
    try:
        _append_fd(target, fd, b"".join(dumps_line(r) for r in records), durable=False)
    finally:
        os.close(fd)


def _reject(path: Path, raws: Iterable[bytes], why: str) -> None:
    """Append raw lines to `*.rejected.jsonl`. Caller holds `path`'s lock."""
    _append_rejected(path, [rejection(raw, why) for raw in raws])


def _append_fd(path: Path, fd: int, data: bytes, *, durable: bool) -> None:
    """Write `data` at the end of `fd` (opened O_APPEND, lock held). If any of it fails,
    cut the file back to the size it had, so no partial line is left (CONTRACT §3)."""
    size = os.fstat(fd).st_size
    crashpoints.before("append", path)
    try:
        _write_all(fd, data)
        if durable:
            os.fsync(fd)
    except OSError as exc:
        try:
            os.ftruncate(fd, size)
        except OSError as cut:  # pragma: no cover - the file system refuses even that
            log.error("%s: cannot cut a failed append back to %d bytes: %s", path, size, cut)
        raise _failed(path, exc) from exc
    crashpoints.after("append", path)


def _cut_torn_tail(path: Path, fd: int) -> None:
    """If the file does not end in a newline, move the partial line aside and truncate.

    Caller holds the lock, so a tail without a newline is a writer that died mid-write.
    """
    size = os.fstat(fd).st_size
    if size == 0:
        return
    if os.pread(fd, 1, size - 1) == b"\n":
        return
    # Walk back 1 MiB at a time to the last newline: a torn line can be longer than one chunk
    # (256 KiB of content JSON-escaped), and keeping any part of it would glue the next record.
    keep, end = 0, size
    while end > 0:
        start = max(0, end - (1 << 20))
        cut = os.pread(fd, end - start, start).rfind(b"\n")
        if cut >= 0:
            keep = start + cut + 1
            break
        end = start
    _reject(path, [os.pread(fd, size - keep, keep)], "torn")
    os.ftruncate(fd, keep)


def append_jsonl(path: Path, records: Iterable[Mapping[str, Any]], *, durable: bool = False,
                 locked: bool = False) -> None:
    """Append records as complete lines with one `write` under `path`'s lock.

    The folder must exist: appending never creates a team folder. `locked=True` when the
    caller already holds the lock. A failed write is undone (the file is cut back to the
    size it had) and raised as an OSError naming `path`.
    """
    data = b"".join(dumps_line(r) for r in records)
    if not data:
        return
    with _maybe_lock(path, locked):
        try:
            fd = _open_new(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        except OSError as exc:
            raise _failed(path, exc) from exc
        try:
            _cut_torn_tail(path, fd)
            _append_fd(path, fd, data, durable=durable)
        finally:
            os.close(fd)


@contextmanager
def _maybe_lock(path: Path, already: bool) -> Iterator[None]:
    if already:
        yield
    else:
        with lock(path):
            yield


def drain_lines(path: Path, consume: Callable[[list[Json]], None], judge: Judge,
                take: Callable[[Json], bool] | None = None) -> Sorted:
    """Take records out of `path` without losing one.

    Under the lock: read line by line (bounded, see `scan_lines`); hand the records `judge`
    accepts and `take` takes (all, without `take`) to `consume`, which must record them
    durably; move refused lines and a torn tail to `*.rejected.jsonl`; then cut the file in
    place, or, when records are left for later, replace it with those alone (temp file,
    fsync, os.replace). If `consume` raises, the file is untouched.
    """
    with lock(path):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            return Sorted()
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                return Sorted()
            found = sort_lines(fd, size, judge, take)
            if found.taken:
                consume(found.taken)
            # aside before the cut: a refused line is never only in memory
            _append_rejected(path, [rejection(line, r.reason, r.id)
                                    for r, line in found.refused])
            if found.left:
                _atomic_write(path, _copy_lines(fd, found.left))
                found.kept = sum(line.end - line.start for line in found.left)
            else:
                crashpoints.before("cut", path)
                os.ftruncate(fd, 0)
                os.fsync(fd)
                crashpoints.after("cut", path)
        finally:
            os.close(fd)
    return found


def _copy_lines(fd: int, lines: list[RawLine]) -> Iterator[bytes]:
    """The bytes of `lines` (each at most MAX_LINE and its newline) read back from `fd`."""
    for line in lines:
        yield os.pread(fd, line.end - line.start, line.start)


def rewrite_jsonl(path: Path, keep: Callable[[Json], bool] | None = None) -> Lines:
    """Under the lock, move bad lines and a torn tail aside (and drop records `keep` refuses)."""
    with lock(path):
        found = read_jsonl(path)
        kept = [r for r in found.records if keep is None or keep(r)]
        if found.clean and len(kept) == len(found.records):
            return found
        _reject(path, found.bad, "bad")
        if found.torn:
            _reject(path, [found.torn], "torn")
        atomic_write_bytes(path, b"".join(dumps_line(r) for r in kept))
        return Lines(records=kept)
