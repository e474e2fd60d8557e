"""teamd.apikey and the non-dumpable processes (CONTRACT §8, §10): what `api_key_file` may
name, and a member that is not root still raising its oom_score_adj once non-dumpable.
The end-to-end story (no key in any /proc/*/environ) is tests/e2e/test_key_e2e.py."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import pytest

from teamd import apikey
from teamd.errors import BadInput
from teamd.proc import OOM_SCORE_ADJ, raise_oom_score_adj, set_dumpable

PR_GET_DUMPABLE = 3


def key_file(tmp_path: Path, data: bytes, mode: int = 0o600) -> Path:
    path = tmp_path / "key"
    path.write_bytes(data)
    path.chmod(mode)
    return path


@pytest.mark.parametrize("data", [b"sk-ant-1\n", b"sk-ant-1\r\n", b"sk-ant-1"])
def test_the_trailing_newline_is_no_part_of_the_key(tmp_path: Path, data: bytes) -> None:
    assert apikey.from_file(str(key_file(tmp_path, data))) == "sk-ant-1"


@pytest.mark.parametrize(("data", "mode", "why"), [
    (b"sk-ant-1\n", 0o640, "another user could read it"),
    (b"sk-ant-1\n", 0o604, "another user could read it"),
    (b"\n", 0o600, "is empty"),
    (b"\xff\xfe", 0o600, "not text"),
    (b"k" * (apikey.MAX_KEY + 1), 0o600, "over 16384 bytes"),
])
def test_a_file_that_cannot_serve_is_refused_naming_it(tmp_path: Path, data: bytes, mode: int,
                                                       why: str) -> None:
    path = key_file(tmp_path, data, mode)
    with pytest.raises(BadInput, match=why) as caught:
        apikey.from_file(str(path))
    assert str(path) in str(caught.value)


def test_a_missing_file_and_a_relative_path_are_refused(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="No such file"):
        apikey.from_file(str(tmp_path / "nope"))
    with pytest.raises(BadInput, match="must be an absolute path"):
        apikey.from_file("keys/key")


def test_a_bare_name_is_a_systemd_credential(tmp_path: Path) -> None:
    (tmp_path / "anthropic").write_text("sk-ant-cred\n")
    (tmp_path / "anthropic").chmod(0o440)  # systemd's own mode: the folder is private
    env = {"CREDENTIALS_DIRECTORY": str(tmp_path)}
    assert apikey.from_file("anthropic", env) == "sk-ant-cred"
    with pytest.raises(BadInput, match="CREDENTIALS_DIRECTORY is not set"):
        apikey.from_file("anthropic", {})


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_a_non_dumpable_member_of_another_user_still_raises_its_oom_score_adj() -> None:
    """/proc/self belongs to root once a process is non-dumpable: a member that is not root
    could not raise its own oom_score_adj without the moment's dumpable it takes."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        code = 1
        try:
            os.close(r)
            os.setgid(65534)
            os.setuid(65534)
            set_dumpable(False)
            try:
                open(OOM_SCORE_ADJ, "r+").close()
                found = "writable"
            except PermissionError:
                found = "refused"  # the fault: non-dumpable, the file is root's
            before = int(Path(OOM_SCORE_ADJ).read_text())
            raise_oom_score_adj(by=100)
            after = int(Path(OOM_SCORE_ADJ).read_text())
            libc = ctypes.CDLL(None)
            dumpable = libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)
            os.write(w, f"{found} {before} {after} {dumpable}".encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    report = os.read(r, 100).decode()
    os.close(r)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    found, before, after, dumpable = report.split()
    assert found == "refused"
    assert int(before) < 1000 and int(after) == min(1000, int(before) + 100)
    assert dumpable == "0"  # non-dumpable again after the write
