"""Helpers for end-to-end tests: a real `teamd run` subprocess against a real scripted
model server, and waiting on conditions with deadlines (never sleep-and-hope)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import psutil

from teamd import files, pidfile, roster
from teamd.errors import TeamdError
from teamd.layout import Workspace

T = TypeVar("T")


def wait_until(check: Callable[[], T], timeout: float = 10.0, what: str = "condition",
               interval: float = 0.01) -> T:
    """Return check()'s first truthy value, or fail naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def member(ws: Workspace, team: str, name: str) -> dict[str, Any]:
    return roster.get(roster.load(ws, team), name)


def live_pid(ws: Workspace, team: str, name: str) -> int | None:
    m = member(ws, team, name)
    return int(m["pid"]) if roster.is_live(m) else None


def journal(ws: Workspace, team: str) -> list[dict[str, Any]]:
    return files.read_jsonl(ws.events(team)).records


class Teamd:
    """A `teamd run` process for one workspace."""

    def __init__(self, ws: Workspace, env: dict[str, str], log_path: Path | None = None) -> None:
        self.ws = ws
        self.log_path = log_path or ws.root / "teamd.log"  # elsewhere when the root fills up
        self.log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "teamd", "run", "--root", str(ws.root)],
            env=env, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wait_until(lambda: pidfile.running(ws) or self.proc.poll() is not None, 30,
                   "teamd to start")
        if self.proc.poll() is not None:
            raise AssertionError(f"teamd exited {self.proc.returncode}:\n{self.output()}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")

    def terminate(self, timeout: float = 40) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        try:
            self.terminate()
        except subprocess.TimeoutExpired:
            self.kill()
        self.log.close()


def teamd_env(base_url: str, **settings: Any) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": "test-key",
                "PYTHONUNBUFFERED": "1"})
    for key, value in settings.items():
        env[f"TEAMD_{key.upper()}"] = str(value)
    return env


@contextmanager
def running_teamd(ws: Workspace, base_url: str, *, log_path: Path | None = None,
                  **settings: Any) -> Iterator[Teamd]:
    """Run teamd for the block; afterwards make sure nothing it started is left."""
    daemon = Teamd(ws, teamd_env(base_url, **settings), log_path)
    try:
        yield daemon
    finally:
        daemon.stop()
        reap_leftovers(ws)


def reap_leftovers(ws: Workspace) -> None:
    """Kill (by recorded pid and start time) any member process still alive: a test that
    failed half-way must not leave processes for the next one."""
    for team in ws.team_names():
        try:
            members = roster.load(ws, team)["members"]
        except TeamdError:
            continue  # a roster the test broke on purpose: its error is the one to show
        for m in members:
            proc = roster.process_of(m)
            if proc is not None:
                try:
                    proc.kill()
                except psutil.Error:
                    pass


def read_log(ws: Workspace, team: str, name: str) -> str:
    path = ws.member_log(team, name)
    return path.read_text(errors="replace") if path.exists() else ""


@contextmanager
def file_size_limit(limit: int) -> Iterator[None]:
    """RLIMIT_FSIZE for this process for the block: a write past `limit` bytes of any file
    is cut short and the next fails with EFBIG (Python ignores SIGXFSZ). A full disk for
    one process, without touching the disk."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
