"""A Claude Code teammate at its budget (CONTRACT §12, §14 "Cost, limits and the key"), with
the real CLI: a budget crossed by the first call of a turn of several — the next call
refused at the forwarder (a 400 naming the budget; the scripted server never sees it), the
member `paused`, the lead told once; the budget raised, it goes on and finishes that turn.
And a paused member still answers a `shutdown_request` (for it, the harness) and leaves."""

from __future__ import annotations

import json
from pathlib import Path

import psutil

from teamd import actions, files
from teamd.agent.claude_code import transcript
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.claude_code_team import CC, SLOW, claude_of, lines_of
from tests.harness import (
    TEAM,
    asked,
    events_of,
    exit_codes,
    lead_inbox,
    live_pid,
    make_team,
    member,
    running_teamd,
    tool_use,
    wait_status,
    wait_until,
)


def budget_told(ws: Workspace) -> list[str]:
    return [m["member"] for m in lead_inbox(ws) if m["type"] == "budget_reached"]


def spawn_claude_code(ws: Workspace, workdir: Path, claude: Path) -> None:
    (ws.root / "teamd.toml").write_text(f'claude_code = "{claude}"\n')
    make_team(ws, workdir)
    actions.spawn(ws, TEAM, CC, "Wait for work from the lead.", cwd=str(workdir),
                  runtime="claude-code")


def cap_at_the_next_call(ws: Workspace) -> None:
    """A member budget a hair above what cc has spent: its next call passes it."""
    spent = member(ws, TEAM, CC)["usage"]["cost_usd"]
    assert spent > 0
    actions.set_budget(ws, TEAM, f"{spent + 1e-9:.12f}", member=CC)


def paused_at_spend_2(ws: Workspace, server: ScriptedServer) -> None:
    """cc, idle, capped at its next call: SPEND-1 passes the budget, SPEND-2 is refused
    and leaves it `paused`."""
    cap_at_the_next_call(ws)
    actions.send(ws, TEAM, CC, "SPEND-1 this call passes the budget")
    server.wait_for(asked("SPEND-1", CC), SLOW)
    wait_status(ws, CC, "idle", SLOW)
    actions.send(ws, TEAM, CC, "SPEND-2 this one is refused")
    wait_status(ws, CC, "paused", SLOW)


def test_a_budget_crossed_mid_turn_pauses_it_and_raised_it_finishes_the_turn(
        ws: Workspace, server: ScriptedServer, workdir: Path, claude: Path) -> None:
    log = workdir / "steps.log"

    def step(n: int) -> dict[str, object]:
        return {"content": [tool_use("Bash", command=f"echo step{n} | tee -a {log}",
                                     description=f"step {n}")]}

    for rule in (
        # once the budget is raised: the turn goes on with its second step, then ends
        {"name": "go-on", "agent": CC, "contains": "budget that paused", "reply": step(2)},
        {"name": "finished", "agent": CC, "tool_result": "Bash", "contains": "step2",
         "reply": {"content": "turn finished"}},
        # the turn: a first call (passes the budget), Bash, then a call that is refused
        {"name": "first", "agent": CC, "contains": "MULTI-1", "reply": step(1)},
        {"name": "refused", "agent": CC, "tool_result": "Bash", "contains": "step1",
         "reply": {"content": "never sent"}},
    ):
        server.add_rule(rule)
    spawn_claude_code(ws, workdir, claude)
    with running_teamd(ws, server.url):
        wait_status(ws, CC, "idle", SLOW)
        cap_at_the_next_call(ws)
        actions.send(ws, TEAM, CC, "MULTI-1 two steps, please")
        wait_status(ws, CC, "paused", SLOW)
        first = server.wait_for(lambda r: r["rule"] == "first", SLOW)
        assert lines_of(log) == ["step1"]  # the first call went through, and its Bash ran
        # the next call was refused at the forwarder: the server never saw it
        assert server.requests[-1]["received_at"] == first["received_at"]
        assert member(ws, TEAM, CC)["last_error"].startswith("member budget reached")
        # ... with a 400 naming the budget, as Claude Code's own transcript has it
        session = next(r["id"] for r in files.read_jsonl(ws.store.paths.session(
            TEAM, CC)).records if r["type"] == "claude_session")
        home = ws.claude_state(TEAM, CC)
        kept = wait_until(lambda: [p for p in (home / ".claude" / "projects").glob("*/*.jsonl")
                                   if "member budget reached" in p.read_text()],
                          SLOW, "the refusal in Claude Code's transcript")
        said = [json.loads(line) for line in kept[0].read_text().splitlines()
                if "member budget reached" in line]
        assert any("400" in json.dumps(entry) for entry in said), said
        assert transcript.path(home, session) == kept[0]
        wait_until(lambda: budget_told(ws) == [CC], SLOW, "the lead told of the budget")
        assert [e["scope"] for e in events_of(ws, CC, "budget_reached")] == ["member"]
        # raised: the member goes on, the turn's second step runs, the turn ends
        actions.set_budget(ws, TEAM, 100, member=CC)
        server.wait_for(lambda r: r["rule"] == "finished", SLOW)
        wait_status(ws, CC, "idle", SLOW)
        assert lines_of(log) == ["step1", "step2"]
        assert [r["rule"] for r in server.requests if r["rule"] == "refused"] == []
        assert budget_told(ws) == [CC]  # told once
        assert [e["scope"] for e in events_of(ws, CC, "budget_reached")] == ["member"]


def test_a_paused_claude_code_member_answers_a_shutdown_and_leaves(
        ws: Workspace, server: ScriptedServer, workdir: Path, claude: Path) -> None:
    spawn_claude_code(ws, workdir, claude)
    with running_teamd(ws, server.url):
        wait_status(ws, CC, "idle", SLOW)
        paused_at_spend_2(ws, server)
        cli, pid = claude_of(ws, CC), live_pid(ws, TEAM, CC)
        assert pid is not None
        calls = len(server.requests)
        rid = actions.shutdown(ws, TEAM, CC, reason="wrap up")["request"]["request_id"]
        answer = wait_until(lambda: [m for m in lead_inbox(ws)
                                     if m["type"] == "shutdown_response"], SLOW, "the answer")
        assert (answer[0]["request_id"], answer[0]["approve"]) == (rid, True)
        wait_status(ws, CC, "shutdown", SLOW)
        assert wait_until(lambda: exit_codes(ws, CC), SLOW, "the exit") == [(0, None)]
        wait_until(lambda: not psutil.pid_exists(pid), SLOW, f"pid {pid} reaped")
        wait_until(lambda: not cli.is_running() or cli.status() == psutil.STATUS_ZOMBIE,
                   SLOW, "its Claude Code gone with it")
        assert len(server.requests) == calls  # it left without calling the model again
