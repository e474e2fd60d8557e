"""A Claude Code member's system prompt (CONTRACT §14, "The process": "The identity line and
the member's prompt are in its system prompt"), with the real CLI: the prompt reaches the
model in Claude Code's system prompt, never as a user turn — not at the first start, and
not after a restart that resumes the session; one opening turn sets it to work."""

from __future__ import annotations

from pathlib import Path

from teamd import actions
from teamd.agent.claude_code.runtime import OPENING
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from teamd.scripted.request import system_text
from tests.claude_code_team import CC, SLOW, awake_with, user_turns_with
from tests.e2e.test_claude_code_dies import killed_and_restarted
from tests.harness import TEAM, asked, turn_text, wait_status

PROMPT = "Wait for work from the lead."  #: cc's prompt (tests/claude_code_team.py)


def test_the_prompt_is_in_claude_codes_system_prompt_and_never_a_user_turn(
        ws: Workspace, server: ScriptedServer, workdir: Path, claude: Path) -> None:
    with awake_with(ws, server, workdir, claude, ()):
        killed_and_restarted(ws)  # resumed: the opening is not given again
        wait_status(ws, CC, "idle", SLOW)
        actions.send(ws, TEAM, CC, "AFTER-1 hello")
        server.wait_for(asked("AFTER-1", CC), SLOW)
        wait_status(ws, CC, "idle", SLOW)
        calls = [r for r in server.requests if r["agent"] == CC]
        assert len(calls) >= 2
        for call in calls:
            system = system_text(call["body"].get("system"))
            assert "You are teammate 'cc' in team 'crew'." in system
            assert PROMPT in system
            assert "are confined to it" not in system  # untrue of Claude Code's own tools
            assert not [m for m in call["body"]["messages"] if PROMPT in turn_text(m)]
        assert len(user_turns_with(server, CC, OPENING)) == 1
