"""Hooks (CONTRACT.md §11): the shell commands teamd.toml's `[hooks]` runs before a ruled
tool runs, a task is created or completed, or a teammate goes idle; and the runner of
`person_needed`, which `teamd.paging` starts (it never blocks).

A hook runs with `/bin/sh -c` in the member's cwd, in its own process group, the event as
one JSON object on stdin, `TEAMD_*` variables in its environment and never the API key.
It is bounded by `hook_timeout`: then its whole group is killed. Exit 0 goes on, exit 2
blocks with its stderr (cut to 4 KiB) as the reason, anything else is a failed hook (the
action goes on). Every run is journaled as `hook_run`. Callers hold no lock meanwhile.
"""

from __future__ import annotations

import json
import logging
import os
import selectors
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teamd import events
from teamd.agent.tools_files import DRAIN_GRACE, _Capture, child_env, kill_group
from teamd.files import Json
from teamd.layout import Workspace

log = logging.getLogger(__name__)

REASON_CAP = 4096  # bytes of stderr kept as the reason of a block
BLOCK = 2


@dataclass
class Outcome:
    """What one hook run came to; `blocked` only on exit 2."""

    hook: str
    exit: int | None  # None: killed (by the timeout, or a signal)
    ms: int
    timed_out: bool
    reason: str

    @property
    def blocked(self) -> bool:
        return self.exit == BLOCK

    def message(self) -> str:
        """The block as the model reads it."""
        return f"blocked by the {self.hook} hook: {self.reason or '(the hook said nothing)'}"


def run(ws: Workspace, team: str, member: str, cwd: Path, hook: str, command: str,
        timeout: float, *, tool: str | None = None, tool_input: Json | None = None,
        task: Json | None = None, groups: set[int] | None = None,
        message: Json | None = None) -> Outcome:
    """Run `command` for the event `hook` and journal `hook_run`. Never raises for what the
    hook does (a command that cannot even start counts as a failed hook). `groups` (the
    member's `Toolbox.groups`) holds the hook's process group while it runs. `message`:
    the message `person_needed` pages the person for (then the event is `{event, team,
    message}`, and `hook_run` names its `message_id`)."""
    payload: Json = {"event": hook, "team": team, "member": member, "cwd": str(cwd)}
    if message is not None:
        payload = {"event": hook, "team": team, "message": message}
    if tool is not None:
        payload.update(tool=tool, input=tool_input)
    if task is not None:
        payload["task"] = task
    env = child_env()
    env.update(TEAMD_ROOT=str(ws.root), TEAMD_TEAM=team, TEAMD_MEMBER=member,
               TEAMD_EVENT=hook)
    if task is not None and task.get("id") is not None:
        env["TEAMD_TASK_ID"] = str(task["id"])
    started = time.monotonic()
    try:
        code, timed_out, stderr = _run_sh(command, cwd, env,
                                          json.dumps(payload, ensure_ascii=False) + "\n",
                                          timeout, set() if groups is None else groups)
    except OSError as exc:  # no /bin/sh, cwd gone, out of processes
        code, timed_out, stderr = None, False, f"could not start the hook: {exc}"
    outcome = Outcome(hook, code, int((time.monotonic() - started) * 1000), timed_out,
                      stderr.strip())
    if not outcome.blocked and code != 0:
        log.warning("hook %s failed (%s); going on: %s", hook,
                    "timed out" if timed_out else f"exit {code}", outcome.reason[:200])
    about = {} if message is None else {"message_id": message.get("id")}
    events.emit(ws, team, "hook_run", member=member, hook=hook, exit=code, ms=outcome.ms,
                blocked=outcome.blocked, timed_out=timed_out, **about)
    return outcome


def _run_sh(command: str, cwd: Path, env: dict[str, str], stdin: str,
            timeout: float, groups: set[int]) -> tuple[int | None, bool, str]:
    """`/bin/sh -c command` in a new session; stdin fed, stderr kept (head and tail),
    stdout thrown away. When the shell exits or time runs out, its whole group is killed:
    no hook leaves a process behind. Returns (exit code or None if killed, timed out,
    stderr)."""
    proc = subprocess.Popen(["/bin/sh", "-c", command], cwd=cwd, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True, close_fds=True)
    groups.add(proc.pid)  # the member's SIGTERM handler kills it with the tools
    assert proc.stdin is not None and proc.stderr is not None
    err = _Capture(REASON_CAP // 2)
    data = memoryview(stdin.encode())
    deadline = time.monotonic() + timeout if timeout > 0 else None
    timed_out = exited = eof = False
    try:
        pidfd: int | None = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        pidfd = None  # old kernel: poll for the exit below
    try:
        with selectors.DefaultSelector() as sel:
            os.set_blocking(proc.stdin.fileno(), False)
            os.set_blocking(proc.stderr.fileno(), False)
            sel.register(proc.stdin, selectors.EVENT_WRITE, "in")
            sel.register(proc.stderr, selectors.EVENT_READ, "err")
            if pidfd is not None:
                sel.register(pidfd, selectors.EVENT_READ, "exit")
            while not exited:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    timed_out = True
                    break
                wait = left if pidfd is not None else min(left or 0.05, 0.05)
                for key, _ in sel.select(wait):
                    if key.data == "exit":
                        exited = True
                    elif key.data == "in":
                        data = _feed(proc, sel, data)
                    elif not eof and not err.read_from(proc.stderr.fileno()):
                        eof = True
                        sel.unregister(proc.stderr)
                if pidfd is None and proc.poll() is not None:
                    exited = True
            kill_group(proc.pid)  # background children, or everything on a timeout
            if not proc.stdin.closed:
                sel.unregister(proc.stdin)
                _close_quietly(proc)
            if pidfd is not None:
                sel.unregister(pidfd)
            # what is still in the pipe, for a moment (an escaped grandchild could hold it)
            grace = time.monotonic() + DRAIN_GRACE
            while not eof and (left := grace - time.monotonic()) > 0:
                for _key, _ in sel.select(left):
                    if not err.read_from(proc.stderr.fileno()):
                        eof = True
                if time.monotonic() >= grace:
                    break
    finally:
        kill_group(proc.pid)  # again, should an exception have cut the watch short
        if pidfd is not None:
            os.close(pidfd)
        _close_quietly(proc)
        proc.stderr.close()
        proc.wait()
        groups.discard(proc.pid)
    code = None if timed_out or proc.returncode < 0 else proc.returncode
    reason = err.text(REASON_CAP).encode()[:REASON_CAP].decode("utf-8", "ignore")
    return code, timed_out, reason


def _feed(proc: subprocess.Popen[bytes], sel: selectors.BaseSelector,
          data: memoryview) -> memoryview:
    """Write what the pipe takes; close stdin once all is written or the hook stopped
    reading (a hook need not read its event)."""
    assert proc.stdin is not None
    try:
        data = data[os.write(proc.stdin.fileno(), data):]
    except BlockingIOError:
        return data
    except (BrokenPipeError, OSError):
        data = data[len(data):]
    if not data:
        sel.unregister(proc.stdin)
        _close_quietly(proc)
    return data


def _close_quietly(proc: subprocess.Popen[Any]) -> None:
    if proc.stdin is not None and not proc.stdin.closed:
        try:
            proc.stdin.close()
        except OSError:
            pass

