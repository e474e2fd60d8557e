"""Worker code and helpers for tests that use real processes.

Workers are plain module-level functions so they run under any multiprocessing start method;
each writes what it did to its own file (JSON), which the test then checks against the disk.
`python tests/helpers_proc.py tour ROOT` runs a tour of teamctl commands in this process
(used by the permission tests under a chosen umask).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from teamd import actions, board, inbox
from teamd.layout import Workspace
from teamd.watch import Watcher

#: the installed console script, next to the interpreter running the tests
TEAMCTL = Path(sys.executable).parent / "teamctl"


# -- looking at a root -------------------------------------------------------------------
def snapshot(root: Path) -> dict[str, tuple[str, int, bytes | None]]:
    """Every path under `root` with its type, permission bits and (for files) contents."""
    out: dict[str, tuple[str, int, bytes | None]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath, name)
            st = path.lstat()
            rel = str(path.relative_to(root))
            if stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode), None)
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ("file", stat.S_IMODE(st.st_mode), path.read_bytes())
            else:
                out[rel] = ("other", stat.S_IMODE(st.st_mode), None)
    return out


def clean_env() -> dict[str, str]:
    """This environment without settings overrides, API keys or systemd variables."""
    drop = ("TEAMD_", "ANTHROPIC_", "NOTIFY_SOCKET", "WATCHDOG_")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


def teamctl(root: Path, *args: str | bytes, input: bytes | None = None,
            umask: int = -1, timeout: float = 30,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run the real console script against `root`."""
    cmd: list[str | bytes] = [str(TEAMCTL), "--root", str(root), *args]
    return subprocess.run(cmd, input=input, capture_output=True, timeout=timeout,
                          umask=umask, env=env, check=False)


def ctl(where: Path | Workspace, *args: str, code: int = 0, timeout: float = 120,
        env: dict[str, str] | None = None) -> str:
    """Run the real `teamctl`; check its exit code (`code`); return its standard output."""
    root = where.root if isinstance(where, Workspace) else where
    result = teamctl(root, *args, timeout=timeout, env=env)
    assert result.returncode == code, (args, result.returncode, result.stdout,
                                       result.stderr.decode(errors="replace"))
    return result.stdout.decode()


def teamctl_text(where: Path | Workspace, *args: str,
                 timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the real `teamctl`, unchecked; its output as text (to read an error line)."""
    root = where.root if isinstance(where, Workspace) else where
    return subprocess.run([str(TEAMCTL), "--root", str(root), *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


def _dump(path: str, obj: Any) -> None:
    Path(path).write_text(json.dumps(obj))


# -- workers -----------------------------------------------------------------------------
def send_worker(root: str, team: str, sender: str, count: int, out: str, go: Any) -> None:
    """Send `count` numbered messages from `sender` to the lead; record (seq, id) pairs."""
    ws = Workspace.at(root)
    go.wait()
    sent = []
    for seq in range(count):
        msg = actions.send(ws, team, "lead", f"{sender} {seq}", sender=sender)
        sent.append([seq, msg["id"]])
    _dump(out, sent)


def drain_worker(root: str, team: str, name: str, out: str, stop: Any, ready: Any) -> None:
    """Drain `name`'s inbox in a loop, as a teammate would: the consumer appends what it got
    to its own file and fsyncs before the inbox is cut. One last drain after `stop`."""
    ws = Workspace.at(root)
    fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    batches = 0

    def consume(batch: list[dict[str, Any]]) -> None:
        nonlocal batches
        data = b"".join(json.dumps(m).encode() + b"\n" for m in batch)
        os.write(fd, data)
        os.fsync(fd)
        batches += 1

    with Watcher([ws.store.paths.team_dir(team)]) as watcher:
        ready.set()
        while True:
            stopping = stop.is_set()
            inbox.drain(ws, team, name, consume)
            if stopping:
                break
            watcher.wait(0.05)
    os.close(fd)
    _dump(out + ".batches", batches)


def claim_worker(root: str, team: str, member: str, out: str, go: Any) -> None:
    """Try to claim every task, lowest id first; record the ids this member got."""
    ws = Workspace.at(root)
    go.wait()
    got = []
    for tid in sorted(t["id"] for t in board.list_tasks(ws, team)):
        if board.claim(ws, team, member, tid) is not None:
            got.append(tid)
    _dump(out, got)


def create_worker(root: str, team: str, who: str, count: int, out: str, go: Any) -> None:
    """Create `count` tasks; record the ids handed out."""
    ws = Workspace.at(root)
    go.wait()
    _dump(out, [board.create(ws, team, f"{who} task {i}", created_by=who)["id"]
                for i in range(count)])


def answer_worker(root: str, team: str, request_id: str, approve: bool, out: str,
                  go: Any) -> None:
    """Try to answer a request; record whether this process won the compare-and-set."""
    from teamd import requests
    from teamd.errors import BadInput

    ws = Workspace.at(root)
    go.wait()
    try:
        requests.answer(ws, team, request_id, approve)
        _dump(out, "won")
    except BadInput as exc:
        _dump(out, f"refused: {exc}")


def shutdown_worker(root: str, team: str, name: str, out: str, go: Any) -> None:
    """Ask `name` to shut down; record whether this process's request was the one."""
    from teamd.errors import BadInput

    ws = Workspace.at(root)
    go.wait()
    try:
        result = actions.shutdown(ws, team, name, reason="race")
        _dump(out, result["request"]["request_id"])
    except BadInput as exc:
        _dump(out, f"refused: {exc}")


# -- a tour of commands (for the permission tests) ---------------------------------------
TOUR: Sequence[Sequence[str]] = (
    ("init",),
    ("create", "t", "--description", "tour"),
    ("create", "gone"),
    ("spawn", "t", "alice", "--prompt", "work"),
    ("spawn", "t", "bob", "--prompt", "work", "--plan-mode"),
    ("send", "t", "alice", "hello"),
    ("send", "t", "lead", "a plan", "--type", "plan_approval_request", "--sender", "bob"),
    ("broadcast", "t", "everyone"),
    ("inbox", "t", "--json"),
    ("inbox", "t", "alice", "--peek"),
    ("task", "add", "t", "one"),
    ("task", "add", "t", "two", "--blocked-by", "1"),
    ("task", "update", "t", "1", "--owner", "alice", "--status", "in_progress"),
    ("task", "list", "t", "--json"),
    ("task", "show", "t", "2"),
    ("requests", "t", "--json"),
    ("shutdown", "t", "alice", "--reason", "done"),
    ("stop", "t", "bob", "--force"),
    ("restart", "t", "bob"),
    ("status", "--json"),
    ("logs", "t", "--json"),
    ("delete", "gone"),
)


def tour(root: str) -> None:
    """Run TOUR through typer's runner in this process, plus the paths that create the odd
    files: a plan approval, a rejected torn line, a rotated journal."""
    from typer.testing import CliRunner

    from teamctl.cli import app
    from teamd import requests

    runner = CliRunner()

    def run(*args: str) -> None:
        result = runner.invoke(app, ["--root", root, *args])
        if result.exit_code != 0:
            raise SystemExit(f"teamctl {' '.join(args)} failed: {result.output}"
                             f" {result.exception!r}")

    for args in TOUR:
        run(*args)
    ws = Workspace.at(root)
    plan = next(r for r in requests.list_requests(ws, "t") if r["kind"] == "plan_approval")
    run("approve", "t", plan["request_id"], "--feedback", "go")
    # a torn tail in an inbox: the next send moves it to *.rejected.jsonl
    with open(ws.store.paths.inbox("t", "alice"), "ab") as fh:
        fh.write(b'{"torn": ')
    run("send", "t", "alice", "after the torn line")
    # a tiny journal limit: the next events rotate into events.N.jsonl
    os.environ["TEAMD_EVENTS_MAX_BYTES"] = "1"
    os.environ["TEAMD_EVENTS_KEEP"] = "2"
    for i in range(3):
        run("send", "t", "alice", f"rotate {i}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "tour":
        tour(sys.argv[2])
    else:
        raise SystemExit("usage: helpers_proc.py tour ROOT")
