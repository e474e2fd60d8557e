"""The bench's laboratory: a workspace on disk, the scripted model server, a real
`teamd run`, and the seed-design teammates to race against it.

Everything is real: `teamd run` is a subprocess (tests/harness.py), teammates are its forks,
the model server answers over HTTP, the seed members are fresh `python -m` interpreters.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any

import psutil

from bench.common import Context, bench_env
from teamd import actions, events, inbox, roster
from teamd.files import Json
from teamd.layout import LEAD, Workspace
from teamd.proc import stop_subprocess
from teamd.scripted import ScriptedServer
from tests.harness import running_teamd, wait_until

TEAM = "bench"
TEAMCTL = Path(sys.executable).parent / "teamctl"


def carries(record: dict[str, Any], text: str) -> bool:
    """Does the request's last user turn (its new input) carry `text`?"""
    return text in json.dumps(record["body"]["messages"][-1]["content"])


def is_from(name: str, record: dict[str, Any]) -> bool:
    return bool(record["agent"] == name)


class Lab:
    """`with Lab(ctx) as lab:` — server up, team created, teamd running (unless teamd=False)."""

    def __init__(self, ctx: Context, *, teamd: bool = True, **settings: Any) -> None:
        self.ctx = ctx
        self.root = ctx.workdir / "ws"
        self.ws = Workspace.at(self.root)
        self.seed_root = ctx.workdir / "seed"
        self.settings = {"idle_timeout": 3600, **settings}
        self.with_teamd = teamd
        self.server = ScriptedServer({"rules": []})
        self.daemon: Any = None
        self.seeds: dict[str, subprocess.Popen[bytes]] = {}
        self._stack = ExitStack()

    def __enter__(self) -> Lab:
        bench_env()
        self.root.mkdir(parents=True, exist_ok=True)
        (self.seed_root / ".teams" / TEAM).mkdir(parents=True, exist_ok=True)
        (self.seed_root / ".tasks" / TEAM).mkdir(parents=True, exist_ok=True)
        self._stack.enter_context(self.server)
        self._stack.callback(self.stop_seeds)
        actions.create_team(self.ws, TEAM, "benchmark team")
        if self.with_teamd:
            self.daemon = self._stack.enter_context(
                running_teamd(self.ws, self.server.url, **self.settings))
            # its pid file appears before it has imported and warmed the SDK; the journal
            # line comes after, right before its first reconcile
            wait_until(self.supervisor_started, 60, "teamd to finish preloading",
                       interval=0.01)
        return self

    def supervisor_started(self) -> bool:
        return any(r.get("event") == "supervisor_started"
                   for r in self.ws.store.read_journal(TEAM))

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stack.close()

    # -- our teammates -------------------------------------------------------------------
    def member(self, name: str) -> Json:
        return roster.get(roster.load(self.ws, TEAM), name)

    def spawn(self, name: str, prompt: str | None = None) -> None:
        actions.spawn(self.ws, TEAM, name, prompt or f"You are {name}. Wait for instructions.",
                      cwd=str(self.ctx.workdir))

    def is_idle(self, name: str) -> bool:
        m = self.member(name)
        return m["status"] == "idle" and roster.is_live(m)

    def all_idle(self, names: list[str]) -> bool:
        members = {m["name"]: m for m in roster.load(self.ws, TEAM)["members"]}
        return all(members[n]["status"] == "idle" and roster.is_live(members[n])
                   for n in names)

    def turns_done(self, name: str) -> int:
        """Output tokens so far: they grow once per finished model call."""
        return int((self.member(name).get("usage") or {}).get("output_tokens") or 0)

    def idle_after(self, name: str, done_before: int) -> bool:
        m = self.member(name)
        return m["status"] == "idle" and int((m.get("usage") or {}).get("output_tokens")
                                             or 0) > done_before

    def wait_idle(self, names: list[str], timeout: float) -> None:
        wait_until(partial(self.all_idle, names), timeout, f"{len(names)} teammate(s) idle",
                   interval=0.02)

    def send(self, name: str, text: str) -> tuple[Json, float]:
        """What `inbox.deliver` does, timed in between: the line is appended (locked,
        fsynced) and the moment it has landed is taken before the journal line follows."""
        msg = inbox.make("message", LEAD, name, text)
        self.ws.store.deliver(TEAM, name, [dict(msg)])
        landed = time.time()
        events.emit_many(self.ws, TEAM, [{"ts": time.time(), "event": "message",
                                          "member": LEAD, "message": msg}])
        return msg, landed

    def pid(self, name: str) -> int:
        return int(self.member(name)["pid"])

    # -- seed-design teammates -----------------------------------------------------------
    def seed_inbox(self, name: str) -> Path:
        return self.seed_root / ".teams" / TEAM / f"{name}_inbox.jsonl"

    def seed_tasks(self) -> Path:
        return self.seed_root / ".tasks" / TEAM

    def start_seed(self, name: str, tasks: Path | None = None) -> subprocess.Popen[bytes]:
        """A fresh interpreter per teammate, as the seeds start one (`python -m …`)."""
        env = {**os.environ, "ANTHROPIC_BASE_URL": self.server.url,
               "ANTHROPIC_API_KEY": "bench-key"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "bench.baselines.seed_member", "--team", TEAM, "--name",
             name, "--inbox", str(self.seed_inbox(name)), "--tasks",
             str(tasks or self.seed_tasks())],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        self.seeds[name] = proc
        return proc

    def stop_seed(self, name: str) -> None:
        proc = self.seeds.pop(name, None)
        if proc is not None:
            stop_subprocess(proc, 10)

    def stop_seeds(self) -> None:
        for proc in self.seeds.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for name in list(self.seeds):
            self.stop_seed(name)

    def seed_process(self, name: str) -> psutil.Process:
        return psutil.Process(self.seeds[name].pid)
