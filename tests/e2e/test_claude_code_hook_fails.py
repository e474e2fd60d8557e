"""A rules hook that fails refuses the call (CONTRACT §14, "Rules and hooks hold"): the
real pinned CLI, run with the very command line a member gives it (`process.command`),
against the scripted server — but with a PreToolUse hook that cannot start, or dies. None
of Claude Code's own tools is pre-allowed, so only the hook's `allow` runs one: the
`Bash` call never runs, and the model is told so — even where the project's own
`.claude/settings.json` pre-allows `Bash` and sets `bypassPermissions` or `acceptEdits`
(Claude Code is started in its `default` permission mode, bypass switched off)."""

from __future__ import annotations

import json
import queue
from pathlib import Path
from typing import Any

import pytest

from teamd.agent.claude_code import process
from teamd.scripted import ScriptedServer

IDENTITY = "You are teammate 'coder' in team 'webapp'."
#: each hook as it fails: a program that is not there, one killed by a signal
FAILING = {"cannot start": "/nonexistent/teamd-hook", "dies": "kill -9 $$"}
#: a project's own Claude Code settings that would let the call run without asking
LOOSE = {"none": None,
         "bypass": {"permissions": {"defaultMode": "bypassPermissions", "allow": ["Bash"]}},
         "bypass alone": {"permissions": {"defaultMode": "bypassPermissions"}},
         "accept edits": {"permissions": {"defaultMode": "acceptEdits",
                                          "allow": ["Bash(*)", "Bash(touch:*)"]}}}


@pytest.fixture
def script(workdir: Path) -> dict[str, Any]:
    return {"rules": [
        {"name": "bash", "agent": "coder", "nth": 1, "reply": {"content": [
            {"type": "tool_use", "name": "Bash", "input": {
                "command": f"touch {workdir / 'ran'}", "description": "mark"}}]}},
        {"name": "told", "agent": "coder", "tool_result": "Bash",
         "reply": {"content": "it did not run"}},
    ]}


@pytest.mark.parametrize("project", sorted(LOOSE))
@pytest.mark.parametrize("how", sorted(FAILING))
def test_a_hook_that_fails_refuses_the_call(how: str, project: str, claude: Path,
                                            server: ScriptedServer, workdir: Path,
                                            tmp_path: Path) -> None:
    if LOOSE[project] is not None:  # whatever the project's own settings say
        (workdir / ".claude").mkdir()
        for kept in ("settings.json", "settings.local.json"):
            (workdir / ".claude" / kept).write_text(json.dumps(LOOSE[project]))
    settings = json.dumps({"disableAllHooks": False, "hooks": {"PreToolUse": [
        {"matcher": "*", "hooks": [{"type": "command", "command": FAILING[how]}]}]}})
    argv = process.command(str(claude), model="claude-opus-5-5", effort="", system=IDENTITY,
                           session_id="7c0b5a52-9d0e-4c55-8f0a-52c1e3b7d6a4", resume=False,
                           mcp=json.dumps({"mcpServers": {}}), settings=settings)
    cli = process.ClaudeProcess(argv, workdir, process.environment(
        tmp_path / "home", server.url, "sk-scripted"))
    try:
        assert cli.send("run the command")
        while True:
            event = cli.events.get(timeout=120)
            assert event is not None, "Claude Code ended before its result"
            if event.get("type") == "result":
                break
    except queue.Empty:
        pytest.fail("no result from Claude Code within 120 s")
    finally:
        cli.kill()
    assert event["result"] == "it did not run", event
    assert not (workdir / "ran").exists()  # the call never ran
    told = server.wait_for(lambda r: r["rule"] == "told", 10)["body"]["messages"]
    results = [b for m in told if m["role"] == "user" and isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result"]
    assert len(results) == 1 and results[0]["is_error"], results
