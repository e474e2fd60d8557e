"""What a Claude Code teammate is refused, proven not run (CONTRACT §14 "Rules and hooks
hold", §6 plan approval, §11): the real pinned CLI run by a real member of a real `teamd
run`, against the scripted server. A plan rejected then approved — through Claude Code's
own `ExitPlanMode`, in its own plan mode, and through `mcp__teamd__SubmitPlan`; an `ask`
approved and one rejected; a `pre_tool_use` hook that blocks. Each refused call leaves
its marker file absent, each allowed one runs once, and what refused it reaches Claude
Code as the tool's error, seen in its next request at the scripted server."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from teamd import actions, requests
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.claude_code_team import CC, SLOW, awake_with, mcp
from tests.harness import (
    TEAM,
    events_of,
    exit_codes,
    lead_inbox,
    make_team,
    running_teamd,
    tool_use,
    wait_status,
    wait_until,
)
from tests.helpers_proc import teamctl_text


@contextlib.contextmanager
def planning_with(ws: Workspace, server: ScriptedServer, workdir: Path, claude: Path,
                  rules: tuple[dict[str, Any], ...]) -> Iterator[None]:
    """A team whose one member runs Claude Code in plan mode (the rules scripted), running,
    the member idle."""
    for rule in rules:
        server.add_rule(rule)
    (ws.root / "teamd.toml").write_text(f'claude_code = "{claude}"\n')
    make_team(ws, workdir)
    actions.spawn(ws, TEAM, CC, "Wait for work from the lead.", cwd=str(workdir),
                  runtime="claude-code", plan_mode=True)
    with running_teamd(ws, server.url):
        wait_status(ws, CC, "idle", SLOW)
        yield


def plans(ws: Workspace) -> list[dict[str, Any]]:
    """The plan requests the lead was sent, oldest first."""
    return [m for m in lead_inbox(ws) if m["type"] == "plan_approval_request"]


def error_results(request: dict[str, Any]) -> list[str]:
    """The texts of the error tool results a request brings since the model's last reply
    (a message absorbed mid-turn may follow them, as a `system` turn)."""
    messages = request["body"]["messages"]
    replies = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    since = messages[replies[-1] + 1:] if replies else messages
    return [str(b.get("content")) for m in since if isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_result" and b.get("is_error")]


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_exit_plan_mode_rejected_then_approved(
        ws: Workspace, server: ScriptedServer, workdir: Path, claude: Path) -> None:
    target = workdir / "target.txt"
    with planning_with(ws, server, workdir, claude, (
        {"agent": CC, "contains": "PLAN-1", "reply": {"content": [tool_use(
            "Write", file_path=str(target), content="too early\n")]}},
        # refused by teamd's gate (and Claude Code's plan mode): it plans instead
        {"name": "gated", "agent": CC, "contains": "plan mode: submit a plan",
         "reply": {"content": [tool_use("ExitPlanMode", plan="PLAN-A write target.txt")]}},
        {"name": "revise", "agent": CC, "contains": "FIX-STEP-2", "times": 1,
         "reply": {"content": [tool_use("ExitPlanMode", plan="PLAN-B write it, then check")]}},
        {"name": "go", "agent": CC, "tool_result": "ExitPlanMode",
         "contains": "approved exiting plan mode", "reply": {"content": [tool_use(
             "Write", file_path=str(target), content="as planned\n")]}},
        {"name": "wrote", "agent": CC, "tool_result": "Write", "contains": "successfully",
         "reply": {"content": "written as planned"}},
    )):
        actions.send(ws, TEAM, CC, "PLAN-1 write target.txt")
        first = wait_until(lambda: plans(ws), SLOW, "the first plan")[0]
        assert first["content"] == "PLAN-A write target.txt"
        wait_status(ws, CC, "waiting", SLOW)  # ExitPlanMode waits for the lead
        assert not target.exists()  # the early Write was refused
        rejected = teamctl_text(ws, "reject", TEAM, first["request_id"], "--feedback",
                                "FIX-STEP-2 add a check")
        assert rejected.returncode == 0, rejected.stderr
        # the feedback reached Claude Code as ExitPlanMode's error, in its next request
        revise = server.wait_for(lambda r: r["agent"] == CC and r["rule"] == "revise", SLOW)
        assert any("FIX-STEP-2 add a check" in e for e in error_results(revise))
        second = wait_until(lambda: plans(ws)[1:], SLOW, "the revised plan")[0]
        assert second["content"] == "PLAN-B write it, then check"
        wait_status(ws, CC, "waiting", SLOW)
        assert not target.exists()  # still nothing written: the plan is not approved
        approved = teamctl_text(ws, "approve", TEAM, second["request_id"])
        assert approved.returncode == 0, approved.stderr
        # approved: Claude Code leaves its plan mode in the same turn and writes
        server.wait_for(lambda r: r["agent"] == CC and r["rule"] == "wrote", SLOW)
        assert target.read_text() == "as planned\n"
        assert [requests.get(ws, TEAM, p["request_id"])["status"]
                for p in (first, second)] == ["rejected", "approved"]
        wait_status(ws, CC, "idle", SLOW)
        writes = [e["ok"] for e in events_of(ws, CC, "tool_call") if e["tool"] == "Write"]
        assert writes == [False, True]


def test_a_shutdown_ends_the_wait_for_a_plan(
        ws: Workspace, server: ScriptedServer, workdir: Path, claude: Path) -> None:
    plan_it = {"agent": CC, "contains": "PLAN-1",
               "reply": {"content": [tool_use("ExitPlanMode", plan="PLAN-A")]}}
    with planning_with(ws, server, workdir, claude, (plan_it,)):
        actions.send(ws, TEAM, CC, "PLAN-1 plan it")
        plan = wait_until(lambda: plans(ws), SLOW, "the plan")[0]
        wait_status(ws, CC, "waiting", SLOW)
        rid = actions.shutdown(ws, TEAM, CC, reason="wrap up")["request"]["request_id"]
        wait_status(ws, CC, "shutdown", SLOW)
        record = requests.get(ws, TEAM, plan["request_id"])
        assert (record["status"], record["answer_reason"]) == ("rejected", "shutting down")
        assert requests.get(ws, TEAM, rid)["status"] == "approved"
        assert wait_until(lambda: exit_codes(ws, CC), SLOW, "the exit") == [(0, None)]


def test_submit_plan_approved_takes_claude_code_out_of_plan_mode(
        ws: Workspace, server: ScriptedServer, workdir: Path, claude: Path) -> None:
    early, target = workdir / "early", workdir / "target.txt"
    target.write_text("old line\n")
    with planning_with(ws, server, workdir, claude, (
        {"agent": CC, "contains": "PLAN-1", "reply": {"content": [tool_use(
            "Bash", command=f"touch {early}", description="too early")]}},
        {"agent": CC, "contains": "submit a plan with SubmitPlan",
         "reply": mcp("SubmitPlan", plan="1. edit it")},
        {"agent": CC, "tool_result": "mcp__teamd__SubmitPlan",
         "reply": {"content": "submitted, waiting"}},
        {"name": "go", "agent": CC, "contains": 'type="plan_approval_response"',
         "reply": {"content": [tool_use("Edit", file_path=str(target),
                                        old_string="old", new_string="new")]}},
        {"name": "edited", "agent": CC, "tool_result": "Edit", "reply": {"content": "done"}},
    )):
        actions.send(ws, TEAM, CC, "PLAN-1 edit target.txt")
        plan = wait_until(lambda: plans(ws), SLOW, "the plan")[0]
        assert plan["content"] == "1. edit it"
        wait_status(ws, CC, "idle", SLOW)  # SubmitPlan returns: the member waits idle
        assert not early.exists()  # the gate refused the Bash call
        approved = teamctl_text(ws, "approve", TEAM, plan["request_id"])
        assert approved.returncode == 0, approved.stderr
        go = server.wait_for(lambda r: r["agent"] == CC and r["rule"] == "go", SLOW)
        # out of plan mode before the answer was given (the control request), so the Edit
        # runs: in plan mode Claude Code itself would refuse it
        assert "Exited Plan Mode" in str(go["body"]["messages"])
        server.wait_for(lambda r: r["agent"] == CC and r["rule"] == "edited", SLOW)
        assert target.read_text() == "new line\n"
        assert not early.exists()


def test_an_ask_approved_runs_once_and_one_rejected_never_runs(
        ws: Workspace, server: ScriptedServer, workdir: Path, claude: Path) -> None:
    ran, never = workdir / "ran.log", workdir / "never"

    def bash(command: str) -> dict[str, Any]:
        return {"content": [tool_use("Bash", command=command, description="mark")]}

    with awake_with(ws, server, workdir, claude, (
        {"agent": CC, "contains": "ASK-1", "reply": bash(f"echo once >> {ran}")},
        {"agent": CC, "contains": "ASK-2", "reply": bash(f"touch {never}")},
        {"name": "told", "agent": CC, "tool_result": "Bash", "reply": {"content": "ok"}},
    ), permissions='ask = ["Bash(echo *)", "Bash(touch *)"]'):
        actions.send(ws, TEAM, CC, "ASK-1 mark it")
        ask = wait_until(lambda: [m for m in lead_inbox(ws)
                                  if m["type"] == "permission_request"], SLOW, "the ask")[0]
        assert (ask["tool"], ask["rule"]) == ("Bash", "Bash(echo *)")
        wait_status(ws, CC, "waiting", SLOW)
        assert not ran.exists()  # not before the answer
        approved = teamctl_text(ws, "approve", TEAM, ask["request_id"])
        assert approved.returncode == 0, approved.stderr
        server.wait_for(lambda r: r["agent"] == CC and r["rule"] == "told", SLOW)
        wait_status(ws, CC, "idle", SLOW)
        assert lines_of(ran) == ["once"]
        assert requests.get(ws, TEAM, ask["request_id"])["ran"] is True

        actions.send(ws, TEAM, CC, "ASK-2 mark that")
        second = wait_until(lambda: [m for m in lead_inbox(ws)
                                     if m["type"] == "permission_request"][1:], SLOW,
                            "the second ask")[0]
        wait_status(ws, CC, "waiting", SLOW)
        rejected = teamctl_text(ws, "reject", TEAM, second["request_id"], "--feedback",
                                "NOT-THAT-ONE")
        assert rejected.returncode == 0, rejected.stderr
        told = server.wait_for(lambda r: r["agent"] == CC and r["rule"] == "told"
                               and error_results(r), SLOW)
        assert error_results(told) and "permission refused: NOT-THAT-ONE" in \
            error_results(told)[0]
        wait_status(ws, CC, "idle", SLOW)
        assert not never.exists()
        assert lines_of(ran) == ["once"]  # the approved call never ran again
        assert not requests.get(ws, TEAM, second["request_id"]).get("ran")


def test_a_pre_tool_use_hook_that_blocks_keeps_the_call_from_running(
        ws: Workspace, server: ScriptedServer, workdir: Path, claude: Path) -> None:
    mark, heard = workdir / "mark", workdir / "hook-heard.json"
    with awake_with(ws, server, workdir, claude, (
        {"agent": CC, "contains": "HOOK-1", "reply": {"content": [tool_use(
            "Bash", command=f"touch {mark}", description="mark")]}},
        {"name": "told", "agent": CC, "tool_result": "Bash",
         "reply": {"content": "blocked, fine"}},
    ), hooks=f"pre_tool_use = \"cat > {heard}; "
             "echo 'NO-MARKS-TODAY: the tree is frozen' >&2; exit 2\""):
        actions.send(ws, TEAM, CC, "HOOK-1 mark it")
        told = server.wait_for(lambda r: r["agent"] == CC and r["rule"] == "told", SLOW)
        assert any("NO-MARKS-TODAY: the tree is frozen" in e for e in error_results(told))
        assert not mark.exists()  # the call never ran
        assert f"touch {mark}" in heard.read_text()  # the hook saw the call, and blocked it
        runs = events_of(ws, CC, "hook_run")
        assert [(e["hook"], e["exit"]) for e in runs] == [("pre_tool_use", 2)]
        wait_status(ws, CC, "idle", SLOW)
