"""One team on three hosts sharing a PostgreSQL store, through a kill, a freeze and a cut
(issue 24, CONTRACT §15): exact counts.

Three `teamd run --host` processes, each with a local directory of its own and, where the
machine allows (tests/netns.py), a network namespace and an address of its own, so the
scripted server's record says which host sent each request. Members take messages (each
runs a `bash` that appends the message's token to `ran.txt`) and tasks (completed with
`TaskUpdate`). Mid-run: host h0 is killed whole (SIGKILL of its `teamd` and members); host
h1 is frozen (SIGSTOP of its `teamd` and members past `host_timeout`, then SIGCONT); host
h2's database connections are cut (`pg_terminate_backend`). Then: every message shown to
its member's model exactly once, every task completed once with one owner, no tool call
run twice, and no member's requests from two hosts interleaved after a takeover.

The default suite runs its fast form (9 members, 90 messages, 18 tasks, about 30 s);
`TEAMD_HOSTS=full` runs issue 24's size (60 members, 2,000 messages, 300 tasks). Each run
prints its figures (with `-s`).
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from teamd import actions, board, roster
from teamd.agent.session import INTERRUPTED
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.faults.faultkit import Mail, assert_shown_once, assert_tasks_once, figure
from tests.harness import Teamd, teamd_env, tool_use, wait_until, wait_until_none
from tests.netns import Network
from tests.postgres import Cluster

TEAM = "farm"
FULL = os.environ.get("TEAMD_HOSTS") == "full"
pytestmark = pytest.mark.timeout(2400 if FULL else 300)


@dataclass(frozen=True)
class Size:
    members: int
    messages: int
    tasks: int


SIZE = Size(60, 2000, 300) if FULL else Size(9, 90, 18)
#: fast hosts: a heartbeat every 0.5 s, dead after 6 s of silence
HOSTS = {"host_heartbeat": 0.5, "host_timeout": 6}
#: each teamd's settings: the hosts', and members that stay up while the test runs
SETTINGS = {**HOSTS, "idle_timeout": 3600}
T = 600.0 if FULL else 180.0

NAMES = [f"m{i:02d}" for i in range(SIZE.members)]
PING = r"(?P<tok>MSG\d{5}x[0-9a-f]{6}) ping"


def both(*patterns: str) -> str:
    """A regex matching when every pattern is found, in any order (a turn's input is a
    tool's result and the messages taken in with it)."""
    return "".join(f"(?=[\\s\\S]*?{p})" for p in patterns)


def mine(name: str) -> str:
    return rf"#(?P<tid>\d+) \[in_progress\] owner={name}\b"


ECHO = tool_use("bash", command="echo {tok} >> ran.txt")
LOOK = tool_use("TaskList")
FINISH = tool_use("TaskUpdate", task_id="{int:tid}", status="completed")
#: what the scripted model does, first rule that matches: a turn bringing two things (a
#: message with a task, a result, or a call cut short) is answered for both, as a model
#: would — one answered for the first thing alone would leave the other undone
RULES = [
    {"name": "task+ping", "regex": r"<auto-claimed>Task #(?P<tid>\d+)[\s\S]*?" + PING,
     "reply": {"content": [FINISH, ECHO]}},
    # the board looked at after a cut (below), with a message taken in beside the result
    *({"name": f"resume+ping-{name}", "agent": name, "tool_result": "TaskList",
       "regex": both(mine(name), PING), "reply": {"content": [FINISH, ECHO]}}
      for name in NAMES),
    # a call cut short by a kill or a takeover, or a tool whose store connection was cut
    # under it: the model looks at the board and finishes its own task, if it has one
    *({"name": f"{why}+ping", "contains": text, "regex": PING,
       "reply": {"content": [LOOK, ECHO]}}
      for why, text in (("look", INTERRUPTED), ("look-again", "cannot reach the store"))),
    {"name": "ping", "regex": PING, "reply": {"content": [ECHO]}},
    {"name": "task", "regex": r"<auto-claimed>Task #(?P<tid>\d+)",
     "reply": {"content": [FINISH]}},
    {"name": "look", "contains": INTERRUPTED, "reply": {"content": [LOOK]}},
    {"name": "look-again", "contains": "cannot reach the store", "reply": {"content": [LOOK]}},
    *({"name": f"resume-{name}", "agent": name, "tool_result": "TaskList",
       "regex": mine(name), "reply": {"content": [FINISH]}} for name in NAMES),
]


@pytest.fixture
def net() -> Iterator[Network | None]:
    """Three namespaces where the machine allows; else None (then one address for all,
    and the requests' hosts are not told apart: said in the figures)."""
    if Network.why_not() is not None:
        yield None
        return
    made = Network.make(3)
    try:
        yield made
    finally:
        made.remove()


def tree(pid: int) -> list[psutil.Process]:
    """A host's processes: its `teamd` and everything under it."""
    try:
        top = psutil.Process(pid)
        return [top, *top.children(recursive=True)]
    except psutil.Error:
        return []


def freeze(pid: int) -> list[psutil.Process]:
    """SIGSTOP a whole host, as a paused machine stops: its `teamd` first (it forks no
    more), then its tree again and again until no process of it is left running (a
    member forked, or a tool started, while the tree was being read)."""
    top = psutil.Process(pid)
    top.send_signal(signal.SIGSTOP)
    stopped: dict[int, psutil.Process] = {pid: top}
    while True:
        fresh = [p for p in tree(pid) if p.pid not in stopped]
        if not fresh:
            return list(stopped.values())
        for proc in fresh:
            try:
                proc.send_signal(signal.SIGSTOP)
                stopped[proc.pid] = proc
            except psutil.Error:
                pass


def members_on(ws: Workspace, host: str) -> list[str]:
    return [m["name"] for m in roster.load(ws, TEAM)["members"] if m.get("host") == host]


def hosts_by_name(ws: Workspace) -> dict[str, Any]:
    return {h["name"]: h for h in ws.store.list_hosts(HOSTS["host_timeout"])}


def unsettled(ws: Workspace) -> list[str]:
    """What is not done yet: tasks not completed, members not placed on an alive host, not
    at rest (idle, or asleep after `idle_timeout`), or with mail waiting."""
    out = [f"task {t['id']} {t['status']} owned by {t['owner']}"
           for t in board.list_tasks(ws, TEAM) if t["status"] != "completed"]
    alive = {n for n, h in hosts_by_name(ws).items() if h["alive"]}
    for m in roster.load(ws, TEAM)["members"]:
        if m.get("host") not in alive or m["status"] not in ("idle", "sleeping") \
                or ws.store.has_mail(TEAM, m["name"]):
            out.append(f"{m['name']} on {m.get('host')}: {m['status']}, mail "
                       f"{ws.store.has_mail(TEAM, m['name'])}")
    return out


def interleaved(server: ScriptedServer) -> list[str]:
    """Members whose requests came from one host, then another, then the first again."""
    seen: dict[str, list[str]] = {}
    for r in sorted(server.requests, key=lambda r: r["received_at"]):
        hosts = seen.setdefault(str(r["agent"]), [])
        if not hosts or hosts[-1] != r["peer"]:
            hosts.append(r["peer"])
    return [f"{agent}: {' → '.join(hosts)}" for agent, hosts in seen.items()
            if len(hosts) != len(set(hosts))]


def test_three_hosts_through_a_kill_a_freeze_and_a_cut(
        tmp_path: Path, pg_url: str, pg_cluster: Cluster, net: Network | None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAMD_STORE", pg_url)
    workdir = tmp_path / "work"
    workdir.mkdir()
    ws = Workspace.at(tmp_path / "ctl", store=pg_url)
    ws.root.mkdir()
    address = net.server_address if net is not None else "127.0.0.1"
    with ScriptedServer({"rules": RULES, "default": {"content": [
            {"type": "text", "text": "Done."}]}}, host=address) as server:
        daemons: dict[str, Teamd] = {}

        def start(i: int) -> Teamd:
            root = tmp_path / f"host-h{i}"
            root.mkdir(exist_ok=True)
            daemon = Teamd(Workspace.at(root, store=pg_url), teamd_env(server.url, **SETTINGS),
                           host=f"h{i}", prefix=net.prefix(i) if net is not None else ())
            daemons[f"h{i}"] = daemon
            return daemon

        try:
            for i in range(3):
                start(i)
            actions.create_team(ws, TEAM, "three hosts")
            names = NAMES
            for name in names:
                actions.spawn(ws, TEAM, name, "Answer each message.", cwd=str(workdir))
            wait_until(lambda: all(m.get("host") and m["status"] == "idle"
                                   for m in roster.load(ws, TEAM)["members"]), T,
                       "every member placed and idle")
            spread = Counter(m["host"] for m in roster.load(ws, TEAM)["members"])
            assert set(spread) == {"h0", "h1", "h2"}, spread

            mail = Mail(ws, TEAM)
            third = SIZE.messages // 3

            def work(n_messages: int, n_tasks: int) -> None:
                for k in range(n_messages):
                    mail.send(names[(len(mail.sent) + k) % len(names)], "ping")
                for _ in range(n_tasks):
                    actions.add_task(ws, TEAM, f"job {len(board.list_tasks(ws, TEAM)) + 1}")

            # 1. h0 killed whole, mid-run
            work(third, SIZE.tasks // 3)
            on_h0 = members_on(ws, "h0")
            doomed = tree(daemons["h0"].pid)
            for proc in doomed:
                try:
                    proc.kill()
                except psutil.Error:
                    pass
            daemons["h0"].proc.wait(10)
            killed_at = time.monotonic()
            wait_until(lambda: not set(members_on(ws, "h0")), HOSTS["host_timeout"] + 10,
                       "h0's members placed elsewhere")
            wait_until(lambda: all(roster.get(roster.load(ws, TEAM), n)["status"] == "idle"
                                   for n in on_h0), T, "h0's members answering again")
            failover = time.monotonic() - killed_at

            # 2. h1 frozen past host_timeout, then woken
            work(third, SIZE.tasks // 3)
            on_h1 = members_on(ws, "h1")
            frozen = freeze(daemons["h1"].pid)
            wait_until(lambda: not hosts_by_name(ws)["h1"]["held"], HOSTS["host_timeout"] + 10,
                       "h1 taken over")
            taken_at = time.time()
            wait_until(lambda: not set(members_on(ws, "h1")) & set(on_h1), T,
                       "h1's members placed elsewhere")
            for proc in frozen:
                try:
                    proc.send_signal(signal.SIGCONT)
                except psutil.Error:
                    pass
            wait_until(lambda: hosts_by_name(ws)["h1"]["held"] and hosts_by_name(ws)["h1"][
                "alive"], T, "h1 joined again with a new lease")
            def gone(proc: psutil.Process) -> bool:
                try:
                    return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
                except psutil.Error:
                    return True

            # every process h1 ran when it froze but its teamd: ended on waking
            wait_until(lambda: all(gone(p) for p in frozen[1:]), T, "h1's old processes gone")
            ended = frozen[1:]
            assert daemons["h1"].proc.poll() is None  # the teamd lives on, rejoined
            assert "writing nothing more for them" in daemons["h1"].output()

            # 3. h2's database connections cut
            work(SIZE.messages - 2 * third, SIZE.tasks - 2 * (SIZE.tasks // 3))
            cut = pg_cluster.terminate_application(pg_url, "teamd h2")
            assert cut > 0, "no connection of h2 was cut"

            try:
                wait_until_none(lambda: unsettled(ws), T, "every message and task done",
                                "not done")
            except AssertionError:
                stuck = {t["owner"] for t in board.list_tasks(ws, TEAM)
                         if t["status"] != "completed"} | {
                    line.split()[0] for line in unsettled(ws) if not line.startswith("task ")}
                for who in sorted(str(s) for s in stuck):
                    print(f"--- {who}:", [(r["peer"], round(r["received_at"], 3), r["rule"],
                                           r["last_user_text"][:120])
                                          for r in server.requests if r["agent"] == who])
                    print(ws.store.read_session(TEAM, who)[-6:])
                    print(roster.get(roster.load(ws, TEAM), who))
                raise
        finally:
            for daemon in daemons.values():
                for proc in tree(daemon.pid):  # nothing stays stopped
                    try:
                        proc.send_signal(signal.SIGCONT)
                    except psutil.Error:
                        pass
                daemon.stop()

        # exact counts
        shown = assert_shown_once(ws, server, mail.sent, TEAM)
        done = assert_tasks_once(ws, TEAM)
        ran = Counter((workdir / "ran.txt").read_text().split())
        twice = {tok: n for tok, n in ran.items() if n > 1}
        assert not twice, f"tool calls run twice: {twice}"
        interrupted = sum(1 for name in names for r in ws.store.read_session(TEAM, name)
                          if INTERRUPTED in str(r))
        assert set(ran) <= {s.token for s in mail.sent}
        if net is not None:
            bad = interleaved(server)
            assert not bad, f"requests of one member from two hosts interleaved: {bad}"
            # nothing from the frozen host for the members it had, once taken over
            stale = [(r["agent"], r["received_at"] - taken_at) for r in server.requests
                     if r["agent"] in on_h1 and r["peer"] == net.address(1)
                     and r["received_at"] > taken_at]
            assert not stale, f"requests from h1 after its takeover: {stale}: " + str([
                (r["agent"], r["peer"], round(r["received_at"] - taken_at, 3), r["rule"],
                 r["last_user_text"][:60]) for r in server.requests
                if r["agent"] in {a for a, _ in stale}])
        figure("hosts", f"{SIZE.members} members on 3 hosts "
               f"({'namespaces' if net else 'one address'}), {shown} messages shown once, "
               f"{done} tasks completed once, {len(ran)} tool calls run once "
               f"({interrupted} interrupted, not re-run); h0 killed: {len(doomed)} processes "
               f"({len(on_h0)} members) resumed elsewhere in {failover:.1f} s; h1 frozen: "
               f"{len(frozen)} processes, {len(ended)} ended on waking; h2: {cut} "
               "connections cut")
