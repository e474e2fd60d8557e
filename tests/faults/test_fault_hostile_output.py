"""Hostile model output (CONTRACT §3, §8): whatever the model asks for, each call is refused
or bounded and the teammate is unharmed — same process, no restart, and it answers the next
message. `../`, a symlinked folder and `edit_file` through a link are in
tests/e2e/test_agent_e2e.py (test_file_tools_refuse_escapes); here the rest, all in one turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psutil

from teamd import actions, board, inbox
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.faults.faultkit import (
    TEAM,
    Mail,
    T,
    assert_no_strays,
    assert_shown_once,
    assert_statuses_true,
    assert_tasks_once,
    figure,
)
from tests.harness import (
    live_pid,
    member,
    procs_with,
    running_teamd,
    send_to_lead,
    tool_use,
    wait_until,
)

DAEMON = "DAEMON-5e0c"
LEFT = "LEFT-BEHIND-5e0c"


def test_hostile_tool_calls_are_refused_or_bounded_and_the_teammate_is_unharmed(
        ws: Workspace, server: ScriptedServer, workdir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOPSECRET-5e0c")
    (outside / "target.txt").write_text("untouched")
    (workdir / "a").mkdir()
    (workdir / "linkfile").symlink_to(outside / "target.txt")
    calls: list[dict[str, Any]] = [
        tool_use("read_file", path=str(outside / "secret.txt")),  # absolute, elsewhere
        tool_use("write_file", path="./a/../../outside/evil.txt", content="x"),
        tool_use("read_file", path="../outside/secret.txt"),
        tool_use("write_file", path="linkfile", content="overwritten"),  # a symlinked file
        tool_use("bash", command="yes | head -c 100000000"),  # 100 MB of output
        tool_use("bash", command=f"setsid bash -c 'exec -a {DAEMON} sleep 400' & sleep 400",
                 timeout=3),  # forks a daemon (its own session), never ends
        # forks a daemon and ends at once: no signal tells teamd it adopted it
        tool_use("bash", command=f"setsid bash -c 'exec -a {LEFT} sleep 400' & echo bye"),
        tool_use("SendMessage", recipient="ghost", content="boo"),
        tool_use("SendMessage", recipient="lead", content="BIG-5e0c " + "w" * (300 * 1024)),
        tool_use("TaskUpdate", task_id=1, status="completed"),  # bob's task
    ]
    server.add_rule({"agent": "alice", "contains": "HOSTILE", "reply": {"content": calls}})
    server.add_rule({"agent": "alice", "tool_result": "TaskUpdate",
                     "reply": {"content": "Survived."}})
    server.add_rule({"agent": "alice", "contains": "ALIVE", "reply": send_to_lead("STILL-HERE")})
    actions.create_team(ws, TEAM)
    for name in ("alice", "bob"):
        actions.spawn(ws, TEAM, name, "Wait for work from the lead.", cwd=str(workdir))
    board.create(ws, TEAM, "bob's own task")
    assert board.claim(ws, TEAM, "bob", 1)["id"] == 1
    mail = Mail(ws)
    with running_teamd(ws, server.url, bash_timeout=60, idle_timeout=600) as daemon:
        wait_until(lambda: member(ws, TEAM, "alice")["status"] == "idle", T, "alice idle")
        pid = live_pid(ws, TEAM, "alice")
        assert pid is not None
        mail.send("alice", "HOSTILE do your worst")
        wait_until(lambda: procs_with(DAEMON), T, "the daemon to be forked")
        seen = server.wait_for(lambda r: r["agent"] == "alice" and r["rule"] == 1, T)
        results = [b for b in seen["body"]["messages"][-1]["content"]
                   if b.get("type") == "tool_result"]
        assert len(results) == len(calls)
        for r in results[:4]:
            assert r["is_error"] is True and "outside the working directory" in r["content"]
        assert "TOPSECRET" not in str(results)
        assert sorted(p.name for p in outside.iterdir()) == ["secret.txt", "target.txt"]
        assert (outside / "target.txt").read_text() == "untouched"
        flood = results[4]
        assert flood["is_error"] is False and "characters omitted" in flood["content"]
        assert len(flood["content"]) < 31_000
        hung = results[5]
        assert hung["is_error"] is True and "timed out after 3 s" in hung["content"]
        # the daemon it left behind is gone while the teammate and teamd live on
        wait_until(lambda: not procs_with(DAEMON), T, "the daemon to be killed")
        assert results[6]["is_error"] is False and "bye" in results[6]["content"]
        # by teamd's sweep for strays (every 5 s), not by luck: no teammate exits here
        wait_until(lambda: not procs_with(LEFT), 20, "the daemon left behind to be killed")
        assert results[7]["is_error"] and "ghost" in results[7]["content"]
        assert results[8]["is_error"] and "256 KiB" in results[8]["content"]
        assert results[9]["is_error"] and "bob" in results[9]["content"]
        task = board.get(ws, TEAM, 1)
        assert (task["status"], task["owner"]) == ("in_progress", "bob")
        assert not any("BIG-5e0c" in m["content"] for m in inbox.peek(ws, TEAM, "lead"))
        assert not ws.store.paths.inbox(TEAM, "ghost").exists()
        mail.send("alice", "ALIVE are you?")
        wait_until(lambda: any(m["content"] == "STILL-HERE"
                               for m in inbox.peek(ws, TEAM, "lead")), T, "the answer")
        wait_until(lambda: member(ws, TEAM, "alice")["status"] == "idle", T, "alice idle")
        rss = psutil.Process(pid).memory_info().rss
        m = member(ws, TEAM, "alice")
        assert live_pid(ws, TEAM, "alice") == pid and m["restarts"] == 0
        figure("hostile calls refused or bounded", f"{len(calls)} (alice's RSS after the "
               f"100 MB output: {rss / 2**20:.0f} MiB, tool result {len(flood['content'])} "
               "characters)")
        assert rss < 300 * 2**20
        assert_statuses_true(ws, daemon)
        assert_no_strays(tmp_path, daemon)
        assert_shown_once(ws, server, mail.sent)
        assert_tasks_once(ws, all_done=False)
    assert_no_strays(tmp_path, None)
