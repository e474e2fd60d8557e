"""The scripted Messages API server, driven through the real `anthropic` SDK over HTTP."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import anthropic
import pytest

from teamd.scripted import Scenario, ScriptedServer, parse_identity

REPO = Path(__file__).resolve().parents[2]
MODEL = "claude-scripted-test"


def identity(name: str, team: str = "demo") -> str:
    return f"You are teammate '{name}' in team '{team}'. Work carefully."


def client(server: ScriptedServer, max_retries: int = 0) -> Any:
    return anthropic.Anthropic(
        base_url=server.url, api_key="test-key", max_retries=max_retries, timeout=10
    )


def ask(
    server: ScriptedServer,
    text: str,
    *,
    system: Any = "You are a helper.",
    max_retries: int = 0,
    messages: list[Any] | None = None,
) -> Any:
    # Any, not Message: the tests read content blocks without narrowing their union type.
    with client(server, max_retries) as c:
        return said(c.messages.create(
            model=MODEL,
            max_tokens=100,
            system=system,
            messages=messages or [{"role": "user", "content": text}],
        ))


def said(msg: Any) -> Any:
    """The reply without its thinking: thinking is on by default (as for today's default
    model), so every reply opens with a signed thinking block (empty: not asked to show)."""
    assert msg.content[0].type == "thinking" and msg.content[0].signature
    assert msg.content[0].thinking == ""
    msg.content = [b for b in msg.content if b.type not in ("thinking", "redacted_thinking")]
    return msg


TOOL_REPLY = {
    "content": [
        {"type": "text", "text": "Sending."},
        {
            "type": "tool_use",
            "name": "SendMessage",
            "input": {"recipient": "lead", "content": "done {rid}", "meta": {"tags": ["{agent}"]}},
        },
    ]
}


def test_plain_text_reply_and_default(server: ScriptedServer) -> None:
    server.add_rule({"name": "hi", "contains": "hello", "reply": {"content": "hi there"}})
    msg = ask(server, "hello world")
    assert msg.type == "message" and msg.role == "assistant" and msg.model == MODEL
    assert msg.id.startswith("msg_")
    assert [b.type for b in msg.content] == ["text"]
    assert msg.content[0].text == "hi there"
    assert msg.stop_reason == "end_turn"
    assert msg.usage.input_tokens > 0 and msg.usage.output_tokens > 0
    assert msg.usage.cache_read_input_tokens == 0
    with client(server) as c:
        counted = c.messages.count_tokens(
            model=MODEL,
            system="You are a helper.",
            messages=[{"role": "user", "content": "hello world"}],
        )
    assert counted.input_tokens == msg.usage.input_tokens

    other = ask(server, "something else")
    assert other.content[0].text == "Nothing to do."
    assert [r["rule"] for r in server.requests] == ["hi", "default"]


def test_tool_use_reply_has_ids_and_stop_reason(server: ScriptedServer) -> None:
    server.add_rule({"contains": "go", "regex": r"rid=(?P<rid>\w+)", "reply": TOOL_REPLY})
    msg = ask(server, "go rid=r42", system=identity("backend"))
    tool = msg.content[1]
    assert tool.type == "tool_use"
    assert tool.id.startswith("toolu_") and len(tool.id) > len("toolu_")
    assert tool.name == "SendMessage"
    assert tool.input == {"recipient": "lead", "content": "done r42", "meta": {"tags": ["backend"]}}
    assert msg.stop_reason == "tool_use"
    assert server.requests[0]["rule"] == 0


def test_streaming_matches_create(server: ScriptedServer) -> None:
    long_text = "A fairly long reply that spans several deltas, with ünïcode and {braces}."
    reply = {"content": [{"type": "text", "text": long_text}, *TOOL_REPLY["content"][1:]]}
    server.add_rule({"regex": r"rid=(?P<rid>\w+)", "reply": reply})
    system = [{"type": "text", "text": identity("web"), "cache_control": {"type": "ephemeral"}}]
    kwargs: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 100,
        "system": system,
        "messages": [{"role": "user", "content": "rid=s1"}],
    }
    with client(server) as c:
        plain = c.messages.create(**kwargs)
        with c.messages.stream(**kwargs) as stream:
            streamed = stream.get_final_message()
        raw = c.messages.create(stream=True, **kwargs)
        event_types = [event.type for event in raw]

    expected_input = {"recipient": "lead", "content": "done s1", "meta": {"tags": ["web"]}}
    for msg in (said(plain), said(streamed)):
        assert msg.content[0].text == long_text
        assert msg.content[1].input == expected_input
        assert msg.stop_reason == "tool_use"
        assert msg.usage.output_tokens == plain.usage.output_tokens
        assert msg.usage.input_tokens == plain.usage.input_tokens
    assert event_types[0] == "message_start" and event_types[-1] == "message_stop"
    assert event_types.count("content_block_start") == 3  # thinking, text, tool_use
    assert "message_delta" in event_types
    assert [r["stream"] for r in server.requests] == [False, True, True]


def test_agent_matching_from_identity_line(server: ScriptedServer) -> None:
    server.add_rule({"agent": "backend", "reply": {"content": "backend {team} #{n}"}})
    server.add_rule({"agent": "lead", "team": "t1", "reply": {"content": "lead here"}})
    assert ask(server, "x", system=identity("backend")).content[0].text == "backend demo #1"
    assert ask(server, "x", system=identity("backend")).content[0].text == "backend demo #2"
    assert ask(server, "x", system=identity("frontend")).content[0].text == "Nothing to do."
    lead_system = "You are the lead 'lead' in team 't1'."
    assert ask(server, "x", system=lead_system).content[0].text == "lead here"
    # After compaction the identity line heads the conversation instead of the system prompt.
    compacted = [{"role": "user", "content": identity("backend") + "\nSummary: ..."}]
    msg = ask(server, "", system="generic", messages=compacted)
    assert msg.content[0].text == "backend demo #3"
    assert [r["agent"] for r in server.requests] == [
        "backend", "backend", "frontend", "lead", "backend",
    ]
    found = parse_identity(lead_system)
    assert found is not None and (found.name, found.team, found.kind) == ("lead", "t1", "lead")


def test_regex_substitution_leaves_unknown_braces(server: ScriptedServer) -> None:
    server.add_rule(
        {
            "regex": r'request_id="(?P<rid>[^"]+)"',
            "reply": {"content": 'ok {rid} {unknown} {"json": 1} {agent}'},
        }
    )
    msg = ask(server, 'please answer request_id="abc-1"')
    # No identity line: {agent} is unknown too and stays as written.
    assert msg.content[0].text == 'ok abc-1 {unknown} {"json": 1} {agent}'


def test_times_exhaustion_falls_through(server: ScriptedServer) -> None:
    server.set_scenario(
        {
            "rules": [
                {"name": "once", "contains": "ping", "times": 1, "reply": {"content": "first"}},
                {"name": "again", "contains": "ping", "times": 1, "reply": {"content": "second"}},
            ],
            "default": {"content": "fallback"},
        }
    )
    texts = [ask(server, "ping").content[0].text for _ in range(3)]
    assert texts == ["first", "second", "fallback"]
    assert [r["rule"] for r in server.requests] == ["once", "again", "default"]


def test_tool_result_condition(server: ScriptedServer) -> None:
    server.add_rule({"tool_result": "SendMessage", "reply": {"content": "sent it"}})
    conversation = [
        {"role": "user", "content": "start"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_a", "name": "bash", "input": {"command": "ls"}},
                {"type": "tool_use", "id": "toolu_b", "name": "SendMessage", "input": {}},
            ],
        },
    ]
    bash_only = [
        *conversation,
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "file.txt"}],
        },
    ]
    msg = ask(server, "", messages=bash_only)
    assert msg.content[0].text == "Nothing to do."
    assert server.requests[-1]["last_user_text"] == "file.txt"

    both = [
        *conversation,
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "file.txt"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_b",
                    "content": [{"type": "text", "text": "delivered"}],
                },
            ],
        },
    ]
    assert ask(server, "", messages=both).content[0].text == "sent it"
    assert server.requests[-1]["last_user_text"] == "file.txt\ndelivered"


def test_overloaded_twice_then_sdk_retry_succeeds(server: ScriptedServer) -> None:
    server.set_scenario(
        {
            "rules": [
                {"name": "busy", "times": 2, "error": {"status": 529, "retry_after": 0}},
                {"name": "ok", "reply": {"content": "finally"}},
            ]
        }
    )
    started = time.monotonic()
    msg = ask(server, "hi", max_retries=2)
    assert msg.content[0].text == "finally"
    assert time.monotonic() - started < 2  # retry_after 0 means no SDK backoff
    assert [(r["rule"], r["status"]) for r in server.requests] == [
        ("busy", 529), ("busy", 529), ("ok", 200),
    ]


def test_rate_limit_surfaces_without_retries(server: ScriptedServer) -> None:
    server.add_rule({"error": {"status": 429, "message": "slow down", "retry_after": 0}})
    with pytest.raises(anthropic.RateLimitError) as caught:
        ask(server, "hi", max_retries=0)
    assert caught.value.status_code == 429
    body: Any = caught.value.body
    assert body["error"] == {"type": "rate_limit_error", "message": "slow down"}
    assert len(server.requests) == 1


def test_usage_override_and_stop_reason(server: ScriptedServer) -> None:
    server.add_rule(
        {
            "reply": {
                "content": "big",
                "stop_reason": "max_tokens",
                "usage": {"input_tokens": 200000, "cache_read_input_tokens": 7},
            }
        }
    )
    msg = ask(server, "hi")
    assert msg.usage.input_tokens == 200000
    assert msg.usage.cache_read_input_tokens == 7
    assert msg.stop_reason == "max_tokens"
    with client(server) as c, c.messages.stream(
        model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        final = stream.get_final_message()
    assert final.usage.input_tokens == 200000 and final.stop_reason == "max_tokens"


def test_validation_404_and_health(server: ScriptedServer) -> None:
    with client(server) as c, pytest.raises(anthropic.BadRequestError) as caught:
        bad: Any = {"model": MODEL, "messages": [], "max_tokens": None}
        c.messages.create(**bad)
    assert "max_tokens" in str(caught.value)
    assert server.requests[-1]["rule"] == "invalid"

    def fetch(path: str, data: bytes | None = None) -> tuple[int, Any]:
        req = urllib.request.Request(server.url + path, data=data)
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return resp.status, json.load(resp)
        except urllib.error.HTTPError as err:
            return err.code, json.load(err)

    assert fetch("/_health")[0] == 200
    status, body = fetch("/v1/nope", b"{}")
    assert status == 404 and body["type"] == "error"
    assert body["error"]["type"] == "not_found_error"
    status, body = fetch("/_scenario", b'{"rules": [{"contians": "x"}]}')
    assert status == 400 and "contians" in body["error"]["message"]
    status, _ = fetch("/_scenario", json.dumps({"default": {"content": "swapped"}}).encode())
    assert status == 200
    assert ask(server, "hi").content[0].text == "swapped"


def test_wait_for_and_delay(server: ScriptedServer) -> None:
    server.add_rule({"contains": "slow", "delay": 0.3, "reply": {"content": "late"}})
    result: list[str] = []

    def call() -> None:
        result.append(ask(server, "slow please").content[0].text)

    worker = threading.Thread(target=call)
    worker.start()
    # The request is recorded while the server still sits on the answer.
    record = server.wait_for(lambda r: "slow" in r["last_user_text"], timeout=5)
    assert not result and record["rule"] == 0
    worker.join(timeout=5)
    assert result == ["late"]
    with pytest.raises(TimeoutError, match="1 request"):
        server.wait_for(lambda r: False, timeout=0.05)


def test_request_log_file(tmp_path: Path) -> None:
    log_path = tmp_path / "requests.jsonl"
    before = time.time()
    with ScriptedServer(None, log_path=log_path) as srv:
        ask(srv, "one", system=identity("backend"))
        ask(srv, "two")
    lines = log_path.read_text().splitlines()
    assert len(lines) == 2
    records = [json.loads(line) for line in lines]
    assert all(before <= r["received_at"] <= time.time() for r in records)
    assert records[0]["agent"] == "backend" and records[0]["last_user_text"] == "one"
    assert records[1]["rule"] == "default" and records[1]["status"] == 200
    assert records[1]["n_messages"] == 1 and records[1]["body"]["model"] == MODEL
    assert records[0]["stream"] is False


def test_scenario_load_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"rules": [')
    with pytest.raises(ValueError, match="invalid JSON"):
        Scenario.load(bad)
    with pytest.raises(ValueError, match="cannot read"):
        Scenario.load(tmp_path / "missing.json")
    with pytest.raises(ValueError, match=r"rules\[0\].regex"):
        Scenario.from_dict({"rules": [{"regex": "("}]})
    with pytest.raises(ValueError, match="tool_use"):
        Scenario.from_dict({"default": {"content": [{"type": "image"}]}})


def _read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "python -m teamd.scripted printed no URL in time"
    return proc.stdout.readline().strip()


def test_module_cli_serves_and_exits_on_sigterm(tmp_path: Path) -> None:
    scenario = tmp_path / "s.json"
    scenario.write_text(json.dumps({"rules": [{"contains": "hi", "reply": {"content": "cli"}}]}))
    log_path = tmp_path / "log.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "teamd.scripted", "--scenario", str(scenario),
         "--log", str(log_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        url = _read_line(proc, 10)
        assert url.startswith("http://127.0.0.1:")
        with anthropic.Anthropic(base_url=url, api_key="k", max_retries=0) as c:
            msg: Any = said(c.messages.create(
                model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "hi"}]
            ))
        assert msg.content[0].text == "cli"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
        assert proc.stdout is not None and proc.stdout.read() == ""
        assert len(log_path.read_text().splitlines()) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_module_cli_bad_scenario_exits_2(tmp_path: Path) -> None:
    scenario = tmp_path / "bad.json"
    scenario.write_text('{"rules": [{"nth": 0}]}')
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "teamd.scripted", "--scenario", str(scenario)],
        capture_output=True, text=True, env=env, timeout=10,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1
    assert "nth" in done.stderr


def test_an_hours_retry_after_and_5xx_answers(server: ScriptedServer) -> None:
    server.add_rule({"contains": "hour", "error": {"status": 429, "retry_after": 3600}})
    server.add_rule({"contains": "busy", "error": 529})
    server.add_rule({"contains": "broken", "error": 503})
    with pytest.raises(anthropic.RateLimitError) as limited:
        ask(server, "an hour", max_retries=0)
    assert limited.value.response.headers["retry-after"] == "3600"
    with pytest.raises(anthropic.APIStatusError) as busy:
        ask(server, "busy", max_retries=0)
    assert busy.value.status_code == 529
    assert busy.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]
    with pytest.raises(anthropic.InternalServerError) as broken:
        ask(server, "broken", max_retries=0)
    assert broken.value.status_code == 503 and "retry-after" not in broken.value.response.headers


def test_a_trickle_never_ends_and_a_raw_body_is_no_message(server: ScriptedServer) -> None:
    server.add_rule({"contains": "slow", "trickle": 0.05})
    started = time.monotonic()
    with anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=0,
                             timeout=anthropic.Timeout(1.0, read=0.5)) as c:
        # a byte every 0.05 s keeps a 0.5 s read timeout from ever firing: only a
        # bound on the whole call could end this, so here the test's own thread does
        done = threading.Event()

        def call() -> None:
            try:
                c.messages.create(model=MODEL, max_tokens=10,
                                  messages=[{"role": "user", "content": "slow"}])
            except anthropic.APIConnectionError:
                pass
            done.set()

        threading.Thread(target=call, daemon=True).start()
        assert not done.wait(1.5)  # still going after three read timeouts
        server.stop()  # the trickle ends with the server
        assert done.wait(5)
    assert time.monotonic() - started >= 1.5
    with ScriptedServer({"rules": [{"raw": "<html>oops</html>"}]}) as junk:
        with pytest.raises(json.JSONDecodeError):
            ask(junk, "junk")
        assert [r["status"] for r in junk.requests] == [200]


def test_trickle_and_raw_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"rules\[0\].trickle"):
        Scenario.from_dict({"rules": [{"trickle": 0}]})
    with pytest.raises(ValueError, match=r"rules\[0\].raw"):
        Scenario.from_dict({"rules": [{"raw": 3}]})
    with pytest.raises(ValueError, match="exclude each other"):
        Scenario.from_dict({"rules": [{"raw": "x", "error": 500}]})


# -- prompt caching ----------------------------------------------------------------------
CACHED = {"type": "ephemeral"}
LONG_SYSTEM = "You are a careful helper. " * 400  # ~2,500 tokens by the server's estimate


def cached_turns(server: ScriptedServer, turns: int, *, breakpoints: bool = True) -> list[Any]:
    """The usage of `turns` calls of one growing conversation, with breakpoints on the
    system prompt and the conversation's tail (as teamd sends them) or without any."""
    mark = {"cache_control": CACHED} if breakpoints else {}
    usages = []
    history: list[dict[str, Any]] = []
    for n in range(turns):
        history.append({"role": "user", "content": [{"type": "text", "text": f"turn {n} " * 50}]})
        messages = [*history[:-1], {"role": "user", "content": [
            {**history[-1]["content"][0], **mark}]}]
        with client(server) as c:
            msg = said(c.messages.create(model=MODEL, max_tokens=100, messages=messages,
                                         system=[{"type": "text", "text": LONG_SYSTEM, **mark}]))
        usages.append(msg.usage)
        history.append({"role": "assistant", "content": [
            {"type": "text", "text": msg.content[0].text}]})
    return usages


def test_cache_breakpoints_write_then_read_the_shared_prefix(server: ScriptedServer) -> None:
    first, second, third = cached_turns(server, 3)
    # the first call writes everything up to its last breakpoint and reads nothing
    assert first.cache_read_input_tokens == 0
    assert first.cache_creation_input_tokens > len(LONG_SYSTEM) // 4
    # each later call reads what the call before wrote (found by looking back from its
    # new tail breakpoint) and writes only the turns added since
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens
    assert 0 < second.cache_creation_input_tokens < first.cache_creation_input_tokens
    assert third.cache_read_input_tokens == (second.cache_read_input_tokens
                                             + second.cache_creation_input_tokens)
    # the total is what it would be without caching: only its split differs
    plain = ask(server, "", system=[{"type": "text", "text": LONG_SYSTEM}], messages=[
        {"role": "user", "content": [{"type": "text", "text": "turn 0 " * 50}]}]).usage
    assert plain.cache_read_input_tokens == plain.cache_creation_input_tokens == 0
    total = first.input_tokens + first.cache_creation_input_tokens
    # (give or take the two markers, which count in the server's 4-characters estimate)
    marker = len(',"cache_control":{"type":"ephemeral"}')
    assert 0 <= total - plain.input_tokens <= 2 * marker // 4 + 2


def test_no_breakpoints_or_a_short_prefix_caches_nothing(server: ScriptedServer) -> None:
    for usage in cached_turns(server, 2, breakpoints=False):
        assert usage.cache_read_input_tokens == usage.cache_creation_input_tokens == 0
    short = [{"role": "user", "content": [{"type": "text", "text": "hi",
                                           "cache_control": CACHED}]}]
    for _ in range(2):  # under the 1,024-token minimum: never cached, never read
        usage = ask(server, "", messages=short).usage
        assert usage.cache_read_input_tokens == usage.cache_creation_input_tokens == 0


def test_a_cut_reply_stops_halfway_plain_and_streamed(server: ScriptedServer) -> None:
    server.add_rule({"contains": "cut", "cut": True, "reply": {"content": "never whole " * 50}})
    with pytest.raises(anthropic.APIConnectionError):
        ask(server, "cut", max_retries=0)
    # streamed, the SDK hands the transport's own error up as it iterates
    with anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=0) as c, \
            pytest.raises(Exception, match=r"incomplete|peer closed"), \
            c.messages.stream(model=MODEL, max_tokens=10,
                              messages=[{"role": "user", "content": "cut"}]) as s:
        s.get_final_message()
    assert [r["status"] for r in server.requests] == [200, 200]
    with pytest.raises(ValueError, match="cut applies to a reply"):
        Scenario.from_dict({"rules": [{"cut": True, "error": 500}]})
    with pytest.raises(ValueError, match=r"rules\[0\].cut"):
        Scenario.from_dict({"rules": [{"cut": "yes"}]})


def test_input_written_while_claude_code_works_is_the_requests_new_input() -> None:
    # Claude Code gives a message written while it works as a `system` turn after its
    # next tool result: `contains` and `regex` see it there, not in earlier system turns
    from teamd.scripted.request import RequestView

    def view(*messages: dict[str, Any]) -> RequestView:
        return RequestView.from_body({"model": "m", "max_tokens": 1, "messages": list(messages)})

    note = {"role": "system", "content": 'type="shutdown_request" request_id="shutdown-ab"'}
    result = {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "step"}]}
    call = {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]}
    rule = Scenario.from_dict({"rules": [{"regex": r'request_id="(?P<rid>[^"]+)"',
                                          "tool_result": "Bash"}]}).rules[0]
    mid_turn = view({"role": "user", "content": "go"}, call, result, note)
    assert rule.match(mid_turn) == {"rid": "shutdown-ab"}
    earlier = view(note, {"role": "user", "content": "go"}, call, result)
    assert rule.match(earlier) is None
