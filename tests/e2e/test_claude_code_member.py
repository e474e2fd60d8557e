"""A Claude Code teammate (CONTRACT §14), end to end: the real pinned CLI run by a real
member process of a real `teamd run`, talking to the scripted server through the member's
forwarder, beside a built-in teammate in the same team — messages both ways, a task
assigned, done with Claude Code's own `Edit`, completed through the team tools' MCP server
(`mcp__teamd__TaskUpdate`); every message shown to it exactly once; idle → sleep (exit 75,
no process left) → woken by mail → the same Claude Code session resumed."""

from __future__ import annotations

import json
from pathlib import Path

import psutil

from teamd import actions, board, files, requests, roster
from teamd.agent.claude_code import transcript
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.claude_code_team import (
    BI,
    CC,
    SLOW,
    awake_with,
    claude_of,
    lines_of,
    mcp,
    team_with_claude_code,
    user_turns_with,
)
from tests.harness import (
    TEAM,
    asked,
    events_of,
    exit_codes,
    lead_inbox,
    live_pid,
    make_team,
    procs_with,
    running_teamd,
    tool_use,
    turn_text,
    wait_status,
    wait_until,
)
from tests.helpers_proc import teamctl_text


def test_a_claude_code_teammate_works_beside_a_built_in_one(
        ws: Workspace, server: ScriptedServer, workdir: Path, claude: Path) -> None:
    target = workdir / "greeting.txt"
    target.write_text("hello old world\n")
    for rule in (
        # lead → cc → bi (through the MCP server) → cc
        {"agent": CC, "contains": "PING-cc1", "reply": mcp(
            "SendMessage", recipient=BI, content="HELLO-bi2")},
        {"agent": BI, "contains": "HELLO-bi2", "reply": {"content": [tool_use(
            "SendMessage", recipient=CC, content="BACK-cc3")]}},
        # Claude Code's own SendMessage (its agent teams') would reach nobody: not given
        {"agent": CC, "contains": "BACK-cc3", "reply": {"content": [tool_use(
            "SendMessage", to="lead", message="lost")]}},
        {"name": "no-own", "agent": CC, "tool_result": "SendMessage",
         "reply": {"content": "got it"}},
        # a task assigned: Read, Edit (Claude Code's own), then TaskUpdate (the team's)
        {"agent": CC, "contains": "<auto-claimed>Task #1: fix the greeting",
         "reply": {"content": [tool_use("Read", file_path=str(target))]}},
        {"agent": CC, "tool_result": "Read", "reply": {"content": [tool_use(
            "Edit", file_path=str(target), old_string="old", new_string="new")]}},
        {"agent": CC, "tool_result": "Edit", "reply": mcp(
            "TaskUpdate", task_id=1, status="completed")},
        {"agent": CC, "tool_result": "mcp__teamd__TaskUpdate",
         "reply": {"content": "task done"}},
    ):
        server.add_rule(rule)
    team_with_claude_code(ws, workdir, claude)
    with running_teamd(ws, server.url):
        wait_status(ws, CC, "idle", SLOW)
        wait_status(ws, BI, "idle")
        actions.send(ws, TEAM, CC, "PING-cc1 say hello to bi")
        server.wait_for(asked("BACK-cc3", CC), SLOW)
        own = server.wait_for(lambda r: r["rule"] == "no-own", SLOW)["body"]["messages"]
        assert "No such tool available" in turn_text(own[-1]) or \
            "No such tool available" in turn_text(own[-2])
        wait_status(ws, CC, "idle", SLOW)
        board.create(ws, TEAM, "fix the greeting", owner=CC)
        wait_until(lambda: board.get(ws, TEAM, 1)["status"] == "completed", SLOW,
                   "task 1 completed by cc")
        wait_status(ws, CC, "idle", SLOW)
        assert target.read_text() == "hello new world\n"
        # each message and the task reached Claude Code once, in its section 6 form
        for text in ("PING-cc1", "BACK-cc3", "<auto-claimed>Task #1"):
            assert len(user_turns_with(server, CC, text)) == 1, text
        assert ('<teammate-message sender="bi" type="message">BACK-cc3'
                "</teammate-message>") in turn_text(
            [r for r in server.requests if r["agent"] == CC][-1]["body"]["messages"][
                user_turns_with(server, CC, "BACK-cc3")[0]])
        # each call journaled once as cc's: the team tools' (by the MCP server, acting as
        # cc) and Claude Code's own (by the member, from what Claude Code said)
        calls = [(e["tool"], e["ok"]) for e in events_of(ws, CC, "tool_call")]
        assert sorted(calls) == [("Edit", True), ("Read", True), ("SendMessage", False),
                                 ("SendMessage", True), ("TaskUpdate", True)]
        # the forwarder counted cc's calls like any member's
        assert events_of(ws, CC, "model_call")
        # the conversation is mirrored into its session: `transcript` shows it
        shown = teamctl_text(ws, "transcript", TEAM, CC)
        assert shown.returncode == 0, shown.stderr
        for said in ("got it", "mcp__teamd__SendMessage", "Edit", "task done",
                     "BACK-cc3"):
            assert said in shown.stdout, said
        # `status` says which agent each member runs
        table = teamctl_text(ws, "status").stdout.splitlines()
        assert "RUNTIME" in next(line for line in table if line.startswith("NAME "))
        assert [line.split()[1] for line in table if line.split()[:1] in ([CC], [BI])] == [
            "teamd", "claude-code"]
        pid = live_pid(ws, TEAM, CC)
        assert pid is not None
        cli = [p for p in psutil.Process(pid).children(recursive=True)
               if "claude" in " ".join(p.cmdline())]
        assert cli, "Claude Code runs as the member's child"
    assert exit_codes(ws, CC)  # the member left with teamd, and its Claude Code with it
    wait_until(lambda: all(not p.is_running() or p.status() == psutil.STATUS_ZOMBIE
                           for p in cli), SLOW, "no Claude Code left")


def test_a_message_given_while_it_works_reaches_it_after_its_next_tool_call(
        ws: Workspace, server: ScriptedServer, workdir: Path, claude: Path) -> None:
    log = workdir / "calls.log"
    with awake_with(ws, server, workdir, claude, (
        {"agent": CC, "contains": "WORK-1", "reply": {"content": [tool_use(
            "Bash", command=f"echo work1 >> {log}; sleep 3", description="work1")]}},
        {"agent": CC, "tool_result": "Bash", "reply": {"content": "bash done"}},
    )):
        # a message landing while Claude Code works reaches it after its next tool call,
        # with that call's result, not at the end of the turn (kills: test_claude_code_faults)
        actions.send(ws, TEAM, CC, "WORK-1 run the command")
        wait_until(lambda: "work1" in lines_of(log), SLOW, "the Bash call to run")
        actions.send(ws, TEAM, CC, "MID-2 while you work")
        with_result = server.wait_for(lambda r: r["agent"] == CC and "MID-2" in turn_text(
            r["body"]["messages"][-1]), SLOW)["body"]["messages"]
        assert with_result[-1]["role"] == "system"  # Claude Code's way of saying it
        assert [b["type"] for b in with_result[-2]["content"]] == ["tool_result"]
        wait_status(ws, CC, "idle", SLOW)
        for text in ("WORK-1", "MID-2"):
            assert len(user_turns_with(server, CC, text)) == 1, text
        assert lines_of(log) == ["work1"]


def test_idle_sleeps_with_nothing_left_and_mail_resumes_the_session(
        ws: Workspace, server: ScriptedServer, workdir: Path, claude: Path) -> None:
    server.add_rule({"agent": CC, "contains": "FIRST-1", "reply": {"content": "noted one"}})
    server.add_rule({"agent": CC, "contains": "AGAIN-2", "reply": {"content": "noted two"}})
    team_with_claude_code(ws, workdir, claude)
    with running_teamd(ws, server.url, idle_timeout=3):
        claude_of(ws, CC)
        actions.send(ws, TEAM, CC, "FIRST-1 remember this")
        server.wait_for(asked("FIRST-1", CC), SLOW)
        # the turn ended: idle, and the lead hears of it
        wait_until(lambda: [m for m in lead_inbox(ws) if m["type"] == "idle_notification"
                            and m["sender"] == CC], SLOW, "cc's idle_notification")
        # idle_timeout: Claude Code stopped, the member sleeps (exit 75), nothing is left
        wait_status(ws, CC, "sleeping", SLOW)
        assert 75 in [code for code, _ in exit_codes(ws, CC)]
        session_ids = [r["id"] for r in files.read_jsonl(ws.store.paths.session(TEAM, CC)).records
                       if r["type"] == "claude_session"]
        assert len(session_ids) == 1
        assert procs_with(session_ids[0]) == []
        # woken by mail: the same Claude Code session, resumed
        actions.send(ws, TEAM, CC, "AGAIN-2 and this")
        woken = server.wait_for(asked("AGAIN-2", CC), SLOW)
        assert "FIRST-1" in str(woken["body"]["messages"])  # the conversation goes on
        for text in ("FIRST-1", "AGAIN-2"):
            assert len(user_turns_with(server, CC, text)) == 1, text
        # in the same Claude Code session: its own transcript holds both turns
        kept = transcript.path(ws.claude_state(TEAM, CC), session_ids[0])
        assert kept is not None
        wait_until(lambda: "AGAIN-2" in kept.read_text(), SLOW, "the turn in its transcript")
        assert len(list(kept.parent.glob("*.jsonl"))) == 1


def test_rules_hold_over_claude_codes_own_tools(
        ws: Workspace, server: ScriptedServer, workdir: Path, claude: Path) -> None:
    keep, secret = workdir / "keep.txt", workdir / "secret.txt"
    keep.write_text("keep me\n")
    for rule in (
        {"agent": CC, "contains": "RULES-1", "reply": {"content": [tool_use(
            "Bash", command=f"rm {keep.name}", description="remove")]}},
        {"agent": CC, "tool_result": "Bash", "reply": {"content": [tool_use(
            "Write", file_path=str(secret), content="s3cret\n")]}},
        {"agent": CC, "tool_result": "Write", "reply": {"content": [tool_use(
            "WebFetch", url="https://example.com/", prompt="read it")]}},
        {"name": "last", "agent": CC, "tool_result": "WebFetch",
         "reply": {"content": "rules done"}},
    ):
        server.add_rule(rule)
    team_with_claude_code(ws, workdir, claude)
    # a rule naming Claude Code's tool (Bash, WebFetch) applies to it; one naming the
    # ruled tool standing for it (write_file) applies to Write
    with ws.settings_file.open("a") as toml:
        toml.write('[permissions]\ndeny = ["Bash(rm *)", "WebFetch"]\n'
                   'ask = ["write_file(secret*)"]\n')
    with running_teamd(ws, server.url):
        actions.send(ws, TEAM, CC, "RULES-1 tidy up")
        # deny: the call never ran, and Claude Code was told why as the tool's error
        server.wait_for(lambda r: r["agent"] == CC and 'denied by rule "Bash(rm *)"' in str(
            r["body"]["messages"][-2:]), SLOW)
        assert keep.exists()
        # ask: the lead is asked, named by Claude Code's tool; the call waits, then runs
        ask = wait_until(lambda: [m for m in lead_inbox(ws)
                                  if m["type"] == "permission_request"], SLOW, "the ask")[0]
        assert (ask["sender"], ask["tool"], ask["rule"]) == (CC, "Write", "write_file(secret*)")
        assert requests.get(ws, TEAM, ask["request_id"])["input"]["content"] == "s3cret\n"
        assert not secret.exists()
        wait_status(ws, CC, "waiting", SLOW)
        requests.answer(ws, TEAM, ask["request_id"], True)
        last = server.wait_for(lambda r: r["agent"] == CC and r["rule"] == "last", SLOW)
        assert secret.read_text() == "s3cret\n"
        assert 'denied by rule "WebFetch"' in str(last["body"]["messages"][-2:])
        assert [(e["tool"], e["rule"]) for e in events_of(ws, CC, "tool_denied")] == [
            ("Bash", "Bash(rm *)"), ("WebFetch", "WebFetch")]
        wait_status(ws, CC, "idle", SLOW)


def test_the_projects_claude_settings_cannot_switch_the_rules_off(
        ws: Workspace, server: ScriptedServer, workdir: Path, claude: Path) -> None:
    keep, mark = workdir / "keep.txt", workdir / "project-hook-ran"
    keep.write_text("keep me\n")
    # the project's settings try everything: hooks off, Bash pre-allowed, and a hook of
    # its own that allows any call
    allow = json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                               "permissionDecision": "allow"}})
    (workdir / ".claude").mkdir()
    (workdir / ".claude" / "settings.json").write_text(json.dumps({
        "disableAllHooks": True, "permissions": {"allow": ["Bash", "Write"]},
        "hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
            {"type": "command", "command": f"touch {mark}; echo '{allow}'"}]}]}}))
    server.add_rule({"agent": CC, "contains": "RULES-1", "reply": {"content": [tool_use(
        "Bash", command=f"rm {keep.name}", description="remove")]}})
    server.add_rule({"name": "told", "agent": CC, "tool_result": "Bash",
                     "reply": {"content": "not removed"}})
    team_with_claude_code(ws, workdir, claude)
    with ws.settings_file.open("a") as toml:
        toml.write('[permissions]\ndeny = ["Bash(rm *)"]\n')
    with running_teamd(ws, server.url):
        actions.send(ws, TEAM, CC, "RULES-1 tidy up")
        told = server.wait_for(lambda r: r["agent"] == CC and r["rule"] == "told", SLOW)
        assert 'denied by rule "Bash(rm *)"' in str(told["body"]["messages"][-2:])
        assert keep.exists()
        assert mark.exists()  # the project's settings were read: hooks were not off
        assert [(e["tool"], e["rule"]) for e in events_of(ws, CC, "tool_denied")] == [
            ("Bash", "Bash(rm *)")]
        wait_status(ws, CC, "idle", SLOW)


def test_a_shutdown_asked_mid_turn_reaches_it_and_the_member_leaves(
        ws: Workspace, server: ScriptedServer, workdir: Path, claude: Path) -> None:
    mark = workdir / "started"
    server.add_rule({"agent": CC, "contains": "LONG-1", "reply": {"content": [tool_use(
        "Bash", command=f"touch {mark}; sleep 2", description="work")]}})
    server.add_rule({"agent": CC, "tool_result": "Bash",
                     "reply": {"content": "Carrying on with my work."}})
    team_with_claude_code(ws, workdir, claude)
    with running_teamd(ws, server.url):
        wait_status(ws, CC, "idle", SLOW)
        actions.send(ws, TEAM, CC, "LONG-1 work a while")
        wait_until(mark.exists, SLOW, "the Bash call to start")
        cli, pid = claude_of(ws, CC), live_pid(ws, TEAM, CC)
        rid = actions.shutdown(ws, TEAM, CC, reason="wrap up")["request"]["request_id"]
        # shown after the tool call that was running, not at the end of the turn
        seen = server.wait_for(lambda r: r["agent"] == CC and rid in turn_text(
            r["body"]["messages"][-1]), SLOW)["body"]["messages"]
        assert 'type="shutdown_request"' in turn_text(seen[-1])
        assert [b["type"] for b in seen[-2]["content"]] == ["tool_result"]
        # the turn ended without an answer: the harness approves, the member leaves
        answer = wait_until(lambda: [m for m in lead_inbox(ws)
                                     if m["type"] == "shutdown_response"], SLOW, "the answer")
        assert (answer[0]["request_id"], answer[0]["approve"]) == (rid, True)
        wait_status(ws, CC, "shutdown", SLOW)
        assert wait_until(lambda: exit_codes(ws, CC), SLOW, "the exit") == [(0, None)]
        assert pid is not None
        wait_until(lambda: not psutil.pid_exists(pid), SLOW, f"pid {pid} reaped")
        wait_until(lambda: not cli.is_running() or cli.status() == psutil.STATUS_ZOMBIE,
                   SLOW, "its Claude Code gone with it")


def test_a_claude_code_lead_staffs_the_team_through_the_team_tools(
        ws: Workspace, server: ScriptedServer, workdir: Path, claude: Path) -> None:
    for rule in (
        {"agent": "lead", "nth": 1, "reply": {"content": [
            {"type": "tool_use", "name": "mcp__teamd__Task", "input": {
                "name": "worker", "team_name": TEAM,
                "prompt": "Take tasks from the board and report to the lead."}},
            tool_use("mcp__teamd__TaskCreate", subject="Write hello.txt")]}},
        {"agent": "worker", "contains": "<auto-claimed>Task #1", "reply": {"content": [
            tool_use("write_file", path="hello.txt", content="hello\n"),
            tool_use("TaskUpdate", task_id=1, status="completed"),
            tool_use("SendMessage", recipient="lead", content="DONE-7 hello.txt")]}},
        {"agent": "lead", "contains": "DONE-7", "reply": {"content": "noted"}},
    ):
        server.add_rule(rule)
    (ws.root / "teamd.toml").write_text(f'claude_code = "{claude}"\n')
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "lead", "Get hello.txt written.", lead=True, cwd=str(workdir),
                  runtime="claude-code")
    with running_teamd(ws, server.url):
        wait_until(lambda: board.get(ws, TEAM, 1)["status"] == "completed"
                   if board.list_tasks(ws, TEAM) else False, SLOW, "task 1 completed")
        assert (workdir / "hello.txt").read_text() == "hello\n"
        server.wait_for(asked("DONE-7", "lead"), SLOW)
        worker = [m for m in roster.load(ws, TEAM)["members"] if m["name"] == "worker"]
        assert [(m["kind"], m["runtime"]) for m in worker] == [("teammate", "teamd")]
        assert {e["tool"] for e in events_of(ws, "lead", "tool_call")} == {"Task", "TaskCreate"}


def test_at_its_budget_it_is_paused_and_goes_on_once_the_budget_is_raised(
        ws: Workspace, server: ScriptedServer, workdir: Path, claude: Path) -> None:
    server.add_rule({"agent": CC, "contains": "budget that paused",
                     "reply": {"content": "going on"}})
    (ws.root / "teamd.toml").write_text(f'claude_code = "{claude}"\n')
    make_team(ws, workdir)
    actions.spawn(ws, TEAM, CC, "Wait for work from the lead.", cwd=str(workdir),
                  runtime="claude-code", budget_usd=0.000001)  # its first call passes it
    with running_teamd(ws, server.url):
        wait_status(ws, CC, "idle", SLOW)
        calls = len(server.requests)
        actions.send(ws, TEAM, CC, "MORE-1 keep working")
        wait_status(ws, CC, "paused", SLOW)
        assert len(server.requests) == calls  # refused by the forwarder: never sent
        wait_until(lambda: [m for m in lead_inbox(ws) if m["type"] == "budget_reached"],
                   SLOW, "the lead told of the budget")
        assert not [m for m in lead_inbox(ws) if m["type"] == "idle_notification"]
        actions.set_budget(ws, TEAM, 100, member=CC)
        server.wait_for(asked("budget that paused", CC), SLOW)
        wait_status(ws, CC, "idle", SLOW)
        assert len(user_turns_with(server, CC, "MORE-1")) == 1


def test_a_shutdown_ends_a_wait_for_permission(
        ws: Workspace, server: ScriptedServer, workdir: Path, claude: Path) -> None:
    secret = workdir / "secret.txt"
    server.add_rule({"agent": CC, "contains": "ASK-1", "reply": {"content": [tool_use(
        "Write", file_path=str(secret), content="s\n")]}})
    server.add_rule({"agent": CC, "tool_result": "Write", "reply": {"content": "stopping"}})
    team_with_claude_code(ws, workdir, claude)
    with ws.settings_file.open("a") as toml:
        toml.write('[permissions]\nask = ["Write"]\n')
    with running_teamd(ws, server.url):
        actions.send(ws, TEAM, CC, "ASK-1 write it")
        ask = wait_until(lambda: [m for m in lead_inbox(ws)
                                  if m["type"] == "permission_request"], SLOW, "the ask")[0]
        wait_status(ws, CC, "waiting", SLOW)
        rid = actions.shutdown(ws, TEAM, CC, reason="wrap up")["request"]["request_id"]
        record = wait_until(lambda: (r := requests.get(ws, TEAM, ask["request_id"]))[
            "status"] != "pending" and r, SLOW, "the ask refused")
        assert (record["status"], record["answer_reason"]) == ("rejected", "shutting down")
        wait_status(ws, CC, "shutdown", SLOW)
        assert requests.get(ws, TEAM, rid)["status"] == "approved"
        assert not secret.exists()
        assert wait_until(lambda: exit_codes(ws, CC), SLOW, "the exit") == [(0, None)]


def test_an_ask_cut_short_by_a_restart_is_answered_not_left_pending(
        ws: Workspace, server: ScriptedServer, workdir: Path, claude: Path) -> None:
    secret = workdir / "secret.txt"
    with awake_with(ws, server, workdir, claude, (
        {"agent": CC, "contains": "ASK-1", "reply": {"content": [tool_use(
            "Write", file_path=str(secret), content="s\n")]}},
        {"agent": CC, "contains": "cut short by a restart", "reply": {"content": "resumed"}},
    ), permissions='ask = ["Write"]'):
        actions.send(ws, TEAM, CC, "ASK-1 write it")
        ask = wait_until(lambda: [m for m in lead_inbox(ws)
                                  if m["type"] == "permission_request"], SLOW, "the ask")[0]
        wait_status(ws, CC, "waiting", SLOW)
        pid = live_pid(ws, TEAM, CC)
        assert pid is not None
        psutil.Process(pid).kill()  # the hook waiting for the answer dies with it
        record = wait_until(lambda: (r := requests.get(ws, TEAM, ask["request_id"]))[
            "status"] != "pending" and r, SLOW, "the ask answered at the restart")
        assert (record["status"], record["answer_reason"]) == (
            "rejected", "interrupted by a restart")
        assert live_pid(ws, TEAM, CC) not in (None, pid)  # by the member started after
        server.wait_for(asked("cut short by a restart", CC), SLOW)
        wait_status(ws, CC, "idle", SLOW)
        assert not secret.exists()
        # the answer went to nobody: the lead was asked once and told nothing more
        assert [m["type"] for m in lead_inbox(ws) if m["type"].startswith("permission")] == [
            "permission_request"]


def test_a_queued_turn_cut_short_is_resumed_as_cut_short(
        ws: Workspace, server: ScriptedServer, workdir: Path, claude: Path) -> None:
    started, late = workdir / "started", workdir / "late"
    with awake_with(ws, server, workdir, claude, (
        {"agent": CC, "contains": "WORK-1", "reply": {"content": [tool_use(
            "Bash", command=f"touch {started}", description="work")]}},
        # the turn's last answer takes a while: a message written meanwhile is queued
        # (after its last tool call), taken as a turn of its own after this one's result
        {"name": "slow", "agent": CC, "tool_result": "Bash", "delay": 3,
         "reply": {"content": "worked"}},
        {"agent": CC, "contains": "QUEUED-2", "reply": {"content": [tool_use(
            "Bash", command=f"touch {late}; sleep 120", description="long")]}},
        {"agent": CC, "contains": "cut short by a restart", "reply": {"content": "resumed"}},
    )):
        actions.send(ws, TEAM, CC, "WORK-1 go")
        server.wait_for(lambda r: r["agent"] == CC and r["rule"] == "slow", SLOW)
        actions.send(ws, TEAM, CC, "QUEUED-2 then this")
        wait_until(late.exists, SLOW, "the queued turn's Bash call to run")
        pid = live_pid(ws, TEAM, CC)
        assert pid is not None
        psutil.Process(pid).kill()
        # resumed, told its turn was cut short and its call not re-run
        resumed = server.wait_for(asked("cut short by a restart", CC), SLOW)
        assert "Bash" in turn_text(resumed["body"]["messages"][-1])
        wait_status(ws, CC, "idle", SLOW)
        for text in ("WORK-1", "QUEUED-2"):
            assert len(user_turns_with(server, CC, text)) == 1, text
