"""The API key out of a Claude Code teammate's reach (CONTRACT §14, "Cost, limits and the
key"), with the real CLI under a real `teamd run`: `env` run through Claude Code's `Bash`
shows the forwarder's stand-in, never the key; the key is in no environment of its
processes; and after the run, no file under the root — Claude Code's own state folder, its
transcripts and logs included — nor in the member's working folder holds it. The calls
still reached the API with the real key (the forwarder put it in)."""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path

import psutil
import pytest

from teamd import actions
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.claude_code_team import CC, SLOW, claude_of, team_with_claude_code
from tests.harness import (
    TEAM,
    Teamd,
    journal,
    reap_leftovers,
    teamd_env,
    tool_use,
    turn_text,
    wait_status,
)


def holders(key: bytes, *folders: Path) -> tuple[list[Path], int]:
    """The files under `folders` that hold `key`, and how many files were read."""
    found, read = [], 0
    for folder in folders:
        for path in folder.rglob("*"):
            if path.is_file() and not path.is_symlink():
                read += 1
                if key in path.read_bytes():
                    found.append(path)
    return found, read


def test_env_through_bash_shows_no_key_and_no_file_holds_it(
        ws: Workspace, server: ScriptedServer, workdir: Path, claude: Path,
        tmp_path: Path) -> None:
    # a key no scanner takes for a real one, unique to this run
    key = f"fake-teamd-test-key-{uuid.uuid4().hex}"
    server.add_rule({"agent": CC, "contains": "ENV-1", "reply": {"content": [tool_use(
        "Bash", command="env", description="the environment")]}})
    server.add_rule({"name": "seen", "agent": CC, "tool_result": "Bash",
                     "reply": {"content": "seen"}})
    team_with_claude_code(ws, workdir, claude)
    env = teamd_env(server.url)
    env["ANTHROPIC_API_KEY"] = key  # teamd's environment only: not this test's
    assert key not in os.environ.values()
    daemon = Teamd(ws, env)
    try:
        wait_status(ws, CC, "idle", SLOW)
        cli = claude_of(ws, CC)
        if os.geteuid() == 0:  # as root every environment is readable: the CLI's has no key
            block = Path(f"/proc/{cli.pid}/environ").read_bytes()
            assert b"ANTHROPIC_API_KEY=teamd-stand-in-" in block
            assert key.encode() not in block
        actions.send(ws, TEAM, CC, "ENV-1 print your environment")
        seen = server.wait_for(lambda r: r["rule"] == "seen", SLOW)
        wait_status(ws, CC, "idle", SLOW)
        cli_gone = psutil.Process(cli.pid)
    finally:
        daemon.stop()
        reap_leftovers(ws)
    # what `env` printed, as the model was given it: the stand-in, not the key
    printed = turn_text(seen["body"]["messages"][-1])
    assert "PATH=" in printed  # a real environment was printed
    [stand_in] = [line.split("=", 1)[1] for line in printed.splitlines()
                  if line.startswith("ANTHROPIC_API_KEY=")]
    assert stand_in.startswith("teamd-stand-in-") and stand_in != key
    assert key not in printed
    # every call of Claude Code reached the API with the real key, put in by the forwarder
    sha = hashlib.sha256(key.encode()).hexdigest()
    cc_calls = [r for r in server.requests if r["agent"] == CC]
    assert cc_calls and {r["api_key_sha256"] for r in cc_calls} == {sha}
    # no file holds the key: the root (Claude Code's state, its transcripts and logs, the
    # sessions, the journal, the member logs, teamd.log) and the member's working folder
    state = ws.claude_state(TEAM, CC)
    assert list((state / ".claude" / "projects").glob("*/*.jsonl"))  # its transcript is there
    found, read = holders(key.encode(), ws.root, workdir)
    assert found == []
    assert read > 10
    assert not cli_gone.is_running() or cli_gone.status() == psutil.STATUS_ZOMBIE


@pytest.mark.parametrize("given_in", ["teamd.toml", "TEAMD_API_KEY_FILE"])
def test_claude_codes_read_of_the_key_file_is_refused(
        ws: Workspace, server: ScriptedServer, workdir: Path, claude: Path,
        tmp_path: Path, given_in: str) -> None:
    """The key in a file teamd reads (api_key_file), as the member's own user can too —
    named in teamd.toml, or by the variable (as the systemd unit's env file does), which
    Claude Code's rules hook, in Claude Code's own environment, is told by the member."""
    key = f"fake-teamd-test-key-{uuid.uuid4().hex}"
    folder = tmp_path / "secrets"
    folder.mkdir(mode=0o700)
    key_file = folder / "anthropic.key"
    key_file.write_text(key + "\n")
    key_file.chmod(0o600)
    server.add_rule({"agent": CC, "contains": "READ-1", "reply": {"content": [
        tool_use("Read", file_path=str(key_file))]}})
    server.add_rule({"agent": CC, "contains": "AGAIN-2", "reply": {"content": [
        tool_use("Read", file_path=str(folder / "." / "anthropic.key"))]}})
    server.add_rule({"name": "told", "agent": CC, "tool_result": "Read",
                     "reply": {"content": "refused, as it should be"}})
    team_with_claude_code(ws, workdir, claude)
    env = teamd_env(server.url)
    del env["ANTHROPIC_API_KEY"]  # the file is where the key comes from
    if given_in == "teamd.toml":
        with ws.settings_file.open("a") as toml:
            toml.write(f'api_key_file = "{key_file}"\n')
    else:
        env["TEAMD_API_KEY_FILE"] = str(key_file)
    daemon = Teamd(ws, env)
    try:
        wait_status(ws, CC, "idle", SLOW)
        for ask in ("READ-1 read the key file", "AGAIN-2 and by another path"):
            since = len(server.requests)
            actions.send(ws, TEAM, CC, ask)
            told = server.wait_for(lambda r: r["rule"] == "told", SLOW, since=since)
            wait_status(ws, CC, "idle", SLOW)
            [result] = [b for b in told["body"]["messages"][-1]["content"]
                        if b.get("type") == "tool_result"]
            assert result["is_error"] and "refused: the API key file" in turn_text(
                told["body"]["messages"][-1]), result
    finally:
        daemon.stop()
        reap_leftovers(ws)
    # the calls carried the key (the forwarder's), and no request's body holds it
    sha = hashlib.sha256(key.encode()).hexdigest()
    assert {r["api_key_sha256"] for r in server.requests if r["agent"] == CC} == {sha}
    assert not [r for r in server.requests if key in json.dumps(r["body"])]
    assert [e["tool"] for e in journal(ws, TEAM) if e["event"] == "tool_call"
            and "refused: the API key file" in str(e)] == ["Read", "Read"]
