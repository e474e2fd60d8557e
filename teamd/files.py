"""Locks, atomic JSON replace, and JSONL append, read and drain.

Every write the contract cares about goes through here:
- a JSON document is written to a temp file in the same folder, fsynced, then `os.replace`d;
- a JSONL record is one complete line written by a single `write` under the file's lock;
- a reader ignores a torn final line; a locked writer or drainer moves it (and any bad line)
  aside to `*.rejected.jsonl` so nothing glues onto it and nobody crashes on it.
Folders are `0700` and files `0600` whatever the umask.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import filelock

from teamd.errors import TeamdError

log = logging.getLogger(__name__)

DIR_MODE = 0o700
FILE_MODE = 0o600
# filelock retries a non-blocking flock at this interval while another process holds it;
# its 50 ms default would put a 50 ms floor under every contended send or drain.
LOCK_POLL = 0.001

Json = dict[str, Any]


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
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = _open_new(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        _write_all(fd, data)
        if durable:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


def write_json(path: Path, obj: Json, *, durable: bool = True) -> None:
    atomic_write_bytes(path, dumps_doc(obj), durable=durable)


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
def dumps_line(record: Json) -> bytes:
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


def _reject(path: Path, raws: Iterable[bytes], why: str) -> None:
    """Append raw lines to `*.rejected.jsonl`. Caller holds `path`'s lock."""
    records = [
        {"rejected_at": time.time(), "reason": why, "line": raw.decode("utf-8", "backslashreplace")}
        for raw in raws
    ]
    if not records:
        return
    log.warning("%s: moved %d %s line(s) to %s", path, len(records), why,
                rejected_path(path).name)
    fd = _open_new(rejected_path(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        _write_all(fd, b"".join(dumps_line(r) for r in records))
    finally:
        os.close(fd)


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


def append_jsonl(path: Path, records: Iterable[Json], *, durable: bool = False,
                 locked: bool = False) -> None:
    """Append records as complete lines with one `write` under `path`'s lock.

    The folder must exist: appending never creates a team folder. `locked=True` when the
    caller already holds the lock.
    """
    data = b"".join(dumps_line(r) for r in records)
    if not data:
        return
    with _maybe_lock(path, locked):
        fd = _open_new(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        try:
            _cut_torn_tail(path, fd)
            _write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)


@contextmanager
def _maybe_lock(path: Path, already: bool) -> Iterator[None]:
    if already:
        yield
    else:
        with lock(path):
            yield


def drain_jsonl(path: Path, consume: Callable[[list[Json]], None],
                valid: Callable[[Json], bool] | None = None) -> list[Json]:
    """Take every record out of `path` without losing one.

    Under the lock: read, hand the records to `consume` (which must record them durably),
    and only then truncate the file in place. If `consume` raises, the file is untouched.
    Bad lines and a torn tail are moved to `*.rejected.jsonl`.
    """
    with lock(path):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            return []
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                return []
            found = parse_lines(os.pread(fd, size, 0), valid)
            if found.records:
                consume(found.records)
            _reject(path, found.bad, "bad")
            if found.torn:
                _reject(path, [found.torn], "torn")
            os.ftruncate(fd, 0)
            os.fsync(fd)
        finally:
            os.close(fd)
    return found.records


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
