"""Which agent a member runs (CONTRACT §14): its `runtime`, `teamd` (the built-in loop) or
`claude-code` (the Claude Code CLI, headless), and the checks `spawn` makes before adding
one.

A member's runtime is chosen at spawn — `--runtime` (or `Task`'s `runtime`), else its
team's (`create --runtime`), else the `runtime` setting — and recorded, resolved, in its
roster entry; an entry without one, from before, runs `teamd`. For `claude-code`, the
`claude_code` setting names the command, which must answer `--version` with a release
no older than `OLDEST`, and the `mcp` package (the `claude-code` extra) that serves it the
team tools must be installed: a member is never added that no process could run. The
runtime itself is `teamd.agent.claude_code`.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from typing import Any

from teamd import settings
from teamd.errors import BadInput

TEAMD, CLAUDE_CODE = "teamd", "claude-code"
#: the oldest Claude Code release a member may run (major, minor, patch): the one the
#: tests run (tests/claude_code.py), whose stream-json, transcript and hooks teamd reads
OLDEST = (2, 1, 332)
_VERSION = re.compile(r"\b(\d+)\.(\d+)\.(\d+)\b")
#: `claude --version` answers in well under a second; a hung one is no usable CLI
VERSION_TIMEOUT = 30.0
NO_MCP = "claude-code members need the mcp package: pip install 'teamd[claude-code]'"


def of(member: Mapping[str, Any]) -> str:
    """A roster entry's runtime (an entry from before runtimes: `teamd`)."""
    return str(member.get("runtime") or TEAMD)


def choose(asked: str | None, team_default: Any, conf: settings.Settings,
           source: str = "--runtime") -> str:
    """The runtime of a member being spawned: the one asked for, else its team's, else
    the setting's; BadInput naming `source` for a word that is none."""
    if asked is not None:
        return str(settings.check("runtime", asked, source))
    return str(team_default or conf.runtime)


def claude_version(command: str) -> str:
    """The version of the Claude Code CLI `command` runs; BadInput, in one line, when it
    cannot be run or is older than the oldest supported release."""
    name = os.path.expanduser(command)
    found = shutil.which(name)
    if found is None:
        raise BadInput(f"{command} not found (set claude_code in teamd.toml)")
    try:
        done = subprocess.run([found, "--version"], capture_output=True, text=True,
                              timeout=VERSION_TIMEOUT, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BadInput(f"{command} --version failed ({exc}); set claude_code in "
                       "teamd.toml") from None
    said = (done.stdout or done.stderr).strip()
    version = _VERSION.search(said)
    if done.returncode != 0 or version is None:
        first = said.splitlines()[0][:120] if said else f"exit {done.returncode}"
        raise BadInput(f"{command} --version said {first!r}: not Claude Code? (set "
                       "claude_code in teamd.toml)")
    if (int(version[1]), int(version[2]), int(version[3])) < OLDEST:
        raise BadInput(f"{command} {version[0]} is older than "
                       f"{'.'.join(map(str, OLDEST))}")
    return version[0]


def check_spawn(runtime: str, conf: settings.Settings) -> None:
    """Before a member is added: its runtime can run here (for `claude-code`: its CLI,
    and the `mcp` package its team tools are served with)."""
    if runtime == CLAUDE_CODE:
        claude_version(conf.claude_code)
        if importlib.util.find_spec("mcp") is None:
            raise BadInput(NO_MCP)
