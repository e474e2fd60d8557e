"""A Claude Code teammate killed mid-call (CONTRACT §14, "Delivery, exactly once"): kill -9
of Claude Code, three times, and of the member's process, three times, each while a model
call of its turn is open at the scripted server — proven, not hoped: the server holds that
call's answer open (a stream that never ends) until the kill cuts it. After each: the member
restarted, the same Claude Code session resumed, every message shown exactly once (the
scripted server's record of what the model was given), no tool call run twice (the lines of
a marker file each call appends to)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psutil

from teamd import actions, files
from teamd.agent.claude_code import transcript
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.claude_code_team import (
    CC,
    SLOW,
    awake_with,
    claude_of,
    lines_of,
    user_turns_with,
)
from tests.harness import TEAM, asked, exit_codes, gone, live_pid, tool_use, wait_status, wait_until

#: the kills, in order: of Claude Code (the member crashes: exit 1) or of the member (-9)
KILLS = ("claude", "member") * 3
RESUMED = "cut short by a restart"


def rules(log: Path) -> tuple[dict[str, Any], ...]:
    """Round i: the message KILL-i runs one Bash call that appends `round-i` to `log`; the
    call after it (with that result) is held open at the server until the kill cuts it;
    the resumed turn is told it was cut short and ends."""
    script: list[dict[str, Any]] = [
        {"name": "resumed", "agent": CC, "contains": RESUMED, "reply": {"content": "resumed"}}]
    for i in range(len(KILLS)):
        mark = f"round-{i}"
        script += [
            {"name": f"work-{i}", "agent": CC, "contains": f"KILL-{i} ", "reply": {
                "content": [tool_use("Bash", command=f"echo {mark} | tee -a {log}",
                                     description=mark)]}},
            {"name": f"held-{i}", "agent": CC, "tool_result": "Bash", "contains": mark,
             "times": 1, "trickle": 0.2}]
    return tuple(script)


def session_ids(ws: Workspace) -> list[str]:
    return [r["id"] for r in files.read_jsonl(ws.store.paths.session(TEAM, CC)).records
            if r["type"] == "claude_session"]


def test_kills_mid_call_lose_no_message_run_no_tool_twice_and_resume_the_session(
        ws: Workspace, server: ScriptedServer, workdir: Path, claude: Path) -> None:
    log = workdir / "calls.log"
    mid_call = 0  # kills that landed while a call of the turn was open at the server
    late: list[str] = []  # messages sent as the member died
    # six crashes in a minute: above the default crash-loop limit
    with awake_with(ws, server, workdir, claude, rules(log), restart_limit=len(KILLS) + 1):
        [session] = session_ids(ws)
        for i, kind in enumerate(KILLS):
            since = len(server.requests)
            actions.send(ws, TEAM, CC, f"KILL-{i} run the step")
            held = server.wait_for(lambda r, n=i: r["rule"] == f"held-{n}", SLOW, since=since)
            wait_until(lambda: server.in_flight == 1, SLOW, "the held call in flight")
            cli, pid = claude_of(ws, CC), live_pid(ws, TEAM, CC)
            assert pid is not None
            # the held call is cc's last request, and still open: the kill lands in it
            assert server.requests[-1]["received_at"] == held["received_at"]
            assert server.in_flight == 1
            if kind == "claude":
                cli.kill()
            else:
                late.append(f"LATE-{i}")
                actions.send(ws, TEAM, CC, f"LATE-{i} sent as it dies")
                psutil.Process(pid).kill()
            # the call was cut by the kill (its answer never ends on its own)
            wait_until(lambda: server.in_flight == 0, SLOW, "the held call cut by the kill")
            mid_call += 1
            wait_until(lambda c=cli: gone(c), SLOW, "the killed Claude Code gone")
            server.wait_for(asked(RESUMED, CC), SLOW, since=since)
            again = claude_of(ws, CC)
            assert again.pid != cli.pid
            argv = again.cmdline()
            assert argv[argv.index("--resume") + 1] == session  # the same session, resumed
            if kind == "member":
                server.wait_for(lambda r, t=late[-1]: r["agent"] == CC and t in str(
                    r["body"]["messages"]), SLOW, since=since)
            wait_status(ws, CC, "idle", SLOW)
        assert mid_call == len(KILLS) == 6
        # every message in exactly one input turn of the conversation the model is given
        for text in [f"KILL-{i} " for i in range(len(KILLS))] + late:
            assert len(user_turns_with(server, CC, text)) == 1, text
        # no tool call run twice: each round's Bash appended its line once
        assert lines_of(log) == [f"round-{i}" for i in range(len(KILLS))]
        # each kill a crash of the member: of Claude Code, exit 1; of the member, SIGKILL
        assert exit_codes(ws, CC) == [(1, None) if kind == "claude" else (None, 9)
                                      for kind in KILLS]
        # one Claude Code session throughout: one id recorded, one transcript
        assert session_ids(ws) == [session]
        kept = transcript.path(ws.claude_state(TEAM, CC), session)
        assert kept is not None and len(list(kept.parent.glob("*.jsonl"))) == 1


def test_a_queued_turn_killed_before_any_reply_is_answered_once_on_resume(
        ws: Workspace, server: ScriptedServer, workdir: Path, claude: Path) -> None:
    # the window: a turn queued while Claude Code worked, taken off its queue once that
    # turn ended — its `user` entry in Claude Code's transcript, its call open at the
    # server — when the member is killed, before any reply to it
    started = workdir / "started"
    with awake_with(ws, server, workdir, claude, (
        {"name": "resumed", "agent": CC, "contains": RESUMED, "reply": {"content": "resumed"}},
        {"agent": CC, "contains": "WORK-1", "reply": {"content": [tool_use(
            "Bash", command=f"touch {started}", description="work")]}},
        # the turn's last answer takes a while: QUEUED-2, written meanwhile, is queued
        {"name": "slow", "agent": CC, "tool_result": "Bash", "delay": 3,
         "reply": {"content": "worked"}},
        {"name": "held", "agent": CC, "contains": "QUEUED-2", "times": 1, "trickle": 0.2},
    )):
        [session] = session_ids(ws)
        actions.send(ws, TEAM, CC, "WORK-1 go")
        server.wait_for(lambda r: r["rule"] == "slow", SLOW)
        actions.send(ws, TEAM, CC, "QUEUED-2 then this")
        server.wait_for(lambda r: r["rule"] == "held", SLOW)
        home = ws.claude_state(TEAM, CC)
        wait_until(lambda: any("QUEUED-2" in turn for turn in transcript.taken_in(
            home, session).turns), SLOW, "QUEUED-2's user entry in Claude Code's transcript")
        assert server.in_flight == 1  # its call is open: no reply to it yet
        pid = live_pid(ws, TEAM, CC)
        assert pid is not None
        psutil.Process(pid).kill()
        # resumed, and told to go on: the queued message answered, shown once
        server.wait_for(lambda r: r["rule"] == "resumed", SLOW)
        wait_status(ws, CC, "idle", SLOW)
        for text in ("WORK-1", "QUEUED-2"):
            assert len(user_turns_with(server, CC, text)) == 1, text
