"""The Claude Code CLI a member runs (CONTRACT §14, "The process"): its command, its
environment, and its stream-json events.

`claude -p --verbose --input-format stream-json --output-format stream-json`, in the
member's cwd with its model and effort, the identity line and the member's prompt appended
to its system prompt, HOME its state folder (`Workspace.claude_state`), telemetry and other
non-essential traffic off, the forwarder's URL and stand-in key (never the real key), and
the team tools from `--mcp-config` (the server `teamd`, run by this Python). A session id
chosen by the member is given with `--session-id` on a first start, `--resume` after.

The CLI is the member's child, in a process group of its own, and dies with it
(PR_SET_PDEATHSIG): killed with the member, even by SIGKILL. A reader thread turns its
stdout into events on a queue; `None` on the queue is its end (the CLI died or closed).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

from teamd import files, proc
from teamd.files import Json
from teamd.pgroup import kill_group

log = logging.getLogger(__name__)

#: Claude Code's own tools named as a team tool (its agent teams' SendMessage): a message
#: sent with it would reach no teammate, so it is not given (the team's is served by MCP)
SHADOWED = ("SendMessage",)
#: the MCP server's name: its tools reach the model as mcp__teamd__{tool}
MCP_NAME = "teamd"
#: the longest event line read (a Read of a big file comes back in one)
MAX_LINE = 64 * 1024 * 1024


def mcp_config(root: Path, team: str, name: str) -> str:
    """The `--mcp-config` JSON: the team tools, served by this Python acting as `name`
    (this process, whose pid it writes under)."""
    server = {"type": "stdio", "command": sys.executable,
              "args": ["-m", "teamd.agent.claude_code.mcp_server", str(root), team, name,
                       str(os.getpid())]}
    return json.dumps({"mcpServers": {MCP_NAME: server}})


def command(program: str, *, model: str, effort: str, system: str, session_id: str,
            resume: bool, mcp: str, settings: str) -> list[str]:
    """The CLI's argument vector (`settings`: the PreToolUse hook, `pretool`)."""
    argv = [os.path.expanduser(program), "-p", "--verbose", "--input-format", "stream-json",
            "--output-format", "stream-json", "--model", model,
            "--append-system-prompt", system, "--mcp-config", mcp, "--strict-mcp-config",
            "--settings", settings,
            # only the team tools are pre-allowed (never ruled); Claude Code's own run on
            # the rules hook's `allow` alone (`pretool`), so a hook that fails refuses
            "--allowedTools", f"mcp__{MCP_NAME}",
            "--disallowedTools", ",".join(SHADOWED)]
    if effort:
        argv += ["--effort", effort]
    argv += ["--resume", session_id] if resume else ["--session-id", session_id]
    return argv


def environment(home: Path, base_url: str, stand_in: str) -> dict[str, str]:
    """All the CLI sees of the environment: PATH and the locale, never the member's own
    (no key, no proxy, no user config leaks in)."""
    env = {key: value for key, value in os.environ.items()
           if key in ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR")}
    env.setdefault("PATH", "/usr/bin:/bin")
    return {**env, "HOME": str(home), "ANTHROPIC_BASE_URL": base_url,
            "ANTHROPIC_API_KEY": stand_in, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1"}


class ClaudeProcess:
    """One run of the CLI: `send` a user turn, `events` what it says."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        files.ensure_dir(Path(env["HOME"]))
        parent = os.getpid()
        self.popen = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=None, start_new_session=True, close_fds=True,  # its errors: the log
            preexec_fn=lambda: proc.die_with_parent(signal.SIGKILL, parent))
        self.events: queue.Queue[Json | None] = queue.Queue()
        assert self.popen.stdout is not None
        threading.Thread(target=self._read, args=(self.popen.stdout,),
                         name="claude-code", daemon=True).start()

    @property
    def pid(self) -> int:
        return self.popen.pid

    def _read(self, stream: IO[bytes]) -> None:
        for raw in iter(lambda: stream.readline(MAX_LINE), b""):
            try:
                event = json.loads(raw)
            except ValueError:
                log.warning("claude code said a line that is not JSON: %.200r", raw)
                continue
            if isinstance(event, dict):
                self.events.put(event)
        self.events.put(None)

    def send(self, text: str) -> bool:
        """Write one user turn; False when the CLI is gone."""
        line = json.dumps({"type": "user", "message": {
            "role": "user", "content": [{"type": "text", "text": text}]}}) + "\n"
        stdin = self.popen.stdin
        assert stdin is not None
        try:
            stdin.write(line.encode())
            stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            return False
        return True

    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL its process group (the CLI and the commands it runs), and reap it."""
        proc_group = self.popen.pid  # its own session: the group id is its pid
        kill_group(proc_group)
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            log.warning("claude code %d did not die within 10 s of SIGKILL", proc_group)
