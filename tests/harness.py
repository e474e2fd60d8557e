"""Helpers for end-to-end tests: a real `teamd run` subprocess against a real scripted
model server, and waiting on conditions with deadlines (never sleep-and-hope).

The one home of the helpers test files share (fixtures live in tests/conftest.py): making a
team, waiting on a member's status, reading the journal and the lead's inbox, scripting the
model's replies, finding and waiting out processes, running `teamctl` in this process,
taking room to write away (`file_size_limit`, `fill`)."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import psutil
from typer.testing import CliRunner, Result

from teamctl.cli import app
from teamd import actions, files, inbox, pidfile, roster
from teamd.errors import TeamdError
from teamd.layout import Workspace

if TYPE_CHECKING:
    from teamd.agent.tools import ToolResult

V = TypeVar("V")

TEAM = "crew"  #: the team a test makes unless it names another
T = 20.0  #: generous deadline for anything that normally takes well under a second
PROMPT = "Wait for work from the lead."  #: a member's prompt unless a test gives another


def wait_until(check: Callable[[], V], timeout: float = 10.0, what: str = "condition",
               interval: float = 0.01) -> V:
    """Return check()'s first truthy value, or fail naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def wait_until_none(find: Callable[[], list[str]], timeout: float, what: str, failure: str,
                    interval: float = 0.1) -> None:
    """Wait until `find()` reports nothing (what: the condition awaited); at the deadline,
    fail with `failure` and what `find()` reported last."""
    last: list[str] = []

    def clear() -> bool:
        nonlocal last
        last = find()
        return not last

    try:
        wait_until(clear, timeout, what, interval)
    except AssertionError:
        raise AssertionError(f"{failure}: {last}") from None


def member(ws: Workspace, team: str, name: str) -> dict[str, Any]:
    return roster.get(roster.load(ws, team), name)


def live_pid(ws: Workspace, team: str, name: str) -> int | None:
    m = member(ws, team, name)
    return int(m["pid"]) if roster.is_live(m) else None


def journal(ws: Workspace, team: str) -> list[dict[str, Any]]:
    return ws.store.read_journal(team)


class Teamd:
    """A `teamd run` process for one workspace."""

    def __init__(self, ws: Workspace, env: dict[str, str], log_path: Path | None = None,
                 host: str | None = None, prefix: Sequence[str] = ()) -> None:
        """`host`: `teamd run --host HOST` (a store with hosts); `prefix`: what runs it
        (`ip netns exec NS`)."""
        self.ws = ws
        self.host = host
        self.log_path = log_path or ws.root / "teamd.log"  # elsewhere when the root fills up
        self.log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        store = ["--store", ws.store_url] if ws.store_url else []  # `teamd run --store URL`
        named = ["--host", host] if host else []
        self.proc = subprocess.Popen(
            [*prefix, sys.executable, "-m", "teamd", "run", "--root", str(ws.root), *store,
             *named], env=env, stdout=self.log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL)
        wait_until(lambda: self.started() or self.proc.poll() is not None, 30,
                   "teamd to start")
        if self.proc.poll() is not None:
            raise AssertionError(f"teamd exited {self.proc.returncode}:\n{self.output()}")

    def started(self) -> bool:
        if self.host is None:
            return pidfile.running(self.ws) is not None
        return any(h["name"] == self.host and h.get("pid") == self.proc.pid and h["alive"]
                   for h in self.ws.store.list_hosts(60))

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
    for team in ws.store.team_names():
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


def fill(disk: Path) -> Path:
    """Write a file until the disk refuses another byte; returns it (unlink = space back)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        block = b"\0" * (1 << 16)
        while True:
            try:
                os.write(fd, block)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
    finally:
        os.close(fd)
    assert shutil.disk_usage(disk).free == 0
    return filler


# -- teams and members -------------------------------------------------------------------
def make_team(ws: Workspace, workdir: Path | str | None, *names: str, team: str = TEAM,
              prompt: str = PROMPT, **spawn: Any) -> str:
    """Create `team` and add `names` to it, each working in `workdir` (None: spawn's own
    default). `{name}` in `prompt` stands for the member's name; `spawn` goes to
    `actions.spawn` (plan_mode=True, role=...). Returns the team's name."""
    actions.create_team(ws, team)
    cwd = None if workdir is None else str(workdir)
    for name in names:
        actions.spawn(ws, team, name, prompt.replace("{name}", name), cwd=cwd, **spawn)
    return team


def wait_status(ws: Workspace, name: str, want: str, timeout: float = T,
                team: str = TEAM) -> None:
    wait_until(lambda: member(ws, team, name)["status"] == want, timeout,
               f"{name} to be {want}")


def make_live(ws: Workspace, team: str, name: str, proc: psutil.Process | None = None,
              status: str = "idle") -> None:
    """Point `name`'s roster entry at `proc` (default: this test process), so it counts as
    a live member in `status`."""
    proc = proc or psutil.Process()

    def change(config: files.Json) -> None:
        roster.get(config, name).update(pid=proc.pid, pid_create_time=proc.create_time(),
                                        status=status)

    roster.update(ws, team, change)


def events_of(ws: Workspace, name: str, *events: str, team: str = TEAM
              ) -> list[dict[str, Any]]:
    """`name`'s journal records of any of `events`; name "*": every member's."""
    return [e for e in journal(ws, team) if e.get("event") in events
            and (name == "*" or e.get("member") == name)]


def exit_codes(ws: Workspace, name: str) -> list[tuple[Any, Any]]:
    return [(e["code"], e["signal"]) for e in events_of(ws, name, "exited")]


def assert_shut_down(ws: Workspace, name: str, pid: int) -> None:
    """`name` left by the shutdown handshake: shutdown, reaped, exit 0, no restart."""
    wait_status(ws, name, "shutdown")
    m = member(ws, TEAM, name)
    assert m["desired"] == "stopped"
    assert live_pid(ws, TEAM, name) is None
    wait_until(lambda: not psutil.pid_exists(pid), T, f"pid {pid} to be reaped")
    # the exit is journaled once its status is written: wait for the line, then judge it
    assert wait_until(lambda: exit_codes(ws, name), T, "the exit journaled") == [(0, None)]
    assert m["restarts"] == 0


# -- the lead's inbox --------------------------------------------------------------------
def lead_inbox(ws: Workspace, team: str = TEAM) -> list[dict[str, Any]]:
    return inbox.peek(ws, team, "lead")


def lead_says(ws: Workspace, text: str, team: str = TEAM) -> list[dict[str, Any]]:
    """The lead's messages whose content is exactly `text`."""
    return [m for m in lead_inbox(ws, team) if m["content"] == text]


def lead_got(ws: Workspace, pred: Any, what: str, timeout: float = T,
             team: str = TEAM) -> dict[str, Any]:
    """Wait for a message in the lead's inbox that satisfies `pred`; the first such."""
    def find() -> list[dict[str, Any]]:
        return [m for m in lead_inbox(ws, team) if pred(m)]
    return wait_until(find, timeout, what)[0]


# -- the model's side: scripted replies and what the server saw -------------------------
def tool_use(name: str, **inp: Any) -> dict[str, Any]:
    return {"type": "tool_use", "name": name, "input": inp}


def send_to_lead(text: str) -> dict[str, Any]:
    """A scripted reply: one SendMessage of `text` to the lead."""
    return {"content": [tool_use("SendMessage", recipient="lead", content=text)]}


def turn_text(turn: dict[str, Any]) -> str:
    """The text of a conversation turn: its text blocks and tool results."""
    content = turn.get("content")
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if block.get("type") == "text":
            parts.append(block["text"])
        elif block.get("type") == "tool_result":
            inner = block.get("content")
            parts.append(inner if isinstance(inner, str) else json.dumps(inner))
    return "\n".join(parts)


def last_user(record: dict[str, Any]) -> dict[str, Any]:
    """A recorded request's last turn: the member's new input."""
    return record["body"]["messages"][-1]


def asked(text: str, agent: str | None = None) -> Any:
    """A wait_for predicate: the request's last user turn (its new input) holds `text`."""
    def pred(r: dict[str, Any]) -> bool:
        return (agent is None or r["agent"] == agent) and text in turn_text(last_user(r))
    return pred


# -- processes ---------------------------------------------------------------------------
def procs_with(text: str) -> list[psutil.Process]:
    """Every process with `text` in its command line."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if any(text in part for part in p.info["cmdline"] or []):
                found.append(p)
        except psutil.Error:
            continue
    return found


def gone(proc: psutil.Process | int) -> bool:
    """No longer running (a zombie counts as gone: it runs nothing and holds nothing).
    A psutil.Process remembers its start time, so a reused pid is not taken for it."""
    try:
        if isinstance(proc, int):
            proc = psutil.Process(proc)
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


class Reader:
    """Collects a subprocess's stdout lines on a thread, to wait on them with deadlines."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.append(raw.decode().rstrip("\n"))

    def wait_for(self, text: str, timeout: float = T) -> str:
        return wait_until(lambda: next((x for x in self.lines if text in x), None), timeout,
                          f"{text!r} in the output")


def attached(ws: Workspace, name: str, team: str = TEAM) -> Reader:
    """The real `teamctl attach TEAM NAME` running (without settings or keys from this
    environment), its lines collected: `reader.proc` is the process."""
    from tests.helpers_proc import TEAMCTL, clean_env

    return Reader(subprocess.Popen([str(TEAMCTL), "--root", str(ws.root), "attach", team, name],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   env=clean_env()))


def ok(result: ToolResult) -> str:
    """A tool's result that must not be an error; its content."""
    assert not result.is_error, result.content
    return result.content


# -- teamctl in this process, and its status table ---------------------------------------
def cli(where: Path | Workspace, *args: str, input: str | bytes | None = None,
        ok: bool = True) -> Result:
    """`teamctl --root WHERE ARGS` through typer's runner; with `ok`, exit 0 is checked."""
    root = where.root if isinstance(where, Workspace) else where
    result = CliRunner().invoke(app, ["--root", str(root), *args], input=input)
    if ok:
        assert result.exit_code == 0, (result.output, result.exception)
    return result


ESC = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
HEADERS = ("NAME", "STATUS", "TASK", "UPTIME", "PID", "CPU%", "PSS", "TOKENS", "COST",
           "RESTARTS", "NOTES", "LAST ERROR")


def strip(text: str) -> str:
    """`text` without its terminal escape sequences."""
    return ESC.sub("", text)


def cells(text: str, name: str) -> dict[str, str]:
    """The cells of member `name`'s row, cut at the header's column starts (measured on
    the text that shows): a misaligned column gives a cell that does not match."""
    lines = strip(text).splitlines()
    header = next(line for line in lines if line.startswith("NAME "))
    starts = [header.index(h) for h in HEADERS]
    row = next(line for line in lines if line.startswith(name + " "))
    ends = [*starts[1:], None]
    return {h: row[s:e].strip() for h, s, e in zip(HEADERS, starts, ends, strict=True)}


# -- what a demo printed, pasted back -----------------------------------------------------
CLOCK = re.compile(r"^\d\d:\d\d:\d\d ")


def paste_back(out: str, cwd: Path, env: dict[str, str]) -> dict[str, str]:
    """Do what a person does with a demo's ending: open every path it lists (it must
    exist, seen from `cwd`) and run every command it printed — each line under "Try:" and
    each `backticked` one outside the live event lines — through `/bin/sh -c` in `cwd`;
    each must exit 0 and print something. Returns {command: its output}."""
    lines = out.splitlines()
    done = next(i for i, line in enumerate(lines) if line.startswith("Done. Everything"))
    tried = lines.index("Try:", done)
    paths = [line.split()[0] for line in lines[done + 1:tried]]
    assert paths, out
    for path in paths:
        assert (cwd / path).exists(), f"{path} (printed by the demo) does not exist"
    commands = [line.strip() for line in lines[tried + 1:] if line.startswith("  ")]
    commands += [c for line in lines if not CLOCK.match(line)
                 for c in re.findall(r"`([^`]+)`", line)]
    assert commands, out
    outputs = {}
    for command in commands:
        ran = subprocess.run(["/bin/sh", "-c", command], cwd=cwd, env=env,
                             capture_output=True, text=True, timeout=60, check=False)
        assert ran.returncode == 0, (command, ran.stdout, ran.stderr)
        assert ran.stdout.strip(), (command, ran.stderr)
        outputs[command] = ran.stdout
    return outputs
