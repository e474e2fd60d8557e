"""A Claude Code that dies on its own while its member waits (CONTRACT §14, "The process":
"a Claude Code that dies on its own is a crash of the member"), with the real CLI: killed
-9 while the member is idle, or paused at its budget, the member exits as a crash (exit 1,
at once: its waits watch the CLI), teamd restarts it by policy, the same session resumes,
and what is sent after is delivered once and answered."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from teamd import actions
from teamd.agent.claude_code.runtime import held_at_budget
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.claude_code_team import CC, SLOW, awake_with, claude_of, user_turns_with
from tests.e2e.test_claude_code_budget import budget_told, paused_at_spend_2
from tests.harness import TEAM, asked, exit_codes, gone, member, wait_status, wait_until

#: the forwarder's refusal at cc's member budget, as last_error and the API's error say it
REFUSAL = "member budget reached"


def killed_and_restarted(ws: Workspace) -> None:
    """Kill -9 cc's Claude Code: the member exits 1 (a crash), and teamd starts it again,
    resuming the same Claude Code session."""
    cli = claude_of(ws, CC)
    argv = cli.cmdline()
    session = argv[argv.index("--session-id") + 1] if "--session-id" in argv \
        else argv[argv.index("--resume") + 1]
    cli.kill()
    wait_until(lambda: gone(cli), SLOW, "the killed Claude Code gone")
    assert wait_until(lambda: exit_codes(ws, CC), SLOW, "the member's exit") == [(1, None)]

    def fresh() -> psutil.Process | None:
        found = claude_of(ws, CC)
        return found if found.pid != cli.pid else None

    again = wait_until(fresh, SLOW, "a new Claude Code")
    resumed = again.cmdline()
    assert resumed[resumed.index("--resume") + 1] == session


def test_claude_code_killed_while_idle_crashes_the_member_which_resumes_and_answers(
        ws: Workspace, server: ScriptedServer, workdir: Path, claude: Path) -> None:
    with awake_with(ws, server, workdir, claude, (
            {"name": "after", "agent": CC, "contains": "AFTER-1",
             "reply": {"content": "answered"}},)):
        killed_and_restarted(ws)
        wait_status(ws, CC, "idle", SLOW)
        actions.send(ws, TEAM, CC, "AFTER-1 sent after the crash")
        server.wait_for(asked("AFTER-1", CC), SLOW)
        wait_status(ws, CC, "idle", SLOW)
        assert [r["rule"] for r in server.requests if r["rule"] == "after"] == ["after"]
        assert len(user_turns_with(server, CC, "AFTER-1")) == 1
        assert exit_codes(ws, CC) == [(1, None)]  # one crash, nothing since


def refusal_in_transcript(ws: Workspace) -> bool:
    """Claude Code's transcript holds the forwarder's refusal (the turn looks answered
    there, by the API's error)."""
    return any(REFUSAL in f.read_text() for f in (
        ws.claude_state(TEAM, CC) / ".claude" / "projects").rglob("*.jsonl"))


def held_in_session(ws: Workspace) -> bool:
    """cc's session records its last turn held at the budget (`held_at_budget`)."""
    return held_at_budget(ws.store.read_session(TEAM, CC))


@pytest.mark.parametrize("moment", ["refused", "held"])
def test_claude_code_killed_while_paused_crashes_the_member_which_goes_on_once_raised(
        ws: Workspace, server: ScriptedServer, workdir: Path, claude: Path,
        moment: str) -> None:
    """Killed at either moment of a pause, the restarted member is `paused` and goes on
    once the budget is raised. `refused`: as soon as the forwarder refused the call (the
    member may not have heard Claude Code's answer yet). `held`: once the member recorded
    the turn held at the budget and Claude Code's transcript holds the refusal, so the
    turn looks answered there — found flaky in a full run, where a loaded machine made
    the kill land this late: the restarted member, with nothing left to give Claude
    Code, went idle and never went on once the budget was raised."""
    with awake_with(ws, server, workdir, claude, (
            {"name": "passes", "agent": CC, "contains": "SPEND-1",
             "reply": {"content": "passed"}},
            {"name": "finished", "agent": CC, "contains": "SPEND-2",
             "reply": {"content": "finished"}})):
        paused_at_spend_2(ws, server)
        assert [r for r in server.requests if "SPEND-2" in str(r["body"]["messages"])] == []
        if moment == "held":
            wait_until(lambda: held_in_session(ws) and refusal_in_transcript(ws), SLOW,
                       "the turn held in cc's session, the refusal in its transcript")
        killed_and_restarted(ws)
        wait_status(ws, CC, "paused", SLOW)  # restarted, still at its budget
        assert member(ws, TEAM, CC)["last_error"].startswith(REFUSAL)
        actions.set_budget(ws, TEAM, 100, member=CC)
        server.wait_for(lambda r: r["rule"] == "finished", SLOW)
        wait_status(ws, CC, "idle", SLOW)
        assert len(user_turns_with(server, CC, "SPEND-2")) == 1
        assert exit_codes(ws, CC) == [(1, None)]
        assert budget_told(ws) == [CC]  # the lead told once, across the restart
