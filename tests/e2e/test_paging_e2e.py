"""The `person_needed` hook end to end (CONTRACT.md section 11, issue 19): a real `teamd
run` pages the person through a real `/bin/sh` hook when a permission request lands in their
inbox — never blocking anything, at most once per message, across a restart of teamd too —
and only for the person's own inbox (`user_inbox.jsonl` beside an LLM lead)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from teamd import actions, inbox
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import (
    TEAM,
    T,
    events_of,
    make_team,
    running_teamd,
    tool_use,
    wait_status,
    wait_until,
)
from tests.helpers_proc import ctl


def configure(ws: Workspace, pages: Path, hook_body: str = "exit 3") -> None:
    """Every page saves its event and environment in `pages`, then runs `hook_body`."""
    pages.mkdir(exist_ok=True)
    hook = (f'n=$(date +%s%N); cat > {pages}/$n.json; env > {pages}/$n.env; {hook_body}')
    ws.settings_file.write_text('[permissions]\nask = ["bash(echo *)"]\n'
                                f"[hooks]\nperson_needed = {json.dumps(hook)}\n")


def pages_in(pages: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(pages.glob("*.json"))
            if p.read_text().endswith("\n")]


def hook_runs(ws: Workspace) -> list[dict[str, Any]]:
    return [e for e in events_of(ws, "*", "hook_run") if e["hook"] == "person_needed"]


def asks(server: ScriptedServer, agent: str, trigger: str | None, command: str) -> None:
    """`agent` runs `command` (which asks first) when `trigger` reaches it (None: at once),
    then ends its turn."""
    when: dict[str, Any] = {"agent": agent, "times": 1}
    if trigger is not None:
        when["contains"] = trigger
    server.add_rule({**when, "reply": {"content": [tool_use("bash", command=command)]}})


def test_a_request_pages_once_without_blocking_even_across_a_restart(
        ws: Workspace, server: ScriptedServer, workdir: Path, tmp_path: Path) -> None:
    pages, go = tmp_path / "pages", tmp_path / "go"
    # the hook waits until told: meanwhile nothing may wait for it
    configure(ws, pages, f"while [ ! -e {go} ]; do sleep 0.05; done; exit 3")
    asks(server, "alice", None, "echo one")
    asks(server, "alice", "again", "echo two")
    make_team(ws, workdir, "alice")
    with running_teamd(ws, server.url):
        wait_status(ws, "alice", "waiting")
        page = wait_until(lambda: pages_in(pages), T, "the page")[0]
        request = inbox.peek(ws, TEAM, "lead")[0]
        assert request["type"] == "permission_request"
        assert page == {"event": "person_needed", "team": TEAM, "message": request}
        # the hook still runs: the person answers, alice goes on and is idle
        ctl(ws, "approve", TEAM, request["request_id"])
        wait_status(ws, "alice", "idle")
        assert hook_runs(ws) == []
        go.touch()
        run = wait_until(lambda: hook_runs(ws), T, "hook_run")[0]
        assert (run["exit"], run["blocked"], run["timed_out"], run["message_id"]) == \
            (3, False, False, request["id"])
        ctl(ws, "send", TEAM, "alice", "no page for this")  # not for the person
    # teamd again, the request still in the person's inbox: not paged a second time; a
    # new request is
    assert [m["id"] for m in inbox.peek(ws, TEAM, "lead")
            if m["type"] == "permission_request"] == [request["id"]]
    with running_teamd(ws, server.url):
        ctl(ws, "send", TEAM, "alice", "again")
        wait_until(lambda: len(hook_runs(ws)) == 2, T, "the second page to run")
    seen = pages_in(pages)
    assert [p["message"]["input"] for p in seen] == ["echo one", "echo two"]
    assert len({p["message"]["id"] for p in seen}) == 2
    env = dict(line.split("=", 1) for line in sorted(pages.glob("*.env"))[0]
               .read_text().splitlines() if "=" in line)
    assert (env["TEAMD_TEAM"], env["TEAMD_EVENT"], env["TEAMD_MEMBER"], env["TEAMD_ROOT"]) \
        == (TEAM, "person_needed", "lead", str(ws.root))
    assert "ANTHROPIC_API_KEY" not in env and "test-key" not in str(env)


def test_beside_an_llm_lead_only_the_persons_inbox_pages(
        ws: Workspace, server: ScriptedServer, workdir: Path, tmp_path: Path) -> None:
    pages = tmp_path / "pages"
    configure(ws, pages)
    asks(server, "alice", None, "echo from-alice")  # asks the LLM lead: no page
    asks(server, "lead", "from-alice", "echo from-lead")  # the lead's own ask: the person's
    server.add_rule({"agent": "lead", "reply": {"content": "waiting"}})
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "lead", "lead the team", lead=True)
    actions.spawn(ws, TEAM, "alice", "work", cwd=str(workdir))
    with running_teamd(ws, server.url):
        wait_until(lambda: inbox.peek(ws, TEAM, "user"), T, "the lead's request to the user")
        wait_until(lambda: hook_runs(ws), T, "the page")
        wait_status(ws, "lead", "waiting")
    (page,) = pages_in(pages)
    assert page["message"]["type"] == "permission_request"
    assert (page["message"]["sender"], page["message"]["recipient"]) == ("lead", "user")
    assert page["message"]["input"] == "echo from-lead"
    assert len(hook_runs(ws)) == 1
