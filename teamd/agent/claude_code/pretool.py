"""Section 11 over Claude Code's own tools (CONTRACT §14, "Rules and hooks hold"): the
PreToolUse hook teamd installs with `--settings`, run by Claude Code before each call of
any of its tools but the team tools (`mcp__teamd__…`, never ruled).

`python -m teamd.agent.claude_code.pretool ROOT TEAM NAME MEMBER_PID` reads the hook's
JSON on stdin and maps the call onto the ruled tool that stands for it — `Bash` → `bash`
(its command); `Read`, `Grep`, `Glob` → `read_file` (the path); `Write`, `NotebookEdit` →
`write_file`; `Edit`, `MultiEdit` → `edit_file`; any other tool: none — and puts it
through the member's own `Toolbox.admit`: the plan gate, what no rule opens (teamd's
files, other members' worktrees), the rules (deny, the team's always rules, ask, allow,
default; a rule naming the Claude Code tool itself, `Bash(git push*)`, `WebFetch`, applies
too; a tool no rule names is decided by `default`), and `pre_tool_use`; the journal, the
ask and the hook name the call by Claude Code's own tool. Allowed: exit 0 with Claude
Code's `allow` decision. Refused: exit 2 with the reason on stderr — Claude Code gives it
to the model as the tool's error and the call never runs. An ask opens the permission
request to the lead (or the person, for the LLM lead) and waits for its answer, up to
`permission_timeout` (then refused: `timeout`), or until a shutdown is asked of the member
(refused: `shutting down`); the member is `waiting` meanwhile (written as the member,
under its pid). An ask left pending when the member's process died is answered `rejected`
(`interrupted by a restart`) when the next one starts (`abandon_asks`).

`ExitPlanMode` is no ruled tool but the plan protocol (CONTRACT §6): the hook answers it
`ask`, so that Claude Code asks its permission host — the member, which sends the plan
to the lead and answers with the lead's verdict (`plan`). No hook's `allow` ever lets
Claude Code leave plan mode on its own.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

from teamd import apikey
from teamd.agent.claude_code.process import HOSTED, TEAM_PREFIX

if TYPE_CHECKING:
    from teamd.layout import Workspace

#: how long Claude Code lets the hook run (it waits for an ask's answer): a day
HOOK_TIMEOUT = 86400
#: the answer to an ask whose call a restart cut short (`abandon_asks`)
RESTARTED = "interrupted by a restart"


def ruled(tool: str, given: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The ruled call Claude Code's call `tool` stands for, or None (not one we map)."""
    def text(*keys: str) -> str:
        for key in keys:
            if isinstance(given.get(key), str) and given[key]:
                return str(given[key])
        return "."

    if tool == "Bash":
        return "bash", {"command": text("command")}
    if tool in ("Read", "Grep", "Glob"):
        return "read_file", {"path": text("file_path", "path")}
    if tool in ("Write", "NotebookEdit"):
        content = given.get("content", given.get("new_source", ""))
        return "write_file", {"path": text("file_path", "notebook_path"),
                              "content": content if isinstance(content, str) else ""}
    if tool in ("Edit", "MultiEdit"):
        edits = given.get("edits") if tool == "MultiEdit" else [given]
        first = edits[0] if isinstance(edits, list) and edits and isinstance(
            edits[0], dict) else {}
        return "edit_file", {"path": text("file_path"),
                             "old_text": str(first.get("old_string") or "-"),
                             "new_text": str(first.get("new_string") or "")}
    return None


def settings_json(ws: Workspace, team: str, name: str, pid: int) -> str:
    """The `--settings` JSON installing this hook for every tool. Settings given on the
    command line outrank the project's (`.claude/settings.json`, `settings.local.json`):
    `disableAllHooks` there cannot switch the hook off. None of Claude Code's own tools is
    pre-allowed (`process.command`): headless, a call runs only on the hook's `allow`, so
    a hook that fails to start, dies or says anything else refuses it."""
    import shlex

    # what the member's settings are and where its key is are known to the member, not to
    # Claude Code (whose environment is its own): the hook is told, so that it rules as
    # the member does, on the member's store, and no tool reads the key
    from teamd import settings

    told = settings.helper_env(ws)
    folder = os.environ.get(apikey.CREDENTIALS_ENV)
    if folder:
        told[apikey.CREDENTIALS_ENV] = folder
    pairs = [f"{key}={value}" for key, value in sorted(told.items())]
    command = shlex.join([*(["env", *pairs] if pairs else []), sys.executable, "-m",
                          "teamd.agent.claude_code.pretool", str(ws.root), team, name,
                          str(pid)])
    return json.dumps({"disableAllHooks": False, "hooks": {"PreToolUse": [
        {"matcher": "*", "hooks": [
            {"type": "command", "command": command, "timeout": HOOK_TIMEOUT}]}]}})


def decide(root: str, team: str, name: str, pid: int, event: dict[str, Any]) -> str | None:
    """None to let the call run, else why it is refused."""
    from teamd.agent.claude_code.mcp_server import toolbox
    from teamd.agent.tools_files import ToolError
    from teamd.errors import TeamdError

    tool, given = str(event.get("tool_name")), event.get("tool_input") or {}
    if tool.startswith(TEAM_PREFIX) or tool in HOSTED:
        return None  # the team tools and the plan protocol are never ruled
    call = ruled(tool, given)
    box = toolbox(root, team, name, pid)
    box.waiter = lambda rid: answer_of(box, rid)
    try:
        box.admit(*(call or (None, {})), tool_use_id=event.get("tool_use_id"),
                  own=(tool, given))
    except (ToolError, TeamdError) as exc:
        return str(exc).strip() or "refused"
    return None


def set_status(box: Any, status: Any) -> None:
    """The member's status, written as the member (only while `box.pid` is its process:
    CONTRACT §4)."""
    from teamd import roster, states

    def change(entry: dict[str, Any]) -> None:
        if entry.get("pid") == box.pid:
            states.transition(entry, status, states.Writer.MEMBER)

    roster.update_status(box.ws, box.team, box.member, change)


def answer_of(box: Any, request_id: str) -> Any:
    """Wait for permission request `request_id` to be answered, the member `waiting`
    meanwhile; its record. Refused as `timeout` after `permission_timeout`."""
    from teamd import permissions, requests
    from teamd.states import Status
    from teamd.store.changes import Kind

    with box.ws.store.changes([box.team], kinds=frozenset({Kind.REQUEST})) as feed:
        set_status(box, Status.WAITING)
        try:
            while True:  # the feed is armed before each check: no answer slips past
                feed.drain()
                record = requests.get(box.ws, box.team, request_id)
                if record["status"] != "pending":
                    return record
                left = permissions.time_left(record, box.settings().permission_timeout)
                # a shutdown asked of the member ends the wait, as for any member (its
                # message reaches Claude Code, through the member, after this call)
                stopping = any(r["kind"] == "shutdown" and r["recipient"] == box.member
                               for r in requests.list_requests(box.ws, box.team, True))
                if stopping or (left is not None and left <= 0):
                    refused = permissions.refuse_ask(
                        box.ws, box.team, request_id, "shutting down" if stopping else "timeout")
                    if refused is None:
                        continue  # answered meanwhile: that answer stands
                    return refused
                feed.wait(left)
        finally:
            set_status(box, Status.ACTIVE)


def abandon_asks(ws: Any, team: str, member: str) -> list[str]:
    """Answer the permission requests `member` left pending `rejected`, reason
    `RESTARTED`: the hook waiting on each died with the last process, and Claude Code
    never runs a call cut short again (its resumed turn is told so). The answer goes to
    nobody (the asker is gone; nothing is sent to the lead). The ids answered."""
    from teamd import requests
    from teamd.errors import BadInput

    answered = []
    for record in requests.list_requests(ws, team, pending_only=True):
        if record["kind"] != "permission" or record["sender"] != member:
            continue
        try:
            requests.answer(ws, team, record["request_id"], False, reason=RESTARTED)
        except BadInput:
            continue  # answered meanwhile: that answer stands
        answered.append(record["request_id"])
    return answered


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print("usage: python -m teamd.agent.claude_code.pretool ROOT TEAM NAME PID",
              file=sys.stderr)
        return 2
    try:
        event = json.loads(sys.stdin.read())
    except ValueError as exc:
        print(f"teamd: the hook's input is not JSON ({exc}): refused", file=sys.stderr)
        return 2
    try:
        why = decide(argv[0], argv[1], argv[2], int(argv[3]), event)
    except Exception as exc:  # fail closed: any other exit lets Claude Code run the call
        why = f"teamd could not check this call ({type(exc).__name__}: {exc}): refused"
    if why is not None:
        print(why, file=sys.stderr)
        return 2
    verdict = "ask" if event.get("tool_name") in HOSTED else "allow"
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                             "permissionDecision": verdict}}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
