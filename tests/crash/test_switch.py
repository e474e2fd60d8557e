"""The crash switch itself (CONTRACT §17): a real process of the product, killed by SIGKILL
just before or just after its Nth durable write, its log, `TEAMD_CRASH_WHO`, a malformed
value, a forked child counting from 1, nothing once a crash fired, and no `TEAMD_CRASH_*`
reaching a tool or a hook."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from teamd import crashpoints, files, pgroup
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import make_team, running_teamd, tool_use, wait_status, wait_until

#: three appends, a replace, a file removed: five durable writes, in a process of its own
WRITER = """
import sys
from pathlib import Path
from teamd import crashpoints, files, removals
crashpoints.identify(sys.argv[2])
d = Path(sys.argv[1])
for i in range(3):
    files.append_jsonl(d / "a.jsonl", [{"i": i}])
files.write_json(d / "b.json", {"schema": 1})
removals.remove_file(d / "b.json")
print("done")
"""


def write(tmp: Path, me: str = "teamctl", **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("TEAMD_CRASH_")}
    full.update({f"TEAMD_CRASH_{k.upper()}": v for k, v in env.items()})
    return subprocess.run([sys.executable, "-c", WRITER, str(tmp), me], env=full,
                          capture_output=True, text=True, timeout=60)


def log_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def appended(tmp: Path) -> int:
    return len(files.read_jsonl(tmp / "a.jsonl").records)


def test_off_it_counts_nothing_and_changes_nothing(tmp_path: Path) -> None:
    done = write(tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "done\n", "")
    assert appended(tmp_path) == 3 and not (tmp_path / "b.json").exists()


def test_the_log_names_each_write_once_it_happened(tmp_path: Path) -> None:
    log = tmp_path / "crash.jsonl"
    assert write(tmp_path, log=str(log)).returncode == 0
    lines = log_of(log)
    assert [(r["n"], r["what"]) for r in lines] == [
        (1, "append"), (2, "append"), (3, "append"), (4, "replace"), (5, "remove")]
    assert {r["path"] for r in lines[:3]} == {str(tmp_path / "a.jsonl")}
    assert lines[3]["path"] == str(tmp_path / "b.json")  # the final path, not the temp file
    assert {r["pid"] for r in lines} == {lines[0]["pid"]}


@pytest.mark.parametrize("at, lines", [("1", 0), ("2", 1), ("after:2", 2), ("after:1", 1)])
def test_it_dies_just_before_or_just_after_write_n(tmp_path: Path, at: str, lines: int) -> None:
    log = tmp_path / "crash.jsonl"
    done = write(tmp_path, at=at, log=str(log))
    assert done.returncode == -signal.SIGKILL and done.stdout == ""
    assert appended(tmp_path) == lines  # before: no byte of write N; after: all of it
    fired = [r for r in log_of(log) if "fired" in r]
    assert [(r["fired"], r["after"]) for r in fired] == [(int(at.split(":")[-1]),
                                                           at.startswith("after"))]
    assert [r["n"] for r in log_of(log) if "n" in r] == list(range(1, lines + 1))
    assert crashpoints.fired(log)


def test_a_crash_at_a_replace_leaves_the_old_document(tmp_path: Path) -> None:
    files.write_json(tmp_path / "b.json", {"schema": 0})
    done = write(tmp_path, at="4")
    assert done.returncode == -signal.SIGKILL
    assert files.read_json(tmp_path / "b.json") == {"schema": 0}


def test_who_aims_the_crash_at_one_process(tmp_path: Path) -> None:
    assert write(tmp_path, "teamctl", at="1", who="teamd").returncode == 0
    (tmp_path / "b").mkdir()
    assert write(tmp_path / "b", "teamd", at="1", who="teamd").returncode == -signal.SIGKILL


def test_after_a_crash_fired_no_process_is_armed(tmp_path: Path) -> None:
    log = tmp_path / "crash.jsonl"
    assert write(tmp_path, at="1", log=str(log)).returncode == -signal.SIGKILL
    again = write(tmp_path, at="1", log=str(log))  # the recovery: a re-run, a restart
    assert again.returncode == 0 and appended(tmp_path) == 3
    assert len([r for r in log_of(log) if "fired" in r]) == 1


@pytest.mark.parametrize("value", ["x", "0", "after:", "after:-1", "3.5"])
def test_a_malformed_value_is_ignored_with_one_warning(tmp_path: Path, value: str) -> None:
    done = write(tmp_path, at=value)
    assert done.returncode == 0 and appended(tmp_path) == 3
    [line] = done.stderr.splitlines()
    assert "TEAMD_CRASH_AT" in line and "ignoring" in line


def test_a_forked_child_counts_its_own_writes_from_one(tmp_path: Path) -> None:
    log = tmp_path / "crash.jsonl"
    code = f"""
import os, sys
from pathlib import Path
from teamd import files
d = Path({str(tmp_path)!r})
files.append_jsonl(d / "parent.jsonl", [{{"x": 1}}])
pid = os.fork()
if pid == 0:
    files.append_jsonl(d / "child.jsonl", [{{"x": 1}}])
    files.append_jsonl(d / "child.jsonl", [{{"x": 2}}])
    os._exit(0)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
"""
    env = {**os.environ, crashpoints.AT: "2", crashpoints.LOG: str(log)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.stdout.strip() == str(-signal.SIGKILL)  # the child's 2nd write, not the 1st
    assert len(files.read_jsonl(tmp_path / "child.jsonl").records) == 1
    assert done.returncode == 0  # the parent made one write only


def test_no_crash_variable_reaches_a_tool_or_a_hook() -> None:
    env = pgroup.child_env({"PATH": "/bin", crashpoints.AT: "3", crashpoints.LOG: "/x",
                            crashpoints.WHO: "teamd"})
    assert env == {"PATH": "/bin"}


@pytest.fixture
def script() -> dict[str, Any]:
    return {"rules": [{"name": "env", "contains": "ENV", "reply": {"content": [
        tool_use("bash", command="env | grep TEAMD_CRASH_ > seen.txt; echo ok")]}}],
        "default": {"content": [{"type": "text", "text": "Waiting."}]}}


def test_teamd_hands_the_variables_to_its_members_never_to_their_tools(
        ws: Workspace, tmp_path: Path, workdir: Path, server: ScriptedServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The member is armed (its writes are in the log, under its own pid and name), and
    the bash it runs sees no TEAMD_CRASH_* variable."""
    log = tmp_path / "crash.jsonl"
    monkeypatch.setenv(crashpoints.LOG, str(log))
    make_team(ws, workdir, "alice", prompt="ENV")
    with running_teamd(ws, server.url) as daemon:
        wait_until(lambda: (workdir / "seen.txt").exists(), 60, "alice's bash to run")
        wait_status(ws, "alice", "idle", 60)
        lines = log_of(log)
    assert (workdir / "seen.txt").read_text() == ""
    mine = {r["who"] for r in lines if r["pid"] == daemon.pid}
    assert mine == {"teamd"}
    alice = [r for r in lines if r.get("who") == "alice"]
    assert alice and alice[0]["n"] == 1 and {r["pid"] for r in alice} != {daemon.pid}
