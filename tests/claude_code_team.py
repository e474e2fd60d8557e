"""A team with a Claude Code teammate, for the end-to-end tests of CONTRACT §14 (the
tests/e2e/test_claude_code_*.py files share it): the team made and run, its Claude Code
found, and what the scripted server saw of it.

`team_with_claude_code` makes team `crew` with a built-in teammate `bi` and a Claude Code
one `cc` (the pinned CLI of tests/claude_code.py); `awake_with` runs it with rules
scripted until `cc` is idle; `user_turns_with` says in which input turns of cc's last
request a text is (exactly once: one); `claude_of` is the CLI a live member runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

from teamd import actions
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import (
    TEAM,
    live_pid,
    make_team,
    running_teamd,
    tool_use,
    turn_text,
    wait_status,
    wait_until,
)

CC = "cc"  #: the Claude Code teammate
BI = "bi"  #: the built-in one
#: Claude Code starts and answers in a second or two; the machine may be loaded
SLOW = 60.0


def team_with_claude_code(ws: Workspace, workdir: Path, claude: Path) -> None:
    (ws.root / "teamd.toml").write_text(f'claude_code = "{claude}"\n')
    make_team(ws, workdir, BI)
    actions.spawn(ws, TEAM, CC, "Wait for work from the lead.", cwd=str(workdir),
                  runtime="claude-code")


@contextlib.contextmanager
def awake_with(ws: Workspace, server: ScriptedServer, workdir: Path, claude: Path,
               rules: tuple[dict[str, Any], ...], permissions: str = "",
               hooks: str = "", **settings: Any) -> Iterator[None]:
    """The team of `team_with_claude_code` (the rules scripted, `[permissions]` and
    `[hooks]` in teamd.toml, other `settings` as TEAMD_ variables) running, restarts
    quick, with its Claude Code member idle."""
    for rule in rules:
        server.add_rule(rule)
    team_with_claude_code(ws, workdir, claude)
    with ws.settings_file.open("a") as toml:
        for table, body in (("permissions", permissions), ("hooks", hooks)):
            if body:
                toml.write(f"[{table}]\n{body}\n")
    with running_teamd(ws, server.url, **{"backoff_initial": 0.2, **settings}):
        wait_status(ws, CC, "idle", SLOW)
        yield


def user_turns_with(server: ScriptedServer, agent: str, text: str) -> list[int]:
    """In the last request of `agent`: the positions of the input turns carrying `text`
    (shown exactly once: one position). Input given while Claude Code works comes as a
    `system` turn after the next tool result ("The user sent a new message while you
    were working: …")."""
    last = [r for r in server.requests if r["agent"] == agent][-1]
    return [i for i, m in enumerate(last["body"]["messages"])
            if m["role"] in ("user", "system") and text in turn_text(m)]


def mcp(name: str, **inp: Any) -> dict[str, Any]:
    """A scripted reply calling the team tool `name` (the MCP server `teamd`'s)."""
    return {"content": [tool_use(f"mcp__teamd__{name}", **inp)]}


def claude_of(ws: Workspace, name: str) -> psutil.Process:
    """The Claude Code CLI a live member runs (its child)."""
    def find() -> list[psutil.Process]:
        pid = live_pid(ws, TEAM, name)
        if pid is None:
            return []
        try:
            return [p for p in psutil.Process(pid).children()
                    if "--input-format" in p.cmdline()]
        except psutil.Error:
            return []
    return wait_until(find, SLOW, f"{name}'s Claude Code")[0]


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []
