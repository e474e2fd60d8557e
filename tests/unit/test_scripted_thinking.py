"""The scripted server speaks today's API: signed thinking and redacted_thinking blocks before
the text and tool calls, every stop reason, and the 400s the API answers a request it
refuses (issue 20). Driven through the real `anthropic` SDK over HTTP."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from teamd.scripted import ScriptedServer
from teamd.scripted.replies import STOP_REASONS

MODEL = "claude-sonnet-5-5"
READABLE = {"type": "adaptive", "display": "summarized"}
BASH = {"type": "tool_use", "name": "bash", "input": {"command": "ls"}}
TOOLS = [{"name": "bash", "input_schema": {"type": "object"}}]


def create(server: ScriptedServer, messages: list[Any], **params: Any) -> Any:
    with anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=0) as c:
        return c.messages.create(model=params.pop("model", MODEL), max_tokens=100,
                                 messages=messages, **params)


def blocks(msg: Any) -> list[dict[str, Any]]:
    return [b.model_dump(exclude_none=True) for b in msg.content]


def loop(server: ScriptedServer) -> tuple[list[Any], list[dict[str, Any]]]:
    """A tool loop one step in: the first prompt, the reply calling bash, its result."""
    server.add_rule({"contains": "go", "reply": {"thinking": "ls shows the files.",
                                                "content": [BASH]}})
    first = [{"role": "user", "content": "go"}]
    reply = blocks(create(server, first, thinking=READABLE))
    result = {"role": "user", "content": [{"type": "tool_result",
                                          "tool_use_id": reply[-1]["id"], "content": "a.txt"}]}
    return [*first, {"role": "assistant", "content": reply}, result], reply


def refused(server: ScriptedServer, messages: list[Any], **params: Any) -> str:
    with pytest.raises(anthropic.BadRequestError) as caught:
        create(server, messages, **params)
    assert caught.value.status_code == 400
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["error"]["type"] == "invalid_request_error"
    assert server.requests[-1]["status"] == 400 and server.requests[-1]["rule"] == "invalid"
    return str(caught.value.body["error"]["message"])


def test_thinking_comes_first_signed_and_readable_only_when_asked(server: ScriptedServer
                                                                    ) -> None:
    server.add_rule({"contains": "both", "reply": {"content": [
        {"type": "thinking", "thinking": "Plan: look, then answer."},
        {"type": "redacted_thinking"}, {"type": "text", "text": "done"}]}})
    shown = blocks(create(server, [{"role": "user", "content": "hi"}], thinking=READABLE))
    assert [b["type"] for b in shown] == ["thinking", "text"]
    assert shown[0]["thinking"] == "Nothing to call: I answer in words."
    assert shown[0]["signature"]
    hidden = blocks(create(server, [{"role": "user", "content": "hi"}]))
    assert hidden[0]["thinking"] == "" and hidden[0]["signature"] != shown[0]["signature"]
    off = blocks(create(server, [{"role": "user", "content": "hi"}],
                        thinking={"type": "disabled"}))
    assert [b["type"] for b in off] == ["text"]
    both = blocks(create(server, [{"role": "user", "content": "both"}], thinking=READABLE))
    assert [b["type"] for b in both] == ["thinking", "redacted_thinking", "text"]
    assert both[0]["thinking"] == "Plan: look, then answer." and both[1]["data"]
    # streamed, the same blocks arrive (thinking and signature deltas accumulated)
    c = anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=0)
    with c, c.messages.stream(model=MODEL, max_tokens=100, thinking=READABLE,
                              messages=[{"role": "user", "content": "both"}]) as stream:
        streamed = blocks(stream.get_final_message())
    assert streamed[0] == both[0] and streamed[1]["type"] == "redacted_thinking"


def test_a_tool_loop_sent_back_unchanged_is_accepted(server: ScriptedServer) -> None:
    messages, reply = loop(server)
    assert [b["type"] for b in reply] == ["thinking", "tool_use"]
    assert reply[0]["thinking"] == "ls shows the files."
    answer = create(server, messages, thinking=READABLE)
    assert answer.stop_reason == "end_turn"
    # a cache_control added to a block is no change
    marked = [*messages[:-1], {"role": "user", "content": [
        {**messages[-1]["content"][0], "cache_control": {"type": "ephemeral"}}]}]
    create(server, marked, thinking=READABLE)
    assert all(r["status"] == 200 for r in server.requests)


def test_a_tool_loop_with_its_thinking_dropped_or_altered_is_refused(server: ScriptedServer
                                                                     ) -> None:
    messages, reply = loop(server)
    dropped = [messages[0], {"role": "assistant", "content": reply[1:]}, messages[2]]
    assert "dropped or altered" in refused(server, dropped, thinking=READABLE)
    altered = dict(reply[0], thinking="ls shows the files!")
    changed = [messages[0], {"role": "assistant", "content": [altered, reply[1]]}, messages[2]]
    assert "invalid `signature`" in refused(server, changed, thinking=READABLE)
    # once the loop is over (a new user turn), thinking of the ended turn may be trimmed
    later = [*dropped, {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
             {"role": "user", "content": "and now?"}]
    create(server, later, thinking=READABLE)
    assert server.requests[-1]["status"] == 200


def test_sampling_parameters_and_forced_tool_choice_are_refused(server: ScriptedServer
                                                                ) -> None:
    hi = [{"role": "user", "content": "hi"}]
    for key, value in (("temperature", 0.2), ("top_p", 0.9), ("top_k", 5)):
        assert key in refused(server, hi, extra_body={key: value})
        assert key in refused(server, hi, model="claude-opus-5", extra_body={key: value})
        create(server, hi, model="claude-sonnet-4-5", extra_body={key: value})  # older: fine
    for choice in ({"type": "any"}, {"type": "tool", "name": "bash"}):
        assert "tool_choice" in refused(server, hi, tools=TOOLS, tool_choice=choice)
        assert "tool_choice" in refused(server, hi, tools=TOOLS, tool_choice=choice,
                                        model="claude-opus-5-5")
        create(server, hi, tools=TOOLS, tool_choice=choice, model="claude-sonnet-5")
    for choice in ({"type": "auto"}, {"type": "none"}):
        create(server, hi, tools=TOOLS, tool_choice=choice)
        assert server.requests[-1]["status"] == 200


def test_every_stop_reason_can_end_a_reply(server: ScriptedServer) -> None:
    assert "model_context_window_exceeded" in STOP_REASONS
    for reason in sorted(STOP_REASONS):
        server.add_rule({"contains": reason, "reply": {"content": "part", "stop_reason": reason}})
        msg = create(server, [{"role": "user", "content": reason}])
        assert msg.stop_reason == reason
    # a reply cut short by max_tokens in the middle of a tool call
    server.add_rule({"contains": "cut", "reply": {"stop_reason": "max_tokens", "content": [
        {"type": "tool_use", "name": "bash", "input": {"command": "rm -rf /tm"}}]}})
    msg = create(server, [{"role": "user", "content": "cut"}])
    assert msg.stop_reason == "max_tokens" and msg.content[-1].type == "tool_use"


def test_a_bad_thinking_key_in_a_scenario_is_named(server: ScriptedServer) -> None:
    for reply in ({"thinking": True}, {"thinking": 3},
                  {"content": [{"type": "thinking", "thinking": 7}]},
                  {"content": [{"type": "image"}]}):
        with pytest.raises(ValueError, match="reply"):
            server.add_rule({"reply": reply})
