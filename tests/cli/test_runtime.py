"""A member's `runtime` (CONTRACT §14), through the real `teamctl`: recorded, resolved, in
the roster and in `status --json` (an entry without it is `teamd`); `spawn --runtime`,
`create --runtime` and the `runtime` setting; the Claude Code CLI checked at spawn (found,
not too old); and, in this build, no `claude-code` member ever added: the runtime that
would run it is not built yet."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from teamd import files, roster, runtimes
from teamd.agent.loop import Member
from teamd.errors import TeamdError
from teamd.layout import Workspace
from tests.helpers_proc import teamctl_text

TEAM = "crew"
REFUSED = f"teamctl: error: {runtimes.NOT_YET}"


def lines(err: str) -> list[str]:
    return err.strip().splitlines()


def members(ws: Workspace) -> list[str]:
    return [m["name"] for m in roster.load(ws, TEAM)["members"]]


def test_a_member_runs_teamd_unless_told_and_status_says_which(ws: Workspace) -> None:
    assert teamctl_text(ws, "create", TEAM).returncode == 0
    assert teamctl_text(ws, "spawn", TEAM, "alice", "--prompt", "p").returncode == 0
    assert teamctl_text(ws, "spawn", TEAM, "bob", "--prompt", "p", "--runtime",
                        "teamd").returncode == 0
    config = files.read_json(ws.store.paths.config(TEAM))
    assert config is not None and config["runtime"] is None  # the team names none
    assert [(m["name"], m["runtime"]) for m in config["members"]] == [
        ("alice", "teamd"), ("bob", "teamd")]

    def from_before(doc: files.Json) -> None:  # an entry written before runtimes
        roster.get(doc, "bob").pop("runtime")

    roster.update(ws, TEAM, from_before)
    status = json.loads(teamctl_text(ws, "status", TEAM, "--json").stdout)
    [team] = status["teams"]
    assert [(m["name"], m["runtime"]) for m in team["members"]] == [
        ("alice", "teamd"), ("bob", "teamd")]


def test_claude_code_members_are_refused_in_one_line_and_nothing_is_added(
        ws: Workspace, claude: Path) -> None:
    (ws.root / "teamd.toml").write_text(f'claude_code = "{claude}"\n')
    assert teamctl_text(ws, "create", TEAM).returncode == 0
    done = teamctl_text(ws, "spawn", TEAM, "cc", "--prompt", "p", "--runtime", "claude-code")
    assert (done.returncode, lines(done.stderr)) == (2, [REFUSED])
    # the team's default and the setting lead to the same refusal
    assert teamctl_text(ws, "create", "ccteam", "--runtime", "claude-code").returncode == 0
    config = files.read_json(ws.store.paths.config("ccteam"))
    assert config is not None and config["runtime"] == "claude-code"
    by_team = teamctl_text(ws, "spawn", "ccteam", "cc", "--prompt", "p")
    (ws.root / "teamd.toml").write_text(f'claude_code = "{claude}"\nruntime = "claude-code"\n')
    by_setting = teamctl_text(ws, "spawn", TEAM, "cc", "--prompt", "p")
    for refused in (by_team, by_setting):
        assert (refused.returncode, lines(refused.stderr)) == (2, [REFUSED])
    assert members(ws) == [] and roster.load(ws, "ccteam")["members"] == []
    # naming teamd still spawns, whatever the team's or the setting's default
    assert teamctl_text(ws, "spawn", "ccteam", "t", "--prompt", "p", "--runtime",
                        "teamd").returncode == 0
    assert [m["runtime"] for m in roster.load(ws, "ccteam")["members"]] == ["teamd"]


def test_the_claude_code_cli_is_checked_at_spawn(ws: Workspace, tmp_path: Path) -> None:
    assert teamctl_text(ws, "create", TEAM).returncode == 0
    old = tmp_path / "old-claude"
    old.write_text("#!/bin/sh\necho '2.0.1 (Claude Code)'\n")
    old.chmod(0o755)
    cases = {
        "no-such-claude": "no-such-claude not found (set claude_code in teamd.toml)",
        str(old): f"{old} 2.0.1 is older than 2.1.x",
    }
    for command, said in cases.items():
        (ws.root / "teamd.toml").write_text(f'claude_code = "{command}"\n')
        done = teamctl_text(ws, "spawn", TEAM, "cc", "--prompt", "p", "--runtime",
                            "claude-code")
        assert (done.returncode, lines(done.stderr)) == (2, [f"teamctl: error: {said}"])
    bogus = teamctl_text(ws, "spawn", TEAM, "cc", "--prompt", "p", "--runtime", "claud-code")
    assert bogus.returncode == 2
    assert "runtime must be one of teamd, claude-code" in bogus.stderr
    assert "did you mean 'claude-code'" in bogus.stderr
    assert members(ws) == []


def test_a_claude_code_entry_written_by_hand_is_never_run_as_teamd(ws: Workspace) -> None:
    assert teamctl_text(ws, "create", TEAM).returncode == 0
    assert teamctl_text(ws, "spawn", TEAM, "alice", "--prompt", "p").returncode == 0

    def by_hand(doc: files.Json) -> None:
        roster.get(doc, "alice")["runtime"] = "claude-code"

    roster.update(ws, TEAM, by_hand)
    with pytest.raises(TeamdError, match="cannot run claude-code members yet"):
        Member(ws, TEAM, "alice")
