"""Reading a JSONL file line by line within a bound, and what a reader makes of each line.

This module owns the bounded scan (`scan_lines`: at most `MAX_LINE` bytes of any one line
held, a longer one comes out `long` with only its head), a reader's verdict on a line (a
record, or a `Refusal` saying why not), and what a read or drain sorted a file into
(`Sorted`). It reads only; moving refused lines aside and cutting a drained file are
`teamd.files`'s, under the file's lock.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_LINE = 1 << 20  # a JSONL line longer than this is refused by readers (CONTRACT §3)
REJECT_HEAD = 64 * 1024  # how much of an over-long line `*.rejected.jsonl` keeps
_CHUNK = 1 << 16  # the bounded reader's read size


@dataclass
class RawLine:
    """One line of a JSONL file as found on disk, without its newline."""

    start: int  # offset of its first byte
    end: int  # offset just past its newline (the end of the file for a torn tail)
    data: bytes  # the line; only its first REJECT_HEAD bytes when `long`
    length: int  # its real length in bytes
    long: bool = False  # over MAX_LINE: never loaded whole, never parsed
    torn: bool = False  # the file's last line, without a newline


@dataclass
class Refusal:
    """Why a reader will not hand a line over; `id` when the line's id was readable."""

    reason: str
    id: str | None = None


#: a reader's verdict on one line: the record, or why it is refused
Judge = Callable[[RawLine], "dict[str, Any] | Refusal"]


def scan_lines(fd: int, size: int | None = None, max_line: int = MAX_LINE) -> Iterator[RawLine]:
    """Every line of the open file up to `size`, oldest first, a torn tail last.

    Reads in chunks and keeps at most `max_line` bytes (plus one chunk) of any line: a 10 MiB
    line costs no 10 MiB of memory, it comes out `long` with only its head."""
    if size is None:
        size = os.fstat(fd).st_size
    pos = start = length = 0
    head = bytearray()
    while pos < size:
        chunk = os.pread(fd, min(_CHUNK, size - pos), pos)
        if not chunk:
            break  # cut short meanwhile (only a reader without the lock sees this)
        i = 0
        while i < len(chunk):
            nl = chunk.find(b"\n", i)
            stop = len(chunk) if nl < 0 else nl
            if length <= max_line:
                head += chunk[i:stop]
            length += stop - i
            if nl < 0:
                break
            yield _raw_line(start, pos + nl + 1, head, length, max_line, torn=False)
            start, head, length = pos + nl + 1, bytearray(), 0
            i = nl + 1
        pos += len(chunk)
    if start < pos:
        yield _raw_line(start, pos, head, length, max_line, torn=True)


def _raw_line(start: int, end: int, head: bytearray, length: int, max_line: int,
              torn: bool) -> RawLine:
    long = length > max_line
    return RawLine(start, end, bytes(head[:REJECT_HEAD] if long else head), length, long, torn)


def json_judge(valid: Callable[[dict[str, Any]], bool] | None = None) -> Judge:
    """The plain verdict: a JSON object (passing `valid`, if given), else "bad"."""
    def judge(line: RawLine) -> dict[str, Any] | Refusal:
        if line.long:
            return Refusal(f"line over {MAX_LINE} bytes ({line.length} bytes)")
        try:
            obj = json.loads(line.data)
        except ValueError:
            return Refusal("bad")
        if isinstance(obj, dict) and (valid is None or valid(obj)):
            return obj
        return Refusal("bad")
    return judge


@dataclass
class Sorted:
    """What a bounded read or drain made of a file."""

    taken: list[dict[str, Any]] = field(default_factory=list)  # handed over, oldest first
    refused: list[tuple[Refusal, RawLine]] = field(default_factory=list)  # a torn tail too
    left: list[RawLine] = field(default_factory=list)  # good, but not taken this time
    kept: int = 0  # bytes a drain left in the file (those of `left`)


def sort_lines(fd: int, size: int, judge: Judge,
                take: Callable[[dict[str, Any]], bool] | None) -> Sorted:
    out = Sorted()
    for line in scan_lines(fd, size):
        if line.torn:
            out.refused.append((Refusal("torn"), line))
            continue
        if not line.long and not line.data.strip():
            continue
        verdict = judge(line)
        if isinstance(verdict, Refusal):
            out.refused.append((verdict, line))
        elif take is None or take(verdict):
            out.taken.append(verdict)
        else:
            out.left.append(line)
    return out


def read_lines(path: Path, judge: Judge) -> Sorted:
    """Read without the lock, moving nothing: the records `judge` accepts, and what it
    refuses (reported, left in place; a torn tail is a writer at work and is skipped)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return Sorted()
    try:
        found = sort_lines(fd, os.fstat(fd).st_size, judge, None)
    finally:
        os.close(fd)
    found.refused = [(r, line) for r, line in found.refused if not line.torn]
    return found
