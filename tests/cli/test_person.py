"""The person at `teamctl` (CONTRACT.md §2, "Who the person is"): `lead` without an LLM
lead, `user` beside one. `user` is a reserved name with its own inbox; `teamctl` sends as
the person and drains the person's inbox; any member may write to `user` beside an LLM
lead, and nobody can without one; answers go back to whoever asked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from teamd import actions, files, inbox, requests
from teamd.agent.tools import Toolbox
from teamd.errors import BadInput
from teamd.layout import Workspace, validate_member_name
from teamd.scripted import ScriptedServer
from tests.harness import cli, live_pid, member, running_teamd, wait_until
from tests.helpers_proc import clean_env, teamctl

TEAM = "crew"
T = 20.0
runner = CliRunner()


def jsonl(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def toolbox(ws: Workspace, name: str, kind: str = "teammate") -> Toolbox:
    return Toolbox(ws, TEAM, name, kind=kind, cwd=ws.root, bash_timeout=10,
                   plan_mode_required=False)


@pytest.fixture
def team(ws: Workspace) -> Workspace:
    cli(ws.root, "create", TEAM)
    cli(ws.root, "spawn", TEAM, "alice", "--prompt", "work")
    cli(ws.root, "spawn", TEAM, "bob", "--prompt", "work")
    return ws


# -- without a process -------------------------------------------------------------------
def test_user_is_reserved_in_every_team(team: Workspace) -> None:
    with pytest.raises(BadInput, match="reserved for the person"):
        validate_member_name("user")
    before = team.store.paths.config(TEAM).read_bytes()
    refused = cli(team.root, "spawn", TEAM, "user", "--prompt", "x", ok=False)
    assert isinstance(refused.exception, BadInput)
    assert "reserved" in str(refused.exception)
    # an LLM lead cannot hand the name out either
    cli(team.root, "spawn", TEAM, "lead", "--lead", "--prompt", "lead")
    before = team.store.paths.config(TEAM).read_bytes()
    result = toolbox(team, "lead", "lead").run("Task", {
        "name": "user", "prompt": "x", "team_name": TEAM})
    assert result.is_error and "reserved" in result.content
    assert team.store.paths.config(TEAM).read_bytes() == before
    # the real console script: exit 2, one line, nothing touched
    done = teamctl(team.root, "spawn", TEAM, "user", "--prompt", "x", env=clean_env())
    assert done.returncode == 2 and done.stderr.decode().count("\n") == 1
    assert team.store.paths.config(TEAM).read_bytes() == before


def test_without_an_llm_lead_the_person_is_lead_and_user_is_unknown(team: Workspace) -> None:
    sent = json.loads(cli(team.root, "send", TEAM, "alice", "hi", "--json").stdout)
    assert sent["sender"] == "lead"
    for args in (("send", TEAM, "user", "hi", "--sender", "alice"),
                 ("send", TEAM, "alice", "hi", "--sender", "user"),
                 ("inbox", TEAM, "user")):
        refused = cli(team.root, *args, ok=False)
        assert isinstance(refused.exception, BadInput), args
        assert "'user'" in str(refused.exception) and "LLM lead" in str(refused.exception)
    # a teammate's SendMessage to `user` is an error result, refused as unknown
    result = toolbox(team, "alice").run("SendMessage", {"recipient": "user", "content": "hi"})
    assert result.is_error and "unknown recipient 'user'" in result.content
    assert not team.store.paths.inbox(TEAM, "user").exists()
    # shutdown and its answer stay the lead's
    done = actions.shutdown(team, TEAM, "bob")
    assert done["request"]["sender"] == "lead" and done["answered"]
    # `teamctl inbox` drains the lead's inbox
    actions.send(team, TEAM, "lead", "news", sender="alice")
    assert "alice → lead: news" in cli(team.root, "inbox", TEAM).stdout
    assert inbox.peek(team, TEAM, "lead") == []


def test_beside_an_llm_lead_the_person_is_user(team: Workspace) -> None:
    cli(team.root, "spawn", TEAM, "lead", "--lead", "--prompt", "lead the team")
    to_lead = json.loads(cli(team.root, "send", TEAM, "lead", "focus on the login page",
                             "--json").stdout)
    assert (to_lead["sender"], to_lead["recipient"]) == ("user", "lead")
    assert [m["id"] for m in inbox.peek(team, TEAM, "lead")] == [to_lead["id"]]
    assert json.loads(cli(team.root, "send", TEAM, "alice", "hi", "--json").stdout
                      )["sender"] == "user"
    copies = json.loads(cli(team.root, "broadcast", TEAM, "all hands", "--json").stdout)
    assert {c["sender"] for c in copies} == {"user"}
    assert sorted(c["recipient"] for c in copies) == ["alice", "bob", "lead"]
    refused = cli(team.root, "send", TEAM, "user", "note to self", ok=False)
    assert "oneself" in str(refused.exception)
    # any member may write to the person: the teammate and the LLM lead alike
    for name, kind in (("alice", "teammate"), ("lead", "lead")):
        result = toolbox(team, name, kind).run("SendMessage", {
            "recipient": "user", "content": f"hello from {name}"})
        assert not result.is_error, result.content
    got = inbox.peek(team, TEAM, "user")
    assert [(m["sender"], m["content"]) for m in got] == [
        ("alice", "hello from alice"), ("lead", "hello from lead")]
    # the person asks for shutdowns (bob has no process: answered on its behalf, to user)
    done = actions.shutdown(team, TEAM, "bob")
    assert done["request"]["sender"] == "user" and done["answered"]
    # and the person may answer a plan the lead was sent
    plan = actions.send(team, TEAM, "lead", "my plan", type_="plan_approval_request",
                        sender="alice")
    cli(team.root, "approve", TEAM, plan["request_id"])
    answer = inbox.peek(team, TEAM, "alice")[-1]
    assert (answer["type"], answer["sender"], answer["approve"]) == \
        ("plan_approval_response", "user", True)
    # `teamctl inbox TEAM` drains the person's inbox; the LLM lead's is only peeked at
    drained = cli(team.root, "inbox", TEAM, "--json")
    assert [m["content"] for m in jsonl(drained.stdout)] == [
        "hello from alice", "hello from lead"]
    assert inbox.peek(team, TEAM, "user") == []
    peeked = cli(team.root, "inbox", TEAM, "lead")
    assert "only peeking" in peeked.stderr and inbox.peek(team, TEAM, "lead") != []


# -- with real processes -------------------------------------------------------------------
@pytest.fixture
def script() -> dict[str, Any]:
    return {"rules": [
        {"name": "answer-user", "agent": "lead",
         "regex": r'<teammate-message sender="user" type="message">(?P<text>[^<]+)<',
         "reply": {"content": [{"type": "tool_use", "name": "SendMessage", "input": {
             "recipient": "user", "content": "On it: {text}"}}]}},
    ], "default": {"content": [{"type": "text", "text": "Waiting."}]}}


def test_the_person_talks_to_an_llm_lead_and_hears_back(ws: Workspace, tmp_path: Path,
                                                        server: ScriptedServer) -> None:
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "lead", "Lead the team.", lead=True, cwd=str(tmp_path))
    actions.spawn(ws, TEAM, "worker", "Work.", cwd=str(tmp_path))
    env = clean_env()
    with running_teamd(ws, server.url, idle_timeout=60):
        wait_until(lambda: member(ws, TEAM, "lead")["status"] == "idle"
                   and member(ws, TEAM, "worker")["status"] == "idle", T, "both idle")
        sent = teamctl(ws.root, "send", TEAM, "lead", "focus on the login page", env=env)
        assert sent.returncode == 0, sent.stderr
        # it reached the lead's model as a message from the person
        server.wait_for(lambda r: r["agent"] == "lead" and '<teammate-message sender="user" '
                        'type="message">focus on the login page</teammate-message>'
                        in r["last_user_text"], timeout=T)
        # the lead's SendMessage to `user` lands in user_inbox.jsonl …
        wait_until(lambda: inbox.peek(ws, TEAM, "user"), T, "the lead's answer")
        # … which `teamctl inbox TEAM` drains
        drained = teamctl(ws.root, "inbox", TEAM, "--json", env=env)
        assert drained.returncode == 0, drained.stderr
        got = jsonl(drained.stdout.decode())
        assert [(m["sender"], m["recipient"], m["content"]) for m in got] == [
            ("lead", "user", "On it: focus on the login page")]
        assert ws.store.paths.inbox(TEAM, "user").read_bytes() == b""
        again = teamctl(ws.root, "inbox", TEAM, env=env)
        assert again.stdout == b"" and b"user's inbox is empty" in again.stderr

        # `teamctl shutdown` is the person's request: the answer comes back to the person
        done = teamctl(ws.root, "shutdown", TEAM, "worker", "--wait", "--timeout", str(T),
                       env=env)
        assert done.returncode == 0, done.stderr
        shutdown = [r for r in requests.list_requests(ws, TEAM) if r["kind"] == "shutdown"]
        assert [(r["sender"], r["status"]) for r in shutdown] == [("user", "approved")]
        wait_until(lambda: inbox.peek(ws, TEAM, "user"), T, "the shutdown_response")
        answer = inbox.peek(ws, TEAM, "user")
        assert [(m["type"], m["sender"], m["request_id"]) for m in answer] == [
            ("shutdown_response", "worker", shutdown[0]["request_id"])]
        worker = member(ws, TEAM, "worker")
        assert worker["desired"] == "stopped" and live_pid(ws, TEAM, "worker") is None
    # nothing of it went to the LLM lead
    assert not any("shutdown_response" in r["last_user_text"] for r in server.requests
                   if r["agent"] == "lead")


def test_member_failed_of_the_llm_lead_goes_to_the_person(ws: Workspace, tmp_path: Path,
                                                          server: ScriptedServer) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "lead", "Lead.", lead=True, cwd=str(gone))
    gone.rmdir()  # the lead cannot start: it crash-loops to `failed`
    with running_teamd(ws, server.url, backoff_initial=0.05, restart_limit=1):
        wait_until(lambda: member(ws, TEAM, "lead")["status"] == "failed", T, "lead failed")
        wait_until(lambda: inbox.peek(ws, TEAM, "user"), T, "member_failed")
    told = inbox.peek(ws, TEAM, "user")
    assert [(m["type"], m["sender"], m["member"]) for m in told] == [
        ("member_failed", "teamd", "lead")]
    assert inbox.peek(ws, TEAM, "lead") == []


def test_down_remove_and_delete_ask_as_the_person_beside_an_llm_lead(
        ws: Workspace, tmp_path: Path, server: ScriptedServer) -> None:
    """`teamctl down`, `remove` and `delete` are the person's requests (CONTRACT §2): beside
    an LLM lead they are sent as `user`, and every answer comes back to `user_inbox.jsonl`,
    never to the LLM lead."""
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "lead", "Lead the team.", lead=True, cwd=str(tmp_path))
    for name in ("alice", "bob"):
        actions.spawn(ws, TEAM, name, "Work.", cwd=str(tmp_path))
    env = clean_env()

    def all_idle() -> bool:
        return all(member(ws, TEAM, n)["status"] == "idle" for n in ("lead", "alice", "bob"))

    def answers(box: str) -> list[tuple[str, str]]:
        return sorted((m["sender"], m["request_id"]) for m in inbox.peek(ws, TEAM, box)
                      if m["type"] == "shutdown_response")

    def asked() -> dict[str, tuple[str, str]]:
        return {r["request_id"]: (r["sender"], r["recipient"])
                for r in requests.list_requests(ws, TEAM) if r["kind"] == "shutdown"}

    with running_teamd(ws, server.url, idle_timeout=60):
        wait_until(all_idle, T, "everyone idle")
        done = teamctl(ws.root, "down", TEAM, "--wait", "--timeout", str(T), env=env)
        assert done.returncode == 0, done.stderr
        assert sorted(asked().values()) == [("user", "alice"), ("user", "bob")]
        # the lead is down too: anything sent to it would still sit in its inbox
        assert answers("lead") == []
        assert answers("user") == sorted((who, rid) for rid, (_, who) in asked().items())
        assert teamctl(ws.root, "inbox", TEAM, env=env).returncode == 0  # drained
        assert teamctl(ws.root, "up", TEAM, env=env).returncode == 0
        wait_until(all_idle, T, "everyone idle again")
        before = set(asked())
        done = teamctl(ws.root, "remove", TEAM, "alice", "--timeout", str(T), env=env)
        assert done.returncode == 0, done.stderr
        [rid] = set(asked()) - before
        assert asked()[rid] == ("user", "alice")
        wait_until(lambda: answers("user"), T, "alice's answer to the person")
        assert answers("user") == [("alice", rid)] and answers("lead") == []
        done = teamctl(ws.root, "delete", TEAM, "--timeout", str(T), env=env)
        assert done.returncode == 0, done.stderr
    journal = files.read_jsonl(ws.store.paths.archives(TEAM)[-1] / "events.jsonl").records
    opened = [(e["member"], e["recipient"]) for e in journal
              if e["event"] == "request_opened" and e["kind"] == "shutdown"]
    assert opened == [("user", "alice"), ("user", "bob"), ("user", "alice"), ("user", "bob")]
    told = [(e["message"]["sender"], e["message"]["recipient"]) for e in journal
            if e["event"] == "message" and e["message"]["type"] == "shutdown_response"]
    assert sorted(told) == [("alice", "user"), ("alice", "user"), ("bob", "user"),
                            ("bob", "user")]
    assert not any("shutdown_response" in r["last_user_text"] for r in server.requests
                   if r["agent"] == "lead")
