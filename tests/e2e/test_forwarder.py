"""The forwarder a Claude Code member's calls go through (CONTRACT §14, "Cost, limits and
the key"), with the real pinned CLI against the scripted server: each call counted like a
built-in member's, a budget reached answered with a 400 the CLI does not retry, the key
never in the CLI's reach, and a request without the member's stand-in key refused.

The member here is this test process (its roster pid, `harness.make_live`), holding the key
as a member does; its forwarder runs in its threads as it will in a member's process."""

from __future__ import annotations

import hashlib
import http.client
import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from teamd import actions, apikey, budget, files
from teamd.agent.forwarder import Forwarder
from teamd.agent.loop import Member
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests import claude_code
from tests.harness import (
    TEAM,
    events_of,
    lead_inbox,
    make_live,
    make_team,
    member,
    wait_until,
)

KEY = "fake-real-key-of-the-test-0123456789"
IDENTITY = f"You are teammate 'coder' in team '{TEAM}'."


@pytest.fixture
def script() -> dict[str, Any]:
    """Claude Code's model writes its environment to env.txt with Bash, then answers."""
    return {"rules": [
        {"name": "env", "agent": "coder", "nth": 1, "reply": {"content": [
            {"type": "tool_use", "name": "Bash",
             "input": {"command": "env > env.txt", "description": "environment"}}]}},
        {"name": "done", "agent": "coder", "tool_result": "Bash",
         "reply": {"content": "Saved."}},
    ]}


@pytest.fixture
def forwarder(ws: Workspace, workdir: Path, server: ScriptedServer) -> Iterator[Forwarder]:
    make_team(ws, workdir, "coder")
    make_live(ws, TEAM, "coder", status="active")
    apikey.hold(KEY)
    fwd = Forwarder(Member(ws, TEAM, "coder"), upstream=server.url).start()
    try:
        yield fwd
    finally:
        fwd.stop()
        apikey.hold(None)


def run_claude(claude: Path, fwd: Forwarder, tmp_path: Path, workdir: Path
               ) -> list[dict[str, Any]]:
    done = subprocess.run(
        claude_code.headless(claude, "save the environment", "--allowedTools", "Bash",
                             "--append-system-prompt", IDENTITY),
        cwd=workdir, env=claude_code.env(tmp_path / "home", fwd.url, fwd.stand_in),
        capture_output=True, text=True, timeout=120, check=False)
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_each_call_is_counted_and_the_key_stays_out_of_reach(
        claude: Path, forwarder: Forwarder, server: ScriptedServer, ws: Workspace,
        tmp_path: Path, workdir: Path) -> None:
    events = run_claude(claude, forwarder, tmp_path, workdir)
    assert events[-1]["result"] == "Saved.", events[-1]
    # both calls reached the API with the real key, not the stand-in
    records = server.requests
    assert [r["rule"] for r in records] == ["env", "done"]
    assert {r["api_key_sha256"] for r in records} == {hashlib.sha256(KEY.encode()).hexdigest()}
    # each counted like a built-in member's call: model_call, usage, spend
    calls = events_of(ws, "coder", "model_call")
    assert len(calls) == 2 and all(c["error"] is None for c in calls)
    assert all(c["cost_usd"] > 0 and c["model"] == records[0]["body"]["model"] for c in calls)
    answered = [r["reply"] for r in records]
    assert [c["stop_reason"] for c in calls] == ["tool_use", "end_turn"]
    assert answered[0][-1]["type"] == "tool_use"
    usage = member(ws, TEAM, "coder")["usage"]
    for key in ("input_tokens", "output_tokens", "cache_read_input_tokens"):
        assert usage[key] == sum(c[key] for c in calls)
    assert usage["cost_usd"] == pytest.approx(sum(c["cost_usd"] for c in calls))
    assert budget.spent(ws, TEAM) == pytest.approx(usage["cost_usd"])
    # what `env` run through Claude Code's Bash printed: the stand-in, never the key
    printed = (workdir / "env.txt").read_text()
    assert f"ANTHROPIC_API_KEY={forwarder.stand_in}\n" in printed
    assert f"ANTHROPIC_BASE_URL={forwarder.url}\n" in printed
    assert KEY not in printed


def test_a_budget_reached_is_a_400_the_cli_does_not_retry(
        claude: Path, forwarder: Forwarder, server: ScriptedServer, ws: Workspace,
        tmp_path: Path, workdir: Path) -> None:
    # any first call passes a cent: the second is refused before it is sent
    actions.set_budget(ws, TEAM, "0.01", member="coder")
    events = run_claude(claude, forwarder, tmp_path, workdir)
    result = events[-1]
    assert result["is_error"] and result["api_error_status"] == 400
    assert "member budget reached" in result["result"]
    # one request reached the API; the refused one never did, and was not tried again
    assert [r["rule"] for r in server.requests] == ["env"]
    assert len(events_of(ws, "coder", "model_call")) == 1
    coder = member(ws, TEAM, "coder")
    assert coder["status"] == "paused"
    assert coder["last_error"].startswith("member budget reached")
    assert [e["scope"] for e in events_of(ws, "coder", "budget_reached")] == ["member"]
    told = [m for m in lead_inbox(ws) if m["type"] == "budget_reached"]
    assert [(m["sender"], m["member"]) for m in told] == [("coder", "coder")]


def ask(fwd: Forwarder, headers: dict[str, str], method: str = "POST",
        path: str = "/v1/messages") -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", fwd.port, timeout=10)
    body = json.dumps({"model": "claude-opus-5-5", "max_tokens": 5,
                       "messages": [{"role": "user", "content": "hi"}]})
    try:
        conn.request(method, path, body=body,
                     headers={"content-type": "application/json", **headers})
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


def test_a_request_without_the_stand_in_key_reaches_nothing(
        forwarder: Forwarder, server: ScriptedServer, ws: Workspace) -> None:
    stand_in = forwarder.stand_in
    refused = [
        ask(forwarder, {}),  # no key
        ask(forwarder, {"x-api-key": stand_in[:-1] + "x"}),  # a wrong one
        ask(forwarder, {"x-api-key": KEY}),  # even the real key: it is not this member's
        ask(forwarder, {"x-api-key": stand_in, "origin": "https://evil.example"}),  # a page
        ask(forwarder, {"x-api-key": stand_in, "host": "evil.example"}),  # DNS rebinding
    ]
    assert [status for status, _ in refused] == [401] * 5
    assert all("authentication_error" in text for _, text in refused)
    assert server.requests == []
    assert events_of(ws, "coder", "model_call") == []
    # the stand-in key, from here, goes through (and is counted)
    status, text = ask(forwarder, {"x-api-key": stand_in})
    assert status == 200, text
    assert [r["api_key_sha256"] for r in server.requests] == [
        hashlib.sha256(KEY.encode()).hexdigest()]
    assert len(events_of(ws, "coder", "model_call")) == 1
    # nothing the product wrote holds the key
    for path in ws.root.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    assert files.read_json(ws.store.paths.spend(TEAM)) is not None


def test_only_what_claude_code_sends_is_passed_on(
        forwarder: Forwarder, server: ScriptedServer, ws: Workspace) -> None:
    # a command Claude Code runs can read the stand-in key from its environment: the rest
    # of the API (batches, files, models, …) must not be reachable with it, uncounted
    key = {"x-api-key": forwarder.stand_in}
    elsewhere = [("POST", "/v1/messages/batches"), ("GET", "/v1/messages/batches"),
                 ("POST", "/v1/files"), ("GET", "/v1/models"), ("DELETE", "/v1/files/f1"),
                 ("GET", "/v1/messages"), ("PUT", "/v1/messages"),
                 ("POST", "/v1/messages/../files"), ("POST", "/api/hello")]
    answers = [ask(forwarder, key, method, path) for method, path in elsewhere]
    assert [status for status, _ in answers] == [404] * len(elsewhere), answers
    assert all("not_found_error" in text for _, text in answers)
    assert server.requests == [] and server.other_requests == []
    assert events_of(ws, "coder", "model_call") == []
    # what Claude Code 2.1.332 sends goes through: its model calls (counted), count_tokens
    # and its probe (not model calls)
    assert ask(forwarder, key, "POST", "/v1/messages?beta=true")[0] == 200
    assert ask(forwarder, key, "POST", "/v1/messages/count_tokens?beta=true")[0] == 200
    assert ask(forwarder, key, "HEAD", "/api/hello")[0] == 200
    assert [(o["method"], o["path"]) for o in server.other_requests] == [
        ("POST", "/v1/messages/count_tokens?beta=true"), ("HEAD", "/api/hello")]
    assert len(server.requests) == 1 and len(events_of(ws, "coder", "model_call")) == 1


def test_a_429_holds_the_root_back_and_the_next_call_waits_it_out(
        forwarder: Forwarder, server: ScriptedServer, ws: Workspace) -> None:
    server.set_scenario({"rules": [
        {"name": "limited", "times": 1, "error": {"status": 429, "retry_after": 1.5}}]})
    status, text = ask(forwarder, {"x-api-key": forwarder.stand_in})
    assert status == 429 and "rate_limit_error" in text  # passed through, unchanged
    held = files.read_json(ws.store.paths.ratelimit_file)
    assert held is not None
    assert (held["status"], held["source"]) == (429, "retry-after")
    [failed] = events_of(ws, "coder", "model_call")
    assert failed["error"] == "model API: 429 rate limited" and failed["input_tokens"] == 0
    # the next call is held at the forwarder until the root may call again
    status, text = ask(forwarder, {"x-api-key": forwarder.stand_in})
    assert status == 200, text
    limited, second = server.requests
    assert limited["status"] == 429
    assert second["received_at"] >= held["until"]


def test_a_call_waits_for_a_call_slot(forwarder: Forwarder, server: ScriptedServer,
                                      ws: Workspace) -> None:
    (ws.root / "teamd.toml").write_text("max_concurrent_calls = 1\n")
    files.ensure_dir(ws.store.paths.calls_dir)
    slot = files.lock(ws.store.paths.calls_dir / "0")
    slot.acquire()  # another member's call in flight holds the only slot
    answers: list[tuple[int, str]] = []
    asking = threading.Thread(target=lambda: answers.append(
        ask(forwarder, {"x-api-key": forwarder.stand_in})))
    asking.start()
    try:
        with pytest.raises(TimeoutError):  # held back while the slot is taken
            server.wait_for(timeout=1.0)
    finally:
        slot.release()
    asking.join(10)
    assert [status for status, _ in answers] == [200]
    assert len(server.requests) == 1


def test_a_call_cut_short_by_its_client_is_a_model_call_with_its_error(
        forwarder: Forwarder, server: ScriptedServer, ws: Workspace) -> None:
    # an answer that never ends, as a long stream would be when Claude Code is killed in it
    server.set_scenario({"rules": [{"name": "endless", "trickle": 0.05}]})
    conn = http.client.HTTPConnection("127.0.0.1", forwarder.port, timeout=10)
    conn.request("POST", "/v1/messages", body=json.dumps({
        "model": "claude-opus-5-5", "max_tokens": 5, "stream": True,
        "messages": [{"role": "user", "content": "hi"}]}), headers={
        "content-type": "application/json", "x-api-key": forwarder.stand_in})
    response = conn.getresponse()
    assert response.status == 200 and response.read(1)  # the answer is flowing
    conn.close()  # the client goes, mid-answer
    [cut] = wait_until(lambda: events_of(ws, "coder", "model_call"), what="the cut call counted")
    assert cut["error"].startswith("model API: cut short") and cut["input_tokens"] == 0
    assert member(ws, TEAM, "coder")["usage"]["input_tokens"] == 0


def test_a_call_is_priced_by_its_model_wherever_the_body_names_it(
        forwarder: Forwarder, server: ScriptedServer, ws: Workspace) -> None:
    # Claude Code names the model first (read from the body's head, after the answer);
    # a body that names it last is read whole, and counted the same
    for body in ({"model": "claude-opus-5-5", "max_tokens": 5, "messages": [
                     {"role": "user", "content": "first"}]},
                 {"max_tokens": 5, "messages": [{"role": "user", "content": "last"}],
                  "model": "claude-haiku-4-5"}):
        conn = http.client.HTTPConnection("127.0.0.1", forwarder.port, timeout=10)
        try:
            conn.request("POST", "/v1/messages", body=json.dumps(body), headers={
                "content-type": "application/json", "x-api-key": forwarder.stand_in})
            assert conn.getresponse().status == 200
        finally:
            conn.close()
    calls = wait_until(lambda: len(found := events_of(ws, "coder", "model_call")) == 2
                       and found, what="both calls counted")
    assert [c["model"] for c in calls] == ["claude-opus-5-5", "claude-haiku-4-5"]
    assert all(c["cost_usd"] > 0 for c in calls)
