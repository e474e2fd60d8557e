"""The Claude Code CLI a member runs (CONTRACT §14, "The process"): its command, its
environment, and its stream-json events.

`claude -p --verbose --input-format stream-json --output-format stream-json`, in the
member's cwd with its model and effort, the identity line and the member's prompt appended
to its system prompt, HOME its state folder (`Workspace.claude_state`), telemetry and other
non-essential traffic off, the forwarder's URL and stand-in key (never the real key), and
the team tools from `--mcp-config` (the server `teamd`, run by this Python). A session id
chosen by the member is given with `--session-id` on a first start, `--resume` after; a
plan-mode member whose plan is not approved yet starts with `--permission-mode plan`.

The member is the CLI's permission host (`--permission-prompt-tool stdio`): what Claude
Code would ask a person comes as a `can_use_tool` control request on stdout. The only one
the member answers itself is `ExitPlanMode` (`HOSTED`: its plan goes to the lead, `plan`);
the others are answered here, at once: the team tools (never ruled; Claude Code's plan
mode asks about them) are allowed, anything else is denied (`PROMPTED`) — the rules decide
in the PreToolUse hook, and a call the hook did not allow never runs. Control requests the
member sends (leaving plan mode: `set_permission_mode`) go in on stdin between user turns
(`control`).

The CLI is the member's child, in a process group of its own, and dies with it
(PR_SET_PDEATHSIG): killed with the member, even by SIGKILL. A reader thread turns its
stdout into events on a queue; `None` on the queue is its end (the CLI died or closed);
`ended`, a pidfd, wakes the member's waits when it dies.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import IO, TYPE_CHECKING

from teamd import files, proc, settings
from teamd.files import Json
from teamd.pgroup import kill_group

if TYPE_CHECKING:
    from teamd.layout import Workspace

log = logging.getLogger(__name__)

#: Claude Code's own tools named as a team tool (its agent teams' SendMessage): a message
#: sent with it would reach no teammate, so it is not given (the team's is served by MCP)
SHADOWED = ("SendMessage",)
#: Claude Code's own tools that only a person at its prompt could answer or that would put
#: it in plan mode of its own accord: never given (plan mode is the member's, `plan`)
NOT_HEADLESS = ("AskUserQuestion", "EnterPlanMode")
#: the `can_use_tool` requests the member answers (the plan protocol); any other: denied
HOSTED = ("ExitPlanMode",)
#: the answer to any other `can_use_tool` request (a hook that failed, or plan mode's own)
PROMPTED = ("refused: nobody answers Claude Code's permission prompts here; teamd's rules "
            "decide in its PreToolUse hook")
#: the MCP server's name: its tools reach the model as mcp__teamd__{tool}
MCP_NAME = "teamd"
#: how the team tools' names begin, as Claude Code calls them
TEAM_PREFIX = f"mcp__{MCP_NAME}__"
#: the longest event line read (a Read of a big file comes back in one)
MAX_LINE = 64 * 1024 * 1024


def mcp_config(ws: Workspace, team: str, name: str) -> str:
    """The `--mcp-config` JSON: the team tools, served by this Python acting as `name`
    (this process, whose pid it writes under), with the member's settings and store
    (`settings.helper_env`: Claude Code's environment is not the member's)."""
    server = {"type": "stdio", "command": sys.executable,
              "args": ["-m", "teamd.agent.claude_code.mcp_server", str(ws.root), team, name,
                       str(os.getpid())],
              "env": settings.helper_env(ws)}
    return json.dumps({"mcpServers": {MCP_NAME: server}})


#: what a PreToolUse hook's command becomes (`fenced`): run in a shell of its own, any
#: exit but 0 (its decision) and 2 (refused) — it could not start, it crashed, it was
#: killed — is a refusal, so a project's pre-allowed tools never run on a failed hook
FAIL_CLOSED = ("/bin/sh -c {command}; rc=$?; case $rc in 0|2) exit $rc;; esac; "
               'echo "teamd: the rules hook failed (exit $rc): refused" >&2; exit 2')


def fenced(settings: str) -> str:
    """The `--settings` JSON as the CLI gets it, whatever the project's own settings say:
    bypass mode switched off, and each PreToolUse hook failing closed (`FAIL_CLOSED`)."""
    given = json.loads(settings)
    for entry in given.get("hooks", {}).get("PreToolUse", []):
        for hook in entry.get("hooks", []):
            if hook.get("type") == "command":
                hook["command"] = FAIL_CLOSED.format(command=shlex.quote(hook["command"]))
    permissions = {**given.get("permissions", {}), "disableBypassPermissionsMode": "disable"}
    return json.dumps({**given, "permissions": permissions})


def command(program: str, *, model: str, effort: str, system: str, session_id: str,
            resume: bool, mcp: str, settings: str, planning: bool = False) -> list[str]:
    """The CLI's argument vector (`settings`: the PreToolUse hook, `pretool`; `planning`:
    it starts in Claude Code's plan mode)."""
    argv = [os.path.expanduser(program), "-p", "--verbose", "--input-format", "stream-json",
            "--output-format", "stream-json", "--model", model,
            "--append-system-prompt", system, "--mcp-config", mcp, "--strict-mcp-config",
            "--settings", fenced(settings),
            # only the team tools are pre-allowed (never ruled); Claude Code's own run on
            # the rules hook's `allow` alone (`pretool`), so a hook that fails refuses
            "--allowedTools", f"mcp__{MCP_NAME}",
            "--disallowedTools", ",".join(SHADOWED + NOT_HEADLESS),
            "--permission-prompt-tool", "stdio"]
    argv += ["--permission-mode", "plan" if planning else "default"]
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


def prompt(event: Json) -> Json | None:
    """The `can_use_tool` request an event is (Claude Code asking its permission host), or
    None."""
    request = event.get("request")
    if event.get("type") == "control_request" and isinstance(request, dict) and \
            request.get("subtype") == "can_use_tool":
        return request
    return None


def allow(given: Json) -> Json:
    """Let the call run, with its input `given` as Claude Code asked about it."""
    return {"behavior": "allow", "updatedInput": given}


def deny(message: str) -> Json:
    """A refusal: Claude Code gives `message` to the model as the tool's error."""
    return {"behavior": "deny", "message": message}


class ClaudeProcess:
    """One run of the CLI: `send` a user turn, `events` what it says (a `can_use_tool`
    request of a `HOSTED` tool among them: `answer` it)."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        files.ensure_dir(Path(env["HOME"]))
        parent = os.getpid()
        self.popen = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=None, start_new_session=True, close_fds=True,  # its errors: the log
            preexec_fn=lambda: proc.die_with_parent(signal.SIGKILL, parent))
        #: readable once the CLI has ended (a pidfd): the member's waits watch it
        self.ended = os.pidfd_open(self.popen.pid)
        self.events: queue.Queue[Json | None] = queue.Queue()
        self._writing = threading.Lock()  # stdin: the reader's answers, the member's turns
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
            if not isinstance(event, dict):
                continue
            asked = prompt(event)
            if asked is not None and asked.get("tool_name") not in HOSTED:
                team_tool = str(asked.get("tool_name")).startswith(TEAM_PREFIX)
                self.answer(str(event.get("request_id")),
                            allow(asked.get("input") or {}) if team_tool else deny(PROMPTED))
                continue
            self.events.put(event)
        self.events.put(None)

    def _write(self, record: Json) -> bool:
        """One JSON line on the CLI's stdin; False when the CLI is gone."""
        stdin = self.popen.stdin
        assert stdin is not None
        try:
            with self._writing:
                stdin.write((json.dumps(record) + "\n").encode())
                stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            return False
        return True

    def send(self, text: str) -> bool:
        """Write one user turn; False when the CLI is gone."""
        return self._write({"type": "user", "message": {
            "role": "user", "content": [{"type": "text", "text": text}]}})

    def control(self, request: Json) -> bool:
        """Send a control request (`{"subtype": "set_permission_mode", …}`): Claude Code
        acts on it before the user turns written after it; its `control_response` comes
        among the events."""
        return self._write({"type": "control_request",
                            "request_id": f"teamd-{uuid.uuid4().hex}", "request": request})

    def answer(self, request_id: str, response: Json) -> bool:
        """Answer Claude Code's control request `request_id` (`allow` / `deny`)."""
        return self._write({"type": "control_response", "response": {
            "subtype": "success", "request_id": request_id, "response": response}})

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
        if self.ended >= 0:
            os.close(self.ended)
            self.ended = -1
