"""Folders 0700, files 0600 (lock files too), whatever the umask (CONTRACT §2)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers_proc import clean_env, teamctl

HELPER = Path(__file__).resolve().parents[1] / "helpers_proc.py"


def modes_under(root: Path) -> dict[str, tuple[str, int]]:
    """Type and permission bits of everything under .teams/, .tasks/ and of teamd.toml."""
    out: dict[str, tuple[str, int]] = {}
    for top in (root / ".teams", root / ".tasks"):
        assert top.is_dir()
        for path in [top, *top.rglob("*")]:
            st = path.lstat()
            kind = "dir" if stat.S_ISDIR(st.st_mode) else \
                "file" if stat.S_ISREG(st.st_mode) else "other"
            out[str(path.relative_to(root))] = (kind, stat.S_IMODE(st.st_mode))
    st = (root / "teamd.toml").stat()
    out["teamd.toml"] = ("file", stat.S_IMODE(st.st_mode))
    return out


def assert_private(root: Path) -> dict[str, tuple[str, int]]:
    modes = modes_under(root)
    wrong = {p: (k, oct(m)) for p, (k, m) in modes.items()
             if (k, m) not in (("dir", 0o700), ("file", 0o600))}
    assert not wrong, wrong
    return modes


@pytest.mark.timeout(120)
@pytest.mark.parametrize("umask", [0o022, 0o000], ids=["umask-022", "umask-000"])
def test_a_tour_of_commands_leaves_only_0700_folders_and_0600_files(
        tmp_path: Path, umask: int) -> None:
    root = tmp_path / "root"
    root.mkdir()
    done = subprocess.run([sys.executable, str(HELPER), "tour", str(root)], umask=umask,
                          env=clean_env(), capture_output=True, timeout=100, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    modes = assert_private(root)
    names = set(modes)
    # the tour did make the files worth checking
    expected = {".teams/t/config.json", ".teams/t/config.json.lock",
                ".teams/t/events.jsonl", ".teams/t/events.jsonl.lock",
                ".teams/t/events.1.jsonl", ".teams/t/events.2.jsonl",
                ".teams/t/alice_inbox.jsonl", ".teams/t/alice_inbox.jsonl.lock",
                ".teams/t/alice_inbox.rejected.jsonl", ".teams/t/lead_inbox.jsonl",
                ".teams/t/requests", ".teams/t/sessions", ".teams/t/transcripts",
                ".teams/t/logs", ".tasks/t/.highwatermark", ".tasks/t/1.json",
                ".tasks/t/2.json", ".tasks/t/board.lock"}
    assert expected <= names, expected - names
    requests_files = [n for n in names if n.startswith(".teams/t/requests/")]
    assert any(n.endswith(".json.lock") for n in requests_files)
    assert sum(n.endswith(".json") for n in requests_files) == 2  # a plan and a shutdown
    assert not any(n.startswith((".teams/gone", ".tasks/gone")) for n in names)


@pytest.mark.timeout(60)
def test_the_console_script_under_umask_000(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    env = clean_env()
    for args in (("init",), ("create", "t"), ("spawn", "t", "alice", "--prompt", "p"),
                 ("send", "t", "alice", "hi"), ("send", "t", "lead", "yo", "--sender", "alice"),
                 ("task", "add", "t", "x"), ("inbox", "t"), ("shutdown", "t", "alice")):
        done = teamctl(root, *args, umask=0o000, env=env)
        assert done.returncode == 0, (args, done.stderr)
    modes = assert_private(root)
    assert ".teams/t/lead_inbox.jsonl.lock" in modes and ".tasks/t/board.lock" in modes


def test_a_process_umask_of_000_is_no_excuse_in_process(tmp_path: Path) -> None:
    """The library itself, in this process, with the most permissive umask."""
    from teamd import actions, board
    from teamd.layout import Workspace

    ws = Workspace.at(tmp_path / "root")
    old = os.umask(0o000)
    try:
        ws.root.mkdir()
        from teamd import settings

        settings.write_defaults(ws)
        actions.create_team(ws, "t")
        actions.spawn(ws, "t", "bob", "p")
        actions.send(ws, "t", "bob", "hi")
        board.create(ws, "t", "x")
        board.claim(ws, "t", "bob", 1)
        actions.shutdown(ws, "t", "bob")
    finally:
        os.umask(old)
    assert_private(ws.root)
