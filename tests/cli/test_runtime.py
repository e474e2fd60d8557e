"""A member's `runtime` (CONTRACT §14), through the real `teamctl`: recorded, resolved, in
the roster and in `status --json` (an entry without it is `teamd`); `spawn --runtime`,
`create --runtime` and the `runtime` setting; the Claude Code CLI checked at spawn (found,
not too old): a member is added only where its runtime can run."""

from __future__ import annotations

import json
from pathlib import Path

from teamd import files, roster
from teamd.layout import Workspace
from tests.helpers_proc import teamctl_text

TEAM = "crew"


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


def test_claude_code_is_chosen_by_flag_team_or_setting(ws: Workspace, claude: Path) -> None:
    (ws.root / "teamd.toml").write_text(f'claude_code = "{claude}"\n')
    assert teamctl_text(ws, "create", TEAM).returncode == 0
    assert teamctl_text(ws, "spawn", TEAM, "cc", "--prompt", "p", "--runtime",
                        "claude-code").returncode == 0
    # the team's default, and the setting's, lead to the same runtime
    assert teamctl_text(ws, "create", "ccteam", "--runtime", "claude-code").returncode == 0
    config = files.read_json(ws.store.paths.config("ccteam"))
    assert config is not None and config["runtime"] == "claude-code"
    assert teamctl_text(ws, "spawn", "ccteam", "cc", "--prompt", "p").returncode == 0
    (ws.root / "teamd.toml").write_text(f'claude_code = "{claude}"\nruntime = "claude-code"\n')
    assert teamctl_text(ws, "spawn", TEAM, "cc2", "--prompt", "p").returncode == 0
    # naming teamd still spawns a built-in member, whatever the defaults
    assert teamctl_text(ws, "spawn", "ccteam", "t", "--prompt", "p", "--runtime",
                        "teamd").returncode == 0
    assert [(m["name"], m["runtime"]) for m in roster.load(ws, TEAM)["members"]] == [
        ("cc", "claude-code"), ("cc2", "claude-code")]
    assert [(m["name"], m["runtime"]) for m in roster.load(ws, "ccteam")["members"]] == [
        ("cc", "claude-code"), ("t", "teamd")]


def test_the_claude_code_cli_is_checked_at_spawn(ws: Workspace, tmp_path: Path) -> None:
    assert teamctl_text(ws, "create", TEAM).returncode == 0
    def claude_saying(version: str) -> str:
        fake = tmp_path / f"claude-{version}"
        fake.write_text(f"#!/bin/sh\necho '{version} (Claude Code)'\n")
        fake.chmod(0o755)
        return str(fake)

    old, untested = claude_saying("2.0.1"), claude_saying("2.1.331")
    cases = {
        "no-such-claude": "no-such-claude not found (set claude_code in teamd.toml)",
        old: f"{old} 2.0.1 is older than 2.1.332",
        # a 2.1.x before the tested release is refused too: its formats were never read
        untested: f"{untested} 2.1.331 is older than 2.1.332",
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
