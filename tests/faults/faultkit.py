"""The fault suite's instruments: how a scenario lands its fault at the intended moment and
how it checks, afterwards, the promises every scenario keeps (tests/faults/README.md).

- `Mail` sends messages with a unique token each and remembers them; `assert_shown_once`
  then proves each was shown to its recipient's model exactly once: its id in exactly one
  `inbox` record of the recipient's session file, and its token in exactly one user turn of
  the conversation the scripted server saw (CONTRACT §6 "Resume").
- `assert_tasks_once`: no task owned by two members at once, none completed twice.
- `assert_statuses_true`: a running status only with a live process (pid + start time) that
  is the supervisor's child, and no live process behind any other status; `statuses_seen`:
  every status a member's file showed while a fault lasted.
- `strays`: processes of the test (their cwd is under its tmp_path) outside the
  supervisor's tree.
- `strike`: SIGSTOP a process at random moments and SIGKILL it only when a condition holds
  while it stands still (it holds a lock, it claimed a task its session does not know yet):
  a kill that provably landed inside a window a few milliseconds wide.
"""

from __future__ import annotations

import os
import random
import re
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import psutil

from teamd import actions, board, roster
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests import harness
from tests.harness import Teamd, journal, turn_text, wait_until, wait_until_none

TEAM = "crew"
T = 60.0  # generous: the machine that runs this may be loaded many times over
#: harness.wait_status with the suite's deadline
wait_status = partial(harness.wait_status, timeout=T)


# -- messages ------------------------------------------------------------------------------
@dataclass
class Sent:
    recipient: str
    id: str
    token: str


@dataclass
class Mail:
    """Messages sent by the test, each carrying a unique token the model will see."""

    ws: Workspace
    team: str = TEAM
    sent: list[Sent] = field(default_factory=list)

    def send(self, to: str, text: str = "", sender: str = "lead") -> Sent:
        token = f"MSG{len(self.sent):05d}x{uuid.uuid4().hex[:6]}"
        msg = actions.send(self.ws, self.team, to, f"{token} {text}".strip(), sender=sender)
        item = Sent(to, msg["id"], token)
        self.sent.append(item)
        return item


def idle(ws: Workspace, name: str) -> None:
    wait_status(ws, name, "idle")


def session_inbox_ids(ws: Workspace, name: str, team: str = TEAM) -> list[str]:
    """Ids of every message recorded as taken in, over the whole session file (records
    before a compaction included; a compaction's carried copies are not new intakes)."""
    return [m["id"] for r in ws.store.read_session(team, name)
            if r.get("type") == "inbox" for m in r["messages"]]


def showings(requests: list[dict[str, Any]], agent: str, token: str) -> set[tuple[str, int]]:
    """Where `token` sat in the conversations `agent` sent: (conversation head, user-turn
    index) pairs. A message shown once sits in one user turn, at one index, in every
    request that carries it (a request re-sent after a restart or a retry repeats that same
    turn). A compaction starts a new conversation (a new head) in which the message may be
    carried over into the head: that is the same showing, not a second one."""
    found: set[tuple[str, int]] = set()
    carried = False
    for r in requests:
        if r["agent"] != agent or not isinstance(r.get("body"), dict):
            continue
        turns = r["body"]["messages"]
        head = turn_text(turns[0])[:400] if turns else ""
        here = [i for i, m in enumerate(turns) if m["role"] == "user" and token in turn_text(m)]
        assert len(here) <= 1, f"{token} in {len(here)} user turns of one request of {agent}"
        for i in here:
            if i == 0 and "was compacted" in head:
                carried = True
            else:
                found.add((head, i))
    if not found and carried:
        found.add(("(compacted head)", 0))
    return found


TOKEN_RE = re.compile(r"MSG\d{5}x[0-9a-f]{6}")


def all_showings(requests: list[dict[str, Any]], agent: str
                 ) -> dict[str, set[tuple[str, int]]]:
    """`showings` of every `Mail` token at once (one pass over the requests: the soak
    checks thousands of messages)."""
    found: dict[str, set[tuple[str, int]]] = {}
    carried: set[str] = set()
    for r in requests:
        if r["agent"] != agent or not isinstance(r.get("body"), dict):
            continue
        turns = r["body"]["messages"]
        head = turn_text(turns[0])[:400] if turns else ""
        seen: set[str] = set()
        for i, m in enumerate(turns):
            if m["role"] != "user":
                continue
            for token in set(TOKEN_RE.findall(turn_text(m))):
                assert token not in seen, f"{token} in two user turns of one request"
                seen.add(token)
                if i == 0 and "was compacted" in head:
                    carried.add(token)
                else:
                    found.setdefault(token, set()).add((head, i))
    for token in carried - set(found):
        found[token] = {("(compacted head)", 0)}
    return found


def assert_shown_once(ws: Workspace, server: ScriptedServer, sent: list[Sent],
                      team: str = TEAM) -> int:
    """Every message in `sent` was shown to its recipient's model exactly once; returns how
    many were checked."""
    requests = server.requests
    ids: dict[str, Counter[str]] = {}
    shown: dict[str, dict[str, set[tuple[str, int]]]] = {}
    for item in sent:
        if item.recipient not in ids:
            ids[item.recipient] = Counter(session_inbox_ids(ws, item.recipient, team))
            shown[item.recipient] = all_showings(requests, item.recipient)
        count = ids[item.recipient][item.id]
        assert count == 1, f"{item.token} ({item.id}) taken in {count} times by {item.recipient}"
        where = shown[item.recipient].get(item.token, set())
        assert len(where) == 1, f"{item.token} shown {len(where)} times to {item.recipient}"
    return len(sent)


# -- tasks ---------------------------------------------------------------------------------
def assert_tasks_once(ws: Workspace, team: str = TEAM, *, all_done: bool = True) -> int:
    """No task owned by two members at once (a claim only after the previous owner's
    release), none completed twice; with `all_done`, every task completed. Returns the
    number of tasks completed. The task files are the truth; the journal shows what
    happened in between (a kill -9 between a task's write and its journal line may cost
    that line: `journal_gaps`)."""
    owner: dict[int, str | None] = {}
    completed: dict[int, int] = {}
    for e in journal(ws, team):
        tid = e.get("task_id")
        if e["event"] == "task_claimed":
            assert owner.get(tid) is None, f"task {tid} claimed by {e['member']} while " \
                                           f"{owner.get(tid)} owned it"
            owner[tid] = e["member"]
        elif e["event"] == "task_released":
            owner[tid] = None
        elif e["event"] == "task_completed":
            completed[tid] = completed.get(tid, 0) + 1
    twice = {tid: n for tid, n in completed.items() if n > 1}
    assert not twice, f"completed more than once: {twice}: " + "; ".join(
        str(e) for e in journal(ws, team) if e.get("task_id") in twice)
    tasks = board.list_tasks(ws, team)
    assert set(completed) <= {t["id"] for t in tasks if t["status"] == "completed"}
    if all_done:
        assert [t["id"] for t in tasks if t["status"] != "completed"] == []
    return sum(t["status"] == "completed" for t in tasks)


def journal_gaps(ws: Workspace, team: str = TEAM) -> list[int]:
    """Completed tasks whose `task_completed` line is not in the journal."""
    logged = {e.get("task_id") for e in journal(ws, team) if e["event"] == "task_completed"}
    return [t["id"] for t in board.list_tasks(ws, team)
            if t["status"] == "completed" and t["id"] not in logged]


# -- statuses and processes ----------------------------------------------------------------
def status_lies(ws: Workspace, daemon: Teamd | None) -> list[str]:
    """What the roster says that is not true right now (empty when all is true)."""
    lies = []
    for team in ws.store.team_names():
        for m in roster.load(ws, team)["members"]:
            proc = roster.process_of(m)
            running = m["status"] in roster.RUNNING_STATUSES
            if running and proc is None:
                lies.append(f"{m['name']} is {m['status']} with no live process")
            elif not running and proc is not None:
                lies.append(f"{m['name']} is {m['status']} but pid {proc.pid} runs")
            elif proc is not None and daemon is not None and proc.ppid() != daemon.pid:
                lies.append(f"{m['name']}'s pid {proc.pid} is not teamd's child")
    return lies


def assert_statuses_true(ws: Workspace, daemon: Teamd | None, timeout: float = T) -> None:
    """The roster tells the truth, once transitions in flight have landed."""
    wait_until_none(lambda: status_lies(ws, daemon), timeout, "the roster to tell the truth",
                    "statuses untrue")


@contextmanager
def statuses_seen(ws: Workspace, name: str, team: str = TEAM) -> Iterator[list[str]]:
    """Every status `name`'s file shows while the block runs, in order, repeats dropped:
    read on a thread every few milliseconds, so a status that lasts a moment is seen too
    (through a fault that keeps the journal from saying so)."""
    seen: list[str] = []
    trouble: list[BaseException] = []
    done = threading.Event()

    def watch() -> None:
        try:
            while True:
                status = harness.member(ws, team, name)["status"]
                if not seen or seen[-1] != status:
                    seen.append(status)
                if done.wait(0.005):
                    return
        except BaseException as exc:  # a reader that stopped would see nothing more
            trouble.append(exc)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    yield seen
    done.set()
    thread.join(T)
    if trouble:
        raise AssertionError(f"could not follow {name}'s status") from trouble[0]


def processes_of_test(tmp_path: Path) -> list[psutil.Process]:
    """Processes this test started, directly or not: their working directory is under its
    tmp_path (the pytest process itself aside)."""
    mine = []
    base = str(tmp_path)
    for p in psutil.process_iter():
        if p.pid == os.getpid():
            continue
        try:
            if p.cwd().startswith(base) and p.status() != psutil.STATUS_ZOMBIE:
                mine.append(p)
        except psutil.Error:
            continue
    return mine


def strays(tmp_path: Path, daemon: Teamd | None) -> list[str]:
    """The test's processes that are not the supervisor or in its tree."""
    tree: set[int] = set()
    if daemon is not None and daemon.proc.poll() is None:
        try:
            top = psutil.Process(daemon.pid)
            tree = {top.pid, *(c.pid for c in top.children(recursive=True))}
        except psutil.Error:
            pass
    out = []
    for p in processes_of_test(tmp_path):
        if p.pid not in tree:
            try:
                out.append(f"{p.pid} {' '.join(p.cmdline())[:120]}")
            except psutil.Error:
                continue
    return out


def assert_no_strays(tmp_path: Path, daemon: Teamd | None, timeout: float = T) -> None:
    """Nothing of the test runs outside the supervisor's tree (with no supervisor: nothing
    at all), once processes being torn down are gone."""
    wait_until_none(lambda: strays(tmp_path, daemon), timeout, "no stray process",
                    "processes outside the supervisor's tree")


# -- landing a fault -----------------------------------------------------------------------
def in_flight(server: ScriptedServer, pred: Callable[[dict[str, Any]], bool], hold: float,
              nth: int = 0, timeout: float = T) -> dict[str, Any]:
    """Wait for the `nth` (from 0) request matching `pred`, which the server holds for
    `hold` s; returns it while it is provably still held (a kill now lands in the call)."""
    record = wait_until(lambda: [r for r in server.requests if pred(r)][nth:], timeout,
                        f"request #{nth} to be in flight", interval=0.01)[0]
    assert time.time() < record["received_at"] + hold - 1, "the call ended before the test " \
                                                           "could act inside it"
    return record


def restarted(ws: Workspace, name: str, old: int, team: str = TEAM,
              timeout: float = T) -> int:
    """The new live pid of `name` once it was started again after `old` died."""
    def new() -> int:
        m = roster.find(roster.load(ws, team), name)
        proc = roster.process_of(m) if m else None
        return proc.pid if proc is not None and proc.pid != old else 0

    return wait_until(new, timeout, f"{name} to be started again", interval=0.02)


def stopped(pid: int, timeout: float = 5.0) -> bool:
    """Wait until `pid` is really stopped (SIGSTOP is delivered asynchronously)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_STOPPED:
                return True
        except psutil.Error:
            return False
        time.sleep(0.001)
    return False


def strike(pid: int, hit: Callable[[], bool], timeout: float, pause: float = 0.05) -> bool:
    """Freeze `pid` at random moments; SIGKILL it (True) the first time `hit()` holds while
    it is frozen, else let it go on. False if no moment was caught within `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(random.uniform(0, pause))
        try:
            os.kill(pid, signal.SIGSTOP)
        except ProcessLookupError:
            return False
        try:
            if stopped(pid) and hit():
                os.kill(pid, signal.SIGKILL)
                return True
        finally:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
    return False


def holds_flock(pid: int, path: Path) -> bool:
    """Does `pid` hold the flock on `path` (/proc/locks)?"""
    try:
        inode = os.stat(path).st_ino
    except FileNotFoundError:
        return False
    with open("/proc/locks") as fh:
        for line in fh:
            parts = line.split()
            # "1: FLOCK  ADVISORY  WRITE 1234 00:2d:5678 0 EOF" (a "->" marks a waiter)
            if "->" in parts or len(parts) < 6 or parts[1] != "FLOCK":
                continue
            if parts[4] == str(pid) and parts[5].rsplit(":", 1)[-1] == str(inode):
                return True
    return False


def figure(label: str, value: Any) -> None:
    """One line of the scenario's figures (shown with -s, and in -rA's captured output)."""
    print(f"[fault figure] {label}: {value}")
