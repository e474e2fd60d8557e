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
import time
from dataclasses import dataclass
from pathlib import Path

from teamd import events, pgroup
from teamd.files import Json
from teamd.layout import Workspace
from teamd.pgroup import child_env

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
        ran = pgroup.run(["/bin/sh", "-c", command], cwd, env,
                         timeout=timeout if timeout > 0 else None,
                         cap=REASON_CAP, keep=REASON_CAP // 2,
                         stdin=(json.dumps(payload, ensure_ascii=False) + "\n").encode(),
                         stderr_only=True, groups=groups)
        code = None if ran.timed_out or (ran.returncode or 0) < 0 else ran.returncode
        timed_out = ran.timed_out
        stderr = ran.output.encode()[:REASON_CAP].decode("utf-8", "ignore")
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
