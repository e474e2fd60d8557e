"""teamd.files: atomic JSON replace, locked JSONL append, torn tails, bad lines, drain."""

from __future__ import annotations

import errno
import json
import multiprocessing
import os
import signal
import stat
import tracemalloc
from pathlib import Path

import pytest

from teamd import files, linescan
from teamd.errors import TeamdError
from tests.harness import file_size_limit


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A fresh, empty folder of the test's own (tmp_path also holds the hermetic root)."""
    made = tmp_path / "files"
    made.mkdir()
    return made


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


# -- folders and JSON documents ----------------------------------------------------------
def test_ensure_dir_is_0700_whatever_the_umask(folder: Path) -> None:
    old = os.umask(0o000)
    try:
        made = files.ensure_dir(folder / "a")
    finally:
        os.umask(old)
    old = os.umask(0o077 | 0o200)  # even a umask that takes the owner's write bit
    try:
        other = files.ensure_dir(folder / "b")
    finally:
        os.umask(old)
    assert mode(made) == 0o700 and mode(other) == 0o700


def test_atomic_replace_writes_whole_document_0600_and_leaves_no_temp(folder: Path) -> None:
    path = folder / "doc.json"
    old = os.umask(0o000)
    try:
        files.write_json(path, {"schema": 1, "n": 1})
        files.write_json(path, {"schema": 1, "n": 2, "text": "héllo"})
    finally:
        os.umask(old)
    assert files.read_json(path) == {"schema": 1, "n": 2, "text": "héllo"}
    assert mode(path) == 0o600
    assert sorted(p.name for p in folder.iterdir()) == ["doc.json"]
    assert path.read_bytes().endswith(b"\n")


def test_atomic_replace_swaps_the_inode(folder: Path) -> None:
    path = folder / "doc.json"
    files.write_json(path, {"n": 1})
    before = path.stat().st_ino
    with open(path, "rb") as old_reader:
        files.write_json(path, {"n": 2})
        # a reader holding the old file still sees the old, complete document
        assert json.loads(old_reader.read()) == {"n": 1}
    assert path.stat().st_ino != before


def _rewrite_many(path: str, count: int) -> None:
    for i in range(count):
        files.write_json(Path(path), {"n": i, "pad": "x" * (i % 7) * 1000}, durable=False)


@pytest.mark.timeout(60)
def test_readers_never_see_a_torn_document(folder: Path) -> None:
    path = folder / "doc.json"
    files.write_json(path, {"n": -1})
    proc = multiprocessing.get_context("fork").Process(target=_rewrite_many,
                                                       args=(str(path), 1500))
    proc.start()
    seen: set[int] = set()
    while proc.is_alive() or not seen:
        doc = files.read_json(path)  # raises on a torn document
        assert doc is not None
        seen.add(doc["n"])
    proc.join(10)
    assert proc.exitcode == 0
    assert files.read_json(path)["n"] == 1499  # type: ignore[index]
    assert [p.name for p in folder.iterdir()] == ["doc.json"]


def test_read_json_missing_and_broken(folder: Path) -> None:
    assert files.read_json(folder / "none.json") is None
    (folder / "bad.json").write_text("{not json")
    with pytest.raises(TeamdError, match="not valid JSON"):
        files.read_json(folder / "bad.json")
    (folder / "list.json").write_text("[1]")
    with pytest.raises(TeamdError, match="JSON object"):
        files.read_json(folder / "list.json")


# -- JSONL append and read ---------------------------------------------------------------
def test_append_writes_complete_lines_0600(folder: Path) -> None:
    path = folder / "x.jsonl"
    old = os.umask(0o000)
    try:
        files.append_jsonl(path, [{"a": 1}, {"b": "ü"}])
        files.append_jsonl(path, [{"c": 3}], durable=True)
        files.append_jsonl(path, [])
    finally:
        os.umask(old)
    assert lines_of(path) == [b'{"a":1}\n', '{"b":"ü"}\n'.encode(), b'{"c":3}\n']
    assert mode(path) == 0o600
    assert mode(files.lock_path(path)) == 0o600  # the lock file too
    assert files.read_jsonl(path).records == [{"a": 1}, {"b": "ü"}, {"c": 3}]


def test_a_record_with_newlines_in_text_stays_one_line(folder: Path) -> None:
    path = folder / "x.jsonl"
    files.append_jsonl(path, [{"text": "line1\nline2\r\n\u2028"}])
    assert len(lines_of(path)) == 1
    assert files.read_jsonl(path).records == [{"text": "line1\nline2\r\n\u2028"}]


def test_reader_ignores_a_torn_tail(folder: Path) -> None:
    path = folder / "x.jsonl"
    files.append_jsonl(path, [{"n": 1}])
    with open(path, "ab") as fh:
        fh.write(b'{"n": 2, "half')
    found = files.read_jsonl(path)
    assert found.records == [{"n": 1}]
    assert found.torn == b'{"n": 2, "half'
    assert not found.bad


def test_next_writer_moves_torn_tail_aside_so_nothing_glues(folder: Path) -> None:
    path = folder / "x.jsonl"
    files.append_jsonl(path, [{"n": 1}])
    with open(path, "ab") as fh:
        fh.write(b'{"n": 2, "half')
    files.append_jsonl(path, [{"n": 3}])
    assert lines_of(path) == [b'{"n":1}\n', b'{"n":3}\n']
    rejected = files.read_jsonl(folder / "x.rejected.jsonl").records
    assert len(rejected) == 1
    assert rejected[0]["reason"] == "torn" and rejected[0]["line"] == '{"n": 2, "half'
    assert mode(folder / "x.rejected.jsonl") == 0o600


def test_torn_tail_that_is_the_whole_file(folder: Path) -> None:
    path = folder / "x.jsonl"
    path.write_bytes(b'{"partial"')
    files.append_jsonl(path, [{"n": 1}])
    assert lines_of(path) == [b'{"n":1}\n']


def test_torn_tail_longer_than_a_mebibyte_is_moved_aside_whole(folder: Path) -> None:
    path = folder / "x.jsonl"
    files.append_jsonl(path, [{"n": 1}])
    big = b'{"content": "' + b"\\u0001" * 300_000  # ~1.8 MB of one unfinished line
    with open(path, "ab") as fh:
        fh.write(big)
    files.append_jsonl(path, [{"n": 2}])
    assert lines_of(path) == [b'{"n":1}\n', b'{"n":2}\n']
    rejected = files.read_jsonl(folder / "x.rejected.jsonl").records
    assert [r["line"].encode() for r in rejected] == [big]


def test_reader_skips_bad_lines_without_crashing(folder: Path) -> None:
    path = folder / "x.jsonl"
    path.write_bytes(b'{"n":1}\nnot json\n[1,2]\n\n{"n":2}\n\xff\xfe\n')
    found = files.read_jsonl(path)
    assert found.records == [{"n": 1}, {"n": 2}]
    assert found.bad == [b"not json", b"[1,2]", b"\xff\xfe"]
    assert files.read_jsonl(folder / "missing.jsonl").records == []


# -- drain -------------------------------------------------------------------------------
def test_drain_hands_records_to_consumer_then_truncates(folder: Path) -> None:
    path = folder / "x.jsonl"
    files.append_jsonl(path, [{"n": 1}, {"n": 2}])
    inode = path.stat().st_ino
    got: list[list[dict[str, int]]] = []
    assert files.drain_lines(path, got.append, linescan.json_judge()).taken == [{"n": 1}, {"n": 2}]
    assert got == [[{"n": 1}, {"n": 2}]]
    assert path.read_bytes() == b""
    assert path.stat().st_ino == inode  # truncated in place, not replaced
    assert files.drain_lines(path, got.append, linescan.json_judge()).taken == []
    assert len(got) == 1  # the consumer is not called for nothing
    missing = folder / "missing.jsonl"
    assert files.drain_lines(missing, got.append, linescan.json_judge()).taken == []
    assert not (folder / "missing.jsonl").exists()


def test_drain_moves_bad_lines_and_torn_tail_to_rejected(folder: Path) -> None:
    path = folder / "x.jsonl"
    path.write_bytes(b'{"n":1}\nGARBAGE\n{"n":2}\n{"torn')
    got: list[dict[str, int]] = []
    assert files.drain_lines(path, got.extend, linescan.json_judge()).taken == [{"n": 1}, {"n": 2}]
    assert got == [{"n": 1}, {"n": 2}]
    assert path.read_bytes() == b""
    rejected = files.read_jsonl(folder / "x.rejected.jsonl").records
    assert [(r["reason"], r["line"]) for r in rejected] == [("bad", "GARBAGE"),
                                                            ("torn", '{"torn')]
    assert all(isinstance(r["rejected_at"], float) for r in rejected)


def test_drain_does_not_truncate_when_the_consumer_raises(folder: Path) -> None:
    path = folder / "x.jsonl"
    files.append_jsonl(path, [{"n": 1}])
    before = path.read_bytes()

    def crash(batch: list[dict[str, int]]) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        files.drain_lines(path, crash, linescan.json_judge())
    assert path.read_bytes() == before
    # and the lock was released: the next drain gets the same records
    assert files.drain_lines(path, lambda b: None, linescan.json_judge()).taken == [{"n": 1}]


def test_rewrite_jsonl_keeps_good_records_and_filters(folder: Path) -> None:
    path = folder / "x.jsonl"
    path.write_bytes(b'{"n":1}\nbad\n{"n":2}\n{"n":3}\n{"to')
    kept = files.rewrite_jsonl(path, keep=lambda r: r["n"] != 2)
    assert kept.records == [{"n": 1}, {"n": 3}]
    assert lines_of(path) == [b'{"n":1}\n', b'{"n":3}\n']
    assert mode(path) == 0o600
    assert len(files.read_jsonl(folder / "x.rejected.jsonl").records) == 2
    st = path.stat()
    files.rewrite_jsonl(path)  # clean: nothing to do, file untouched
    assert path.stat().st_ino == st.st_ino and path.stat().st_mtime_ns == st.st_mtime_ns


def test_rejected_path_names() -> None:
    assert files.rejected_path(Path("/a/lead_inbox.jsonl")) == Path(
        "/a/lead_inbox.rejected.jsonl")
    assert files.rejected_path(Path("/a/log")) == Path("/a/log.rejected.jsonl")


# -- locks -------------------------------------------------------------------------------
def _hold_lock(path: str, held: object) -> None:
    with files.lock(Path(path)):
        held.set()  # type: ignore[attr-defined]
        signal.pause()  # until killed: the lock is never released by us


@pytest.mark.timeout(60)
def test_lock_excludes_other_processes_and_dies_with_its_holder(folder: Path) -> None:
    import filelock

    ctx = multiprocessing.get_context("fork")
    path = folder / "x.jsonl"
    held = ctx.Event()
    proc = ctx.Process(target=_hold_lock, args=(str(path), held))
    proc.start()
    try:
        assert held.wait(10)
        with pytest.raises(filelock.Timeout):
            files.lock(path, timeout=0.05).acquire()
    finally:
        proc.kill()  # no release: the kernel drops the flock with the process
        proc.join(10)
    with files.lock(path, timeout=5):
        pass
    assert files.lock_path(path).exists()  # kept, never deleted


# -- a write that fails leaves nothing torn (CONTRACT §3, "What a writer leaves") ---------
def test_a_failed_append_is_cut_back_and_names_the_file(folder: Path) -> None:
    path = folder / "x.jsonl"
    files.append_jsonl(path, [{"n": 1}])
    before = path.read_bytes()
    # room for 100 more bytes: the kernel writes those, then refuses the rest
    with file_size_limit(len(before) + 100), pytest.raises(OSError) as caught:
        files.append_jsonl(path, [{"text": "x" * 10_000}], durable=True)
    assert caught.value.errno == errno.EFBIG and files.out_of_space(caught.value)
    assert caught.value.filename == str(path)
    assert path.read_bytes() == before  # not the 100 bytes of half a line
    files.append_jsonl(path, [{"n": 2}])
    assert lines_of(path) == [b'{"n":1}\n', b'{"n":2}\n']


def test_a_failed_rejected_append_is_cut_back_too(folder: Path) -> None:
    path = folder / "x.jsonl"
    files.append_jsonl(path, [{"n": 1}])
    files.rejected_path(path).write_bytes(b'{"old":1}\n')
    with open(path, "ab") as fh:
        fh.write(b'{"torn": "' + b"y" * 5_000)
    before = path.read_bytes()
    with file_size_limit(len(before)), pytest.raises(OSError) as caught:
        files.append_jsonl(path, [{"n": 2}])  # moving the torn tail aside fails first
    assert caught.value.filename == str(files.rejected_path(path))
    assert files.rejected_path(path).read_bytes() == b'{"old":1}\n'
    assert path.read_bytes() == before  # nothing cut, nothing glued
    files.append_jsonl(path, [{"n": 2}])
    assert lines_of(path) == [b'{"n":1}\n', b'{"n":2}\n']


def test_a_failed_atomic_write_names_the_file_and_leaves_no_temp(folder: Path) -> None:
    path = folder / "doc.json"
    files.write_json(path, {"v": 1})
    with file_size_limit(10), pytest.raises(OSError) as caught:
        files.write_json(path, {"v": "x" * 1000})
    assert caught.value.errno == errno.EFBIG and caught.value.filename == str(path)
    assert files.out_of_space(caught.value)  # a file-size limit is want of space (issue 26)
    assert files.read_json(path) == {"v": 1}
    assert sorted(p.name for p in folder.iterdir()) == ["doc.json"]


@pytest.mark.parametrize(("code", "short"), [
    (errno.ENOSPC, True), (errno.EDQUOT, True), (errno.EFBIG, True),
    (errno.EIO, False), (errno.EMFILE, False), (errno.EACCES, False)])
def test_want_of_space_is_every_error_for_lack_of_room(code: int, short: bool) -> None:
    assert files.out_of_space(OSError(code, os.strerror(code))) is short
    assert not files.out_of_space(ValueError("no room"))


# -- bounded reading ---------------------------------------------------------------------
def test_a_huge_line_is_read_without_loading_it(folder: Path) -> None:
    path = folder / "x.jsonl"
    huge = 10 * 1024 * 1024
    with open(path, "wb") as fh:
        fh.write(b'{"n":1}\n')
        fh.write(b'{"big": "' + b"z" * huge + b'"}\n')
        fh.write(b'{"n":2}\n')
    tracemalloc.start()
    try:
        got: list[dict[str, object]] = []
        found = files.drain_lines(path, got.extend, linescan.json_judge())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got == [{"n": 1}, {"n": 2}]
    assert peak < 3 * linescan.MAX_LINE  # not the 10 MiB line
    [(refusal, line)] = found.refused
    assert line.long and line.length == huge + 11
    assert refusal.reason.startswith("line over")
    [rejected] = files.read_jsonl(files.rejected_path(path)).records
    assert rejected["bytes"] == huge + 11 and rejected["cut"] is True
    assert len(rejected["line"]) == linescan.REJECT_HEAD
    assert path.read_bytes() == b""


def test_scan_lines_finds_every_line_across_chunks(folder: Path) -> None:
    path = folder / "x.jsonl"
    lines = [b"a" * n for n in (0, 1, 65535, 65536, 65537, 200_000, 3)]
    path.write_bytes(b"\n".join(lines) + b"\ntail")
    fd = os.open(path, os.O_RDONLY)
    try:
        found = list(linescan.scan_lines(fd))
    finally:
        os.close(fd)
    assert [x.data for x in found] == [*lines, b"tail"]
    assert [x.torn for x in found] == [False] * len(lines) + [True]
    assert all(path.read_bytes()[x.start:x.end].rstrip(b"\n") == x.data for x in found)


def test_drain_leaves_what_take_refuses_in_place(folder: Path) -> None:
    path = folder / "x.jsonl"
    files.append_jsonl(path, [{"n": n} for n in range(5)])
    inode = path.stat().st_ino
    got: list[dict[str, int]] = []
    found = files.drain_lines(path, got.extend, linescan.json_judge(), take=lambda r: r["n"] < 2)
    assert got == [{"n": 0}, {"n": 1}] and len(found.left) == 3
    assert lines_of(path) == [b'{"n":2}\n', b'{"n":3}\n', b'{"n":4}\n']
    assert path.stat().st_ino != inode  # replaced whole (temp file, os.replace)
    assert mode(path) == 0o600
    assert sorted(p.name for p in folder.iterdir()) == ["x.jsonl", "x.jsonl.lock"]
