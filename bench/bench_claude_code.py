#!/usr/bin/env python3
"""A Claude Code member beside a built-in one: how long a message takes to reach the model,
how long the member takes to start, and what it costs in memory.

A real `teamd run` with two teammates in one team, `cc` (runtime `claude-code`: the pinned
Claude Code CLI, from `.cache/claude-code/`, as the tests install it) and `bi` (the
built-in loop), both talking to the scripted server. Each round sends each an idle member
a message and times `actions.send` → the scripted server receiving the request that
carries it (intake, the session write, for `cc` also stream-json to the CLI, its turn, the
forwarder). Start: `spawn` → the member's first request (for `cc`: the CLI's start-up).
Memory: the PSS of each idle member's process tree, and of whatever is left of it once it
sleeps (nothing: its process, Claude Code and the MCP server are gone). Hook: what the
PreToolUse hook (section 11 over Claude Code's own tools) adds to each of its tool calls.

    python -m bench.bench_claude_code [--quick]

Not in the default suite: it needs the Claude Code CLI (`npm`, ~400 MB).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import psutil

from bench.common import Context, Row, figure, row
from teamd import actions, files, roster
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests import claude_code
from tests.harness import live_pid, make_team, running_teamd, wait_status, wait_until

NAME = "claude_code"
TITLE = "Claude Code member vs built-in: message → model, start, memory"
LIMIT = (600.0, 180.0)
TEAM = "bench"
SLOW = 120.0


def pss_mb(pid: int) -> float:
    """PSS of a process and its descendants, MB."""
    procs = [psutil.Process(pid)]
    procs += procs[0].children(recursive=True)
    total = 0
    for p in procs:
        try:
            total += p.memory_full_info().pss
        except psutil.Error:
            pass
    return total / (1024 * 1024)


def left_of(ws: Workspace, name: str) -> list[psutil.Process]:
    """Every process still running for member `name`: its own (`teamd: NAME@TEAM`), its
    Claude Code (its session id on the command line) and MCP server (the root, the team
    and the name)."""
    session = [r["id"] for r in files.read_jsonl(ws.store.paths.session(TEAM, name)).records
               if r.get("type") == "claude_session"]
    marks = [f"teamd: {name}@{TEAM}", *session]
    found = []
    for p in psutil.process_iter(["cmdline"]):
        line = " ".join(p.info["cmdline"] or [])
        if any(mark in line for mark in marks) or (
                "mcp_server" in line and f"{ws.root} {TEAM} {name} " in line):
            found.append(p)
    return found


def timed(argv: list[str], stdin: str) -> float:
    """ms a command takes, start to exit (it must succeed)."""
    began = time.perf_counter()
    subprocess.run(argv, input=stdin, text=True, capture_output=True, check=True, timeout=60)
    return (time.perf_counter() - began) * 1000


def run(ctx: Context) -> list[Row]:
    program = claude_code.program()
    if not program.exists():
        raise RuntimeError(f"the Claude Code CLI is not installed at {program}: run "
                           "tests/e2e/test_claude_code_member.py once (it installs it)")
    root = ctx.workdir / "ws"
    (root / "work").mkdir(parents=True)
    ws = Workspace.at(root)
    (root / "teamd.toml").write_text(f'claude_code = "{program}"\n')
    lapse: dict[str, list[float]] = {"cc": [], "bi": []}
    start: dict[str, float] = {}
    memory: dict[str, float] = {}
    asleep: dict[str, float] = {}
    hook: list[float] = []
    bare: list[float] = []
    with ScriptedServer({"rules": [], "default": {"content": "ok", "thinking": False}}
                        ) as server, running_teamd(ws, server.url):
        make_team(ws, root / "work", team=TEAM)
        for name, runtime in (("bi", "teamd"), ("cc", "claude-code")):
            began = time.perf_counter()
            actions.spawn(ws, TEAM, name, "Wait for work.", cwd=str(root / "work"),
                          runtime=runtime)
            server.wait_for(lambda r, n=name: r["agent"] == n, SLOW)
            start[name] = (time.perf_counter() - began) * 1000
            wait_status(ws, name, "idle", SLOW, team=TEAM)
        for name in ("bi", "cc"):
            pid = live_pid(ws, TEAM, name)
            assert pid is not None
            memory[name] = pss_mb(pid)
        # the PreToolUse hook every call of Claude Code's own tools waits for
        cc_pid = live_pid(ws, TEAM, "cc")
        event = json.dumps({"tool_name": "Bash", "tool_input": {"command": "true"},
                            "tool_use_id": "toolu_bench"})
        for _ in range(ctx.n(10, 2)):
            hook.append(timed([sys.executable, "-m", "teamd.agent.claude_code.pretool",
                               str(root), TEAM, "cc", str(cc_pid)], event))
            bare.append(timed([sys.executable, "-c", "pass"], ""))
        rounds = ctx.n(20, 3)
        for i in range(rounds):
            if ctx.expired():
                break
            for name in ("bi", "cc"):
                tag = f"ROUND-{name}-{i}"
                began = time.perf_counter()
                actions.send(ws, TEAM, name, tag)
                server.wait_for(lambda r, t=tag: t in str(r["body"]["messages"][-1]), SLOW)
                lapse[name].append((time.perf_counter() - began) * 1000)
                wait_until(lambda n=name: roster.get(roster.load(ws, TEAM), n)["status"]
                           == "idle", SLOW, f"{name} idle")
            ctx.progress(f"{i + 1}/{rounds} rounds")
        # asleep: idle_timeout shortened (read again before each member's next call)
        (root / "teamd.toml").write_text(f'claude_code = "{program}"\nidle_timeout = 2\n')
        for name in ("bi", "cc"):
            actions.send(ws, TEAM, name, "NAP after this")
        for name in ("bi", "cc"):
            wait_status(ws, name, "sleeping", SLOW, team=TEAM)
            asleep[name] = sum(pss_mb(p.pid) for p in left_of(ws, name))
    return [
        row("cc_message", "message → the model's request (Claude Code vs built-in)",
            "an idle member: actions.send until the scripted server has the request",
            figure("claude-code", "ms", lapse["cc"], p99=True),
            figure("built-in", "ms", lapse["bi"], p99=True)),
        row("cc_start", "spawn → the member's first request",
            "one start each: for Claude Code the CLI's own start-up",
            figure("claude-code", "ms", [start["cc"]]), figure("built-in", "ms", [start["bi"]])),
        row("cc_hook", "the rules' hook before each of Claude Code's own tool calls",
            "python -m teamd.agent.claude_code.pretool on a Bash call (no rules: allowed), "
            "start to exit, vs a bare Python start",
            figure("hook", "ms", hook), figure("python -c pass", "ms", bare)),
        row("cc_memory", "an idle member's PSS, with what it runs",
            "the member's process and its descendants (Claude Code, its MCP server)",
            figure("claude-code", "MB", [memory["cc"]]),
            figure("built-in", "MB", [memory["bi"]])),
        row("cc_asleep", "a sleeping member's PSS: every process left of it",
            "after idle_timeout (exit 75): its own process, its Claude Code and MCP server "
            "found by command line",
            figure("claude-code", "MB", [asleep["cc"]]),
            figure("built-in", "MB", [asleep["bi"]])),
    ]


if __name__ == "__main__":
    from bench.suite import standalone

    sys.exit(standalone(sys.modules[__name__]))
