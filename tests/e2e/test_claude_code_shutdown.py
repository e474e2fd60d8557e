"""A shutdown asked while a Claude Code teammate works through a long tool loop (CONTRACT
§6, §14 "Delivery, exactly once"), with the real CLI: each Bash result brings another Bash
call; the `shutdown_request` reaches Claude Code after its next tool call, the model answers
it itself (`mcp__teamd__SendMessage` type `shutdown_response`, approve), and the member
exits 0 in the middle of the loop — no Bash call after the answer (the marker lines
counted), the request answered once."""

from __future__ import annotations

import json
from pathlib import Path

import psutil

from teamd import actions, requests
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.claude_code_team import CC, SLOW, awake_with, claude_of, lines_of, mcp
from tests.harness import (
    TEAM,
    exit_codes,
    gone,
    lead_inbox,
    live_pid,
    tool_use,
    wait_status,
    wait_until,
)

ASK_RE = r'type="shutdown_request" request_id="(?P<rid>shutdown-[0-9a-f]+)"'


def test_a_shutdown_mid_loop_is_answered_by_claude_code_after_its_next_tool_call(
        ws: Workspace, server: ScriptedServer, workdir: Path, claude: Path) -> None:
    log = workdir / "loop.log"
    step = {"content": [tool_use("Bash", command=f"echo step | tee -a {log}; sleep 0.5",
                                 description="one step")]}
    with awake_with(ws, server, workdir, claude, (
        # the request, shown with a Bash result: answered at once, by the model itself
        {"name": "answer", "agent": CC, "tool_result": "Bash", "regex": ASK_RE,
         "reply": mcp("SendMessage", recipient="lead", type="shutdown_response",
                      request_id="{rid}", approve=True, content="BYE-FROM-CC")},
        {"name": "loop", "agent": CC, "tool_result": "Bash", "reply": step},
        {"name": "start", "agent": CC, "contains": "LOOP-1", "reply": step},
    )):
        actions.send(ws, TEAM, CC, "LOOP-1 keep stepping")
        wait_until(lambda: len(lines_of(log)) >= 2, SLOW, "the loop under way")
        cli, pid = claude_of(ws, CC), live_pid(ws, TEAM, CC)
        assert pid is not None
        rid = actions.shutdown(ws, TEAM, CC, reason="wrap up")["request"]["request_id"]
        answered = server.wait_for(lambda r: r["rule"] == "answer", SLOW)
        # shown after a tool call of the loop, with its result, mid-turn
        seen = answered["body"]["messages"]
        assert rid in json.dumps(seen[-1]) and seen[-1]["role"] == "system"
        assert [b["type"] for b in seen[-2]["content"]] == ["tool_result"]
        ran = sum(1 for turn in seen if turn["role"] == "assistant"
                  for b in turn["content"] if b.get("type") == "tool_use"
                  and b.get("name") == "Bash")
        wait_status(ws, CC, "shutdown", SLOW)
        assert wait_until(lambda: exit_codes(ws, CC), SLOW, "the exit") == [(0, None)]
        wait_until(lambda: not psutil.pid_exists(pid), SLOW, f"pid {pid} reaped")
        wait_until(lambda: gone(cli), SLOW, "its Claude Code gone with it")
        # the loop stopped where the answer came: every Bash call shown ran once, no more
        assert ran >= 2 and lines_of(log) == ["step"] * ran
        assert [r["rule"] for r in server.requests].count("loop") == ran - 1
        answers = [m for m in lead_inbox(ws) if m["type"] == "shutdown_response"]
        assert [(m["request_id"], m["approve"], m["content"]) for m in answers] == \
            [(rid, True, "BYE-FROM-CC")]
        assert requests.get(ws, TEAM, rid)["status"] == "approved"
