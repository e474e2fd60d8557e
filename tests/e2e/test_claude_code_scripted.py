"""The scripted server understands Claude Code (CONTRACT §14, "Tested for real"): the real
pinned CLI, headless, against a scenario that scripts its `Bash` tool; and what it sends
beyond teamd's own requests (`?beta=true`, betas, `system` turns, `output_config`,
`context_management`, `HEAD /api/hello`), read and checked as the API does."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from teamd.scripted import ScriptedServer
from tests import claude_code

IDENTITY = "You are teammate 'coder' in team 'webapp'."


def bash_then_answer() -> dict[str, Any]:
    """The model runs `echo hi > f` with Claude Code's Bash, then answers in words."""
    return {"rules": [
        {"name": "bash", "agent": "coder", "nth": 1, "reply": {"content": [
            {"type": "tool_use", "name": "Bash",
             "input": {"command": "echo hi > f", "description": "write f"}}]}},
        {"name": "done", "agent": "coder", "tool_result": "Bash",
         "reply": {"content": "Wrote f."}},
    ]}


def run_claude(claude: Path, server: ScriptedServer, tmp_path: Path, prompt: str,
               *options: str) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    done = subprocess.run(
        claude_code.headless(claude, prompt, "--append-system-prompt", IDENTITY, *options),
        cwd=work, env=claude_code.env(tmp_path / "home", server.url, "sk-scripted"),
        capture_output=True, text=True, timeout=120, check=False)
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return done, events


def test_real_claude_code_runs_a_scripted_bash_call(claude: Path, tmp_path: Path) -> None:
    with ScriptedServer(bash_then_answer()) as server:
        done, events = run_claude(claude, server, tmp_path, "write hi into f",
                                  "--allowedTools", "Bash")
        requests = server.requests
        others = server.other_requests
    assert done.returncode == 0, done.stderr
    # the tool ran for real, in Claude Code's working directory
    assert (tmp_path / "work" / "f").read_text() == "hi\n"
    result = events[-1]
    assert (result["type"], result["is_error"], result["result"]) == ("result", False,
                                                                      "Wrote f.")
    # exactly two model requests, both Claude Code's, each answered by its rule, and
    # nothing else reached the server
    assert [(r["rule"], r["status"], r["agent"], r["team"]) for r in requests] == [
        ("bash", 200, "coder", "webapp"), ("done", 200, "coder", "webapp")]
    assert others == []
    for record in requests:
        assert record["path"] == "/v1/messages?beta=true"
        assert record["stream"] is True
        assert "claude-code-20250219" in record["betas"]
        body = record["body"]
        assert body["thinking"]["type"] == "adaptive"
        assert body["output_config"]["effort"] in ("low", "medium", "high", "xhigh", "max")
        assert body["context_management"]["edits"]
        assert "system" in [m["role"] for m in body["messages"]]
    # the second carries Bash's result, and the thinking that came with the call, unchanged
    last = requests[1]["body"]["messages"]
    results = [b for m in last if m["role"] == "user" and isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result"]
    assert len(results) == 1 and not results[0].get("is_error")
    sent = requests[0]["reply"]
    assert [b for b in sent if b["type"] == "thinking"] == [
        b for m in last if m["role"] == "assistant" for b in m["content"]
        if b.get("type") == "thinking"]


def post(url: str, body: dict[str, Any], **headers: str) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"content-type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_the_server_reads_what_claude_code_sends() -> None:
    scenario = {"rules": [{"name": "seen", "system_contains": "Primary working directory",
                           "reply": {"content": "from the system turn"}}]}
    with ScriptedServer(scenario) as server:
        head = urllib.request.Request(f"{server.url}/api/hello", method="HEAD")
        with urllib.request.urlopen(head, timeout=10) as response:
            assert response.status == 200
        body = {"model": "claude-opus-5-5", "max_tokens": 10,
                "output_config": {"effort": "medium"},
                "context_management": {"edits": [{"type": "clear_thinking_20251015"}]},
                "messages": [{"role": "user", "content": "hi"},
                             {"role": "system", "content": [
                                 {"type": "text", "text": "Primary working directory: /w\n"
                                                          f"{IDENTITY}"}]}]}
        url = f"{server.url}/v1/messages?beta=true"
        status, reply = post(url, body, **{"anthropic-beta": "a-1, b-2"})
        assert status == 200, reply
        assert reply["content"][-1]["text"] == "from the system turn"
        bad_effort = post(url, {**body, "output_config": {"effort": "huge"}})
        bad_edits = post(url, {**body, "context_management": {"edits": [{}]}})
        bad_role = post(url, {**body, "messages": [{"role": "tool", "content": "x"}]})
        records = server.requests
        others = server.other_requests
    assert [(o["method"], o["path"]) for o in others] == [("HEAD", "/api/hello")]
    first = records[0]
    assert (first["rule"], first["path"], first["betas"]) == (
        "seen", "/v1/messages?beta=true", ["a-1", "b-2"])
    assert (first["agent"], first["team"]) == ("coder", "webapp")  # from the system turn
    assert bad_effort[0] == 400 and "output_config.effort" in bad_effort[1]["error"]["message"]
    assert bad_edits[0] == 400 and "context_management.edits.0.type" in \
        bad_edits[1]["error"]["message"]
    assert bad_role[0] == 400 and "messages.0.role" in bad_role[1]["error"]["message"]
    assert [r["status"] for r in records] == [200, 400, 400, 400]
