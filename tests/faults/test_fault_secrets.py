"""Secrets and permissions (CONTRACT §2 "Files", §8, §10, §11): a recognisable fake API key
in teamd's environment ends up in no file under the root, no event, no log line, no hook's
or tool's environment; every file is 0600 and every folder 0700 under umask 000.

The same modes for a tour of every `teamctl` command: tests/unit/test_permissions.py."""

from __future__ import annotations

import os
import stat
import uuid
from pathlib import Path

from teamd import actions, files, inbox
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.faults.faultkit import (
    TEAM,
    Mail,
    T,
    assert_no_strays,
    assert_statuses_true,
    figure,
    restarted,
)
from tests.harness import (
    Teamd,
    live_pid,
    member,
    reap_leftovers,
    send_to_lead,
    teamd_env,
    tool_use,
    wait_until,
)
from tests.helpers_proc import teamctl

HOOKS = """
[hooks]
pre_tool_use = "env > hook-env.txt"
task_completed = "env > hook-task-env.txt"
"""


def test_the_api_key_leaks_nowhere_and_modes_hold_under_umask_000(
        ws: Workspace, server: ScriptedServer, workdir: Path, tmp_path: Path) -> None:
    key = f"fake-key-FAULTSUITE-{uuid.uuid4().hex}"
    big = {"input_tokens": 100, "cache_read_input_tokens": 30000,
           "cache_creation_input_tokens": 30000}
    server.add_rule({"agent": "alice", "contains": "WORK", "reply": {"content": [
        tool_use("bash", command="env > tool-env.txt; echo done"),
        tool_use("write_file", path="notes.txt", content="notes"),
        tool_use("TaskCreate", subject="a task of its own")]}})
    server.add_rule({"agent": "alice", "tool_result": "TaskCreate",
                     "reply": {"content": [tool_use("TaskUpdate", task_id=1,
                                                    status="completed")]}})
    server.add_rule({"agent": "alice", "tool_result": "TaskUpdate",
                     "reply": {"content": "Done.", "usage": big}})
    server.add_rule({"agent": "alice", "contains": "AGAIN", "times": 2, "error": 500})
    server.add_rule({"agent": "alice", "contains": "AGAIN", "reply": send_to_lead("BACK")})
    server.add_rule({"agent": "alice", "contains": "Your context is nearly full",
                     "reply": {"content": "SUMMARY"}})
    files.atomic_write_bytes(ws.settings_file, HOOKS.encode())
    env = teamd_env(server.url, compact_threshold=50000, backoff_initial=0.1)
    env["ANTHROPIC_API_KEY"] = key
    log = tmp_path / "teamd.log"
    old = os.umask(0)
    try:
        actions.create_team(ws, TEAM)
        actions.spawn(ws, TEAM, "alice", "Wait for work from the lead.", cwd=str(workdir))
        daemon = Teamd(ws, env, log)  # teamd and all it forks run under umask 000
    finally:
        os.umask(old)
    try:
        mail = Mail(ws)
        wait_until(lambda: member(ws, TEAM, "alice")["status"] == "idle", T, "alice idle")
        mail.send("alice", "WORK please")
        wait_until(lambda: (workdir / "hook-task-env.txt").exists(), T, "the hooks to run")
        wait_until(lambda: member(ws, TEAM, "alice")["status"] == "idle", T, "alice idle")
        pid = live_pid(ws, TEAM, "alice")
        assert pid is not None
        os.kill(pid, 9)
        restarted(ws, "alice", pid)
        mail.send("alice", "AGAIN after the crash")  # a compaction, then two 500s
        wait_until(lambda: any(m["content"] == "BACK" for m in inbox.peek(ws, TEAM, "lead")),
                   T, "the answer")
        wait_until(lambda: member(ws, TEAM, "alice")["status"] == "idle", T, "alice idle")
        outputs = [teamctl(ws.root, *args, umask=0).stdout for args in (
            ("status", "--json"), ("logs", TEAM, "--json", "-v"), ("inbox", TEAM, "--json"),
            ("transcript", TEAM, "alice"), ("task", "list", TEAM, "--json"))]
        assert_statuses_true(ws, daemon)
        assert_no_strays(tmp_path, daemon)
    finally:
        daemon.stop()
        reap_leftovers(ws)
    assert_no_strays(tmp_path, None)
    assert any(r["body"] for r in server.requests)  # the key did reach the API
    # it ran: the tool's and the hooks' environments were written, without the key
    envs = [workdir / n for n in ("tool-env.txt", "hook-env.txt", "hook-task-env.txt")]
    for path in envs:
        text = path.read_text()
        assert "TEAMD_ROOT" in text or "PATH=" in text
        assert key not in text and "ANTHROPIC_API_KEY" not in text, path
    scanned = 0
    needle = key.encode()
    for path in [*ws.root.rglob("*"), log]:
        if path.is_file() and not path.is_symlink():
            assert needle not in path.read_bytes(), f"the API key is in {path}"
            scanned += 1
    for out in outputs:
        assert needle not in out
    assert (ws.root / ".teams" / TEAM / "transcripts").is_dir()  # a compaction was saved
    modes = {}
    for path in ws.root.rglob("*"):
        rel = path.relative_to(ws.root)
        if rel.parts[0] == ".worktrees":
            continue
        mode = stat.S_IMODE(path.lstat().st_mode)
        want = 0o700 if path.is_dir() else 0o600
        assert mode == want, f"{rel} is {oct(mode)}, not {oct(want)}"
        modes[want] = modes.get(want, 0) + 1
    figure("files scanned for the key", f"{scanned} (+{len(outputs)} teamctl outputs, "
           f"{len(envs)} tool/hook environments); modes: {modes.get(0o600, 0)} files 0600, "
           f"{modes.get(0o700, 0)} folders 0700 under umask 000")
