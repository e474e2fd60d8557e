"""A board that does not load itself whole (issue 10): on a board of 20,000 tasks, `task add`,
`task update` and a claim of a given task open only the task files they touch.

Counted, not timed: each command runs in a real subprocess under an audit hook
(`sys.addaudithook`) that records every file it opens under `.tasks/`; the old code opened
all 20,000 task files for each of these."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.scale import write_board
from teamd import actions, board, events
from teamd.errors import BadInput
from teamd.layout import Workspace

TEAM = "big"
SIZE = 20_000
DONE = SIZE // 2  # tasks 1..DONE are completed
TASK_FILE = re.compile(r"/(\d+)\.json$")
#: A task file is opened at most a few times per command (once before the board lock to
#: refuse bad input early, once under it, once to write it back); a handful of task files.
MOST_TASK_FILES = 6

# Runs `teamctl ARGS…` (or, with `claim TASK MEMBER`, board.claim in this process) under an
# audit hook, then writes every path it opened under the board's folder to OUT as JSON.
WRAPPER = r"""
import atexit, json, os, sys
out, board_dir, *argv = sys.argv[1:]
opened = []
def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.path.abspath(os.fsdecode(args[0]))
        if path == board_dir or path.startswith(board_dir + os.sep):
            opened.append(path)
def report():
    with open(out, "w") as fh:
        json.dump(opened, fh)
atexit.register(report)
sys.addaudithook(hook)
if argv[0] == "claim":
    from teamd import board
    from teamd.layout import Workspace
    got = board.claim(Workspace.at(os.environ["TEAMD_ROOT"]), argv[1], argv[3], int(argv[2]))
    print(json.dumps(got))
else:
    from teamctl.cli import main
    sys.argv = ["teamctl", *argv]
    main()
"""


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    ws = Workspace.at(tmp_path_factory.mktemp("board") / "ws")
    ws.root.mkdir()
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "alice", "work")
    write_board(ws, TEAM, SIZE, done=DONE)
    yield ws


def audited(ws: Workspace, tmp_path: Path, *args: str) -> tuple[str, list[str]]:
    """Run `args` under the audit hook: (its stdout, the paths it opened under `.tasks/`)."""
    out = tmp_path / "opened.json"
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, str(out), str(ws.store.paths.tasks_dir(TEAM)), *args],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "TEAMD_ROOT": str(ws.root)})
    assert done.returncode == 0, done.stderr
    opened: list[str] = json.loads(out.read_text())
    return done.stdout, opened


def task_files(opened: list[str]) -> set[int]:
    return {int(m[1]) for p in opened if (m := TASK_FILE.search(p))}


def test_task_add_opens_only_the_tasks_it_touches(big: Workspace, tmp_path: Path) -> None:
    out, opened = audited(big, tmp_path, "--root", str(big.root), "task", "add", TEAM,
                          "one more", "--blocked-by", f"{SIZE}", "--json")
    task = json.loads(out)
    new = task["id"]
    assert new > SIZE and task["blocked_by"] == [SIZE]
    assert board.get(big, TEAM, SIZE)["blocks"] == [new]  # both ways, as ever
    touched = task_files(opened)
    assert touched <= {SIZE, new}, sorted(touched)  # the blocker and the new task only
    assert len(opened) < 30, opened  # plus the lock, .highwatermark and the folder's fsyncs
    assert int(big.store.paths.highwatermark(TEAM).read_text()) == new


def test_task_update_owner_and_a_dependency_open_only_their_tasks(
        big: Workspace, tmp_path: Path) -> None:
    target, blocker = DONE + 4, DONE + 30  # 10004 (pending) will wait on 10030 too
    before = board.get(big, TEAM, target)["blocked_by"]
    out, opened = audited(big, tmp_path, "--root", str(big.root), "task", "update", TEAM,
                          str(target), "--owner", "alice")
    assert "owner alice" in out and board.get(big, TEAM, target)["owner"] == "alice"
    touched = task_files(opened)
    assert touched == {target}, sorted(touched)

    out, opened = audited(big, tmp_path, "--root", str(big.root), "task", "update", TEAM,
                          str(target), "--blocked-by", str(blocker), "--json")
    assert json.loads(out)["blocked_by"] == sorted([*before, blocker])
    assert target in board.get(big, TEAM, blocker)["blocks"]  # both ways
    touched = task_files(opened)
    # the task, its new blocker, and what the cycle check walks: the blocker's own chain
    assert {target, blocker} <= touched and len(touched) <= MOST_TASK_FILES, sorted(touched)
    names = [r["event"] for r in events.read(big, TEAM) if r.get("task_id") == target]
    assert names[-2:] == ["task_updated", "task_updated"]


def test_claim_of_a_given_task_opens_it_and_its_blockers(big: Workspace,
                                                         tmp_path: Path) -> None:
    wanted = DONE + 1  # blocked by DONE, which is completed: claimable
    assert board.get(big, TEAM, wanted)["blocked_by"] == [DONE]
    out, opened = audited(big, tmp_path, "claim", TEAM, str(wanted), "bob")
    got = json.loads(out)
    assert got["id"] == wanted and got["owner"] == "bob" and got["status"] == "in_progress"
    assert task_files(opened) == {wanted, DONE}, sorted(task_files(opened))

    # not claimable (its blocker is not done): refused, still reading only the two
    out, opened = audited(big, tmp_path, "claim", TEAM, str(wanted + 1), "bob")
    assert json.loads(out) is None
    assert task_files(opened) == {wanted + 1, wanted}, sorted(task_files(opened))


def test_a_full_listing_still_reads_every_task(big: Workspace, tmp_path: Path) -> None:
    """The counter sees a whole-board read when there is one (this test can fail)."""
    _, opened = audited(big, tmp_path, "--root", str(big.root), "task", "list", TEAM,
                        "--json")
    assert len(task_files(opened)) >= SIZE


# -- what reading by path changes at the edges ---------------------------------------------
@pytest.fixture
def small(ws: Workspace) -> Workspace:
    actions.create_team(ws, TEAM)
    write_board(ws, TEAM, 6, done=3)
    return ws


def test_an_id_taken_on_disk_is_skipped_not_overwritten(small: Workspace) -> None:
    """`.highwatermark` behind the disk (restored by hand): the next id goes past the files."""
    small.store.paths.highwatermark(TEAM).write_text("2\n")
    before = small.store.paths.task(TEAM, 3).read_bytes()
    assert board.create(small, TEAM, "new")["id"] == 7
    assert small.store.paths.task(TEAM, 3).read_bytes() == before


def test_a_hand_broken_file_keeps_its_id_when_the_highwatermark_is_lost(
        small: Workspace) -> None:
    small.store.paths.task(TEAM, 6).write_text("{oops")
    small.store.paths.highwatermark(TEAM).unlink()
    assert board.create(small, TEAM, "new")["id"] == 7  # the name counts, unparsed
    assert small.store.paths.task(TEAM, 6).read_text() == "{oops"


def test_a_hand_broken_task_is_unknown_to_create_update_and_claim(
        small: Workspace, caplog: pytest.LogCaptureFixture) -> None:
    small.store.paths.task(TEAM, 4).write_text("{oops")
    with pytest.raises(BadInput, match=r"unknown task #4 in --blocked-by"):
        board.create(small, TEAM, "x", blocked_by=[4])
    with pytest.raises(BadInput, match=r"unknown task #4 in team"):
        board.claim(small, TEAM, "bob", 4)
    with pytest.raises(BadInput, match=r"unknown task #4$"):
        board.update(small, TEAM, 5, add_blocks=[4])
    assert f"{small.store.paths.task(TEAM, 4)}: skipped, not a task" in caplog.text
    # a file whose id is not its name is not that task either
    small.store.paths.task(TEAM, 4).write_text(small.store.paths.task(TEAM, 1).read_text())
    with pytest.raises(BadInput, match=r"unknown task #4 in team"):
        board.claim(small, TEAM, "bob", 4)
    assert [t["id"] for t in board.list_tasks(small, TEAM)] == [1, 2, 3, 5, 6]


def test_a_cycle_through_a_chain_is_still_refused(small: Workspace) -> None:
    """The cycle check walks the blocker's chain by path: 6 waits on 5 waits on 4."""
    with pytest.raises(BadInput, match=r"task #4 blocked by #6 would make a cycle"):
        board.update(small, TEAM, 4, add_blocked_by=[6])
    assert board.get(small, TEAM, 4)["blocked_by"] == []
