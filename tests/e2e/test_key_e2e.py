"""The API key out of every process's reach (CONTRACT §8, §10): `teamd` reads it once — from
its environment or from `api_key_file` — re-executes itself without it and hands it to each
member over its go pipe, so it is in no `/proc/*/environ`, and neither `bash` nor a hook can
print it, however it looks (`cat /proc/$PPID/environ`, `cat /proc/*/environ`, `env`).
Real `teamd`, real forked members, the real SDK over HTTP to the scripted model."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from teamd import actions, files, pidfile, roster
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import (
    T,
    Teamd,
    cli,
    live_pid,
    reap_leftovers,
    teamd_env,
    tool_use,
    wait_until,
)

TEAM = "crew"
#: each probe says what it is first, so its result can be found in a session
#: as root (this project's machines and CI) every /proc/PID/environ is readable, so the key
#: must be absent from each; as another user a non-dumpable process's is refused outright
ROOT = os.geteuid() == 0
PROBES = {
    "PROBE-PPID": "cat /proc/$PPID/environ | tr '\\0' '\\n'",
    # every process's environment on the machine: how many were read, and any line that
    # names the API (other people's processes may show theirs; ours must not be there)
    "PROBE-ALL": "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -a -c '^PATH='; "
                 "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -a -e ANTHROPIC "
                 "-e sk-ant",
    "PROBE-ENV": "env",
}
HOOKS = """
[hooks]
pre_tool_use = '''cat /proc/$PPID/environ > "hook-ppid-$TEAMD_MEMBER.txt"
cat /proc/*/environ > "hook-all-$TEAMD_MEMBER.txt" 2>/dev/null
env > "hook-env-$TEAMD_MEMBER.txt"'''
"""


def probes() -> list[dict[str, object]]:
    return [tool_use("bash", command=f"echo {mark}; {command}")
            for mark, command in PROBES.items()]


def sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def environ_of(pid: int) -> bytes:
    with open(f"/proc/{pid}/environ", "rb") as fh:
        return fh.read()


def results_of(ws: Workspace, name: str) -> list[str]:
    """The tool results as member `name`'s session logged them."""
    records = files.read_jsonl(ws.store.paths.session(TEAM, name)).records
    return [json.dumps(r["block"].get("content")) for r in records
            if r.get("type") == "tool_result"]


def test_the_key_is_in_no_environ_and_no_tool_or_hook_prints_it(
        ws: Workspace, server: ScriptedServer, workdir: Path, tmp_path: Path) -> None:
    key = f"sk-ant-test-{uuid.uuid4()}"
    # the LLM lead probes, then staffs the team; alice (spawned by the person) and bob (by
    # the lead's Task tool, so forked later) probe when told to
    server.add_rule({"agent": "lead", "nth": 1, "reply": {"content": [
        *probes(), {"type": "tool_use", "name": "Task", "input": {
            "name": "bob", "team_name": TEAM, "prompt": "Wait for work."}}]}})
    for name in ("alice", "bob"):
        server.add_rule({"agent": name, "contains": "PROBE NOW", "reply": {"content": [
            *probes(), tool_use("SendMessage", recipient="lead", content=f"{name} probed")]}})
    files.atomic_write_bytes(ws.settings_file, HOOKS.encode())
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "lead", "Run the team.", lead=True, cwd=str(workdir))
    actions.spawn(ws, TEAM, "alice", "Wait for work.", cwd=str(workdir))
    env = teamd_env(server.url)
    env["ANTHROPIC_API_KEY"] = key  # teamd's environment only: not this test's
    assert key not in os.environ.values()
    daemon = Teamd(ws, env, tmp_path / "teamd.log")
    try:
        wait_until(lambda: roster.find(roster.load(ws, TEAM), "bob")
                   and live_pid(ws, TEAM, "bob"), T, "the lead to spawn bob")
        for name in ("alice", "bob"):
            cli(ws, "send", TEAM, name, "PROBE NOW")
        for name in ("alice", "bob"):
            server.wait_for(lambda r, n=name: r["agent"] == "lead"
                            and f"{n} probed" in r["last_user_text"], T)
        info = pidfile.running(ws)
        assert info is not None and info["pid"] == daemon.pid and info["api_key_set"] is True
        assert "no API key" not in cli(ws, "status").output
        pids = {"teamd": daemon.pid}
        for name in ("lead", "alice", "bob"):
            pid = live_pid(ws, TEAM, name)
            assert pid is not None, name
            pids[name] = pid
        for name, pid in pids.items():  # the product's live processes
            if not ROOT:  # non-dumpable: not even readable
                with pytest.raises(PermissionError):
                    environ_of(pid)
                continue
            block = environ_of(pid)
            # a real environment was read: teamd's; a member's block now holds its process
            # title (`teamd: alice@crew`: setproctitle reuses that memory)
            assert b"PATH=" in block if name == "teamd" else bool(block), name
            assert key.encode() not in block and b"ANTHROPIC_API_KEY" not in block, name
        anywhere = []
        for entry in os.listdir("/proc"):  # and every process on the machine
            if entry.isdigit():
                try:
                    if key.encode() in environ_of(int(entry)):
                        anywhere.append(entry)
                except OSError:
                    continue
        assert anywhere == []
    finally:
        daemon.stop()
        reap_leftovers(ws)
    # the pipe worked: every model request carried the key, from each member
    by_agent = {r["agent"] for r in server.requests if r["api_key_sha256"] == sha(key)}
    assert by_agent == {"lead", "alice", "bob"}
    assert all(r["api_key_sha256"] == sha(key) for r in server.requests)
    # bash, as each member's session logged its results: ran, and no trace of the key
    for name in ("lead", "alice", "bob"):
        results = results_of(ws, name)
        for mark in PROBES:
            found = [r for r in results if mark in r]
            assert found, (name, mark)
            # the parent's environment was read (as root; as another user it is refused)
            # `env` shows a real environment; the parent's (the member's) block holds its
            # process title, and PROBE-ALL counts: both are read for the key check below
            assert "PATH=" in found[0] or mark != "PROBE-ENV", (name, mark)
        for text in results:
            assert key not in text and "redacted]" not in text, name
        count = next(r for r in results if "PROBE-ALL" in r)
        assert int(json.loads(count).split("\n")[1]) > 3  # many environments were read
    # the hook, run before each of those calls: its files, whole
    for name in ("lead", "alice", "bob"):
        for kind in ("ppid", "all", "env"):
            data = (workdir / f"hook-{kind}-{name}.txt").read_bytes()
            assert b"PATH=" in data or kind == "ppid", (name, kind)  # ppid: a member's title
            assert key.encode() not in data, (name, kind)
    assert b"TEAMD_MEMBER=" in (workdir / "hook-env-bob.txt").read_bytes()


def run_teamd(ws: Workspace, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "teamd", "run", "--root", str(ws.root)],
                          env=env, capture_output=True, text=True, timeout=60)


def test_api_key_file_must_be_private_and_then_serves(
        ws: Workspace, server: ScriptedServer, workdir: Path, tmp_path: Path) -> None:
    key = f"sk-ant-test-{uuid.uuid4()}"
    secret = tmp_path / "anthropic.key"
    secret.write_text(key + "\n")  # the trailing newline is no part of the key
    os.chmod(secret, 0o644)
    files.atomic_write_bytes(ws.settings_file, f'api_key_file = "{secret}"\n'.encode())
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "alice", "Wait for work.", cwd=str(workdir))
    env = teamd_env(server.url)
    del env["ANTHROPIC_API_KEY"]
    refused = run_teamd(ws, env)
    assert refused.returncode == 2
    assert str(secret) in refused.stderr and "0644" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert server.requests == [] and pidfile.running(ws) is None

    os.chmod(secret, 0o600)
    env["ANTHROPIC_API_KEY"] = ""  # set but empty is no key: the file serves
    daemon = Teamd(ws, env, tmp_path / "teamd.log")
    try:
        first = server.wait_for(lambda r: r["agent"] == "alice", T)
        info = pidfile.running(ws)
        assert info is not None and info["api_key_set"] is True
        block = environ_of(daemon.pid)
        assert key.encode() not in block and b"ANTHROPIC_API_KEY=" not in block
    finally:
        daemon.stop()
        reap_leftovers(ws)
    assert first["api_key_sha256"] == sha(key)


@pytest.mark.parametrize(("setting", "why"), [
    ("keys/anthropic", "must be an absolute path"),
    ("anthropic", "CREDENTIALS_DIRECTORY is not set"),
])
def test_api_key_file_that_names_no_usable_file_exits_2(
        ws: Workspace, setting: str, why: str) -> None:
    files.atomic_write_bytes(ws.settings_file, f'api_key_file = "{setting}"\n'.encode())
    env = {k: v for k, v in os.environ.items() if k != "CREDENTIALS_DIRECTORY"}
    done = run_teamd(ws, env)
    assert done.returncode == 2 and why in done.stderr and setting in done.stderr
    assert pidfile.running(ws) is None


def test_a_systemd_credential_is_read_from_credentials_directory(
        ws: Workspace, server: ScriptedServer, workdir: Path, tmp_path: Path) -> None:
    key = f"sk-ant-test-{uuid.uuid4()}"
    creds = tmp_path / "credentials"
    creds.mkdir(mode=0o700)
    (creds / "anthropic").write_text(key)
    files.atomic_write_bytes(ws.settings_file, b'api_key_file = "anthropic"\n')
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "alice", "Wait for work.", cwd=str(workdir))
    env = teamd_env(server.url)
    del env["ANTHROPIC_API_KEY"]
    env["CREDENTIALS_DIRECTORY"] = str(creds)
    daemon = Teamd(ws, env, tmp_path / "teamd.log")
    try:
        first = server.wait_for(lambda r: r["agent"] == "alice", T)
    finally:
        daemon.stop()
        reap_leftovers(ws)
    assert first["api_key_sha256"] == sha(key)
