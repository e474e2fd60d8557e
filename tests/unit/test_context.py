"""What the model sees: identity, micro-compaction, caching breakpoints, context size."""

from __future__ import annotations

import copy
from typing import Any

from teamd.agent import context
from teamd.agent.session import compacted_head
from teamd.agent.tools import specs_for
from teamd.scripted import parse_identity


def results_turn(*contents: str) -> dict[str, Any]:
    return {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": f"t{i}", "content": c, "is_error": False}
        for i, c in enumerate(contents)]}


def reply(n: int) -> dict[str, Any]:
    return {"role": "assistant", "content": [
        {"type": "tool_use", "id": f"t{n}", "name": "bash", "input": {"command": "ls"}}]}


def conversation(n_result_turns: int, size: int = 1000) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "go"}]}]
    for i in range(n_result_turns):
        out.append(reply(i))
        out.append(results_turn(f"R{i}:" + "x" * size, "short"))
    return out


def test_micro_compact_trims_only_old_long_results() -> None:
    messages = conversation(5)
    before = copy.deepcopy(messages)
    out = context.micro_compact(messages)
    assert messages == before  # the input (the session's) is never changed
    assert len(out) == len(messages)
    turns = [m for m in out if m["role"] == "user" and m["content"][0]["type"] == "tool_result"]
    old, recent = turns[:-context.KEEP_TOOL_RESULTS], turns[-context.KEEP_TOOL_RESULTS:]
    assert len(old) == 2
    for i, turn in enumerate(old):
        long, short = turn["content"]
        assert len(long["content"]) < 300 and "trimmed" in long["content"]
        assert long["content"].startswith(f"R{i}:xxx") and "1003 characters" in long["content"]
        assert long["tool_use_id"] and long["is_error"] is False
        assert short["content"] == "short"
    for turn, original in zip(recent, before[-2 * context.KEEP_TOOL_RESULTS + 1::2],
                              strict=True):
        assert turn == original
    assert out[0] == before[0]
    assert [m for m in out if m["role"] == "assistant"] == \
        [m for m in before if m["role"] == "assistant"]


def test_micro_compact_leaves_short_histories_alone() -> None:
    messages = conversation(context.KEEP_TOOL_RESULTS)
    assert context.micro_compact(messages) is messages
    small = conversation(6, size=10)
    assert context.micro_compact(small) == small  # short results are never cut


def test_cache_breakpoints_on_system_tools_and_tail() -> None:
    specs = specs_for("teammate")
    specs_before = copy.deepcopy(specs)
    messages = conversation(2)
    messages_before = copy.deepcopy(messages)
    system, tools, out = context.with_cache_breakpoints("SYSTEM", specs, messages)
    assert system == [{"type": "text", "text": "SYSTEM",
                       "cache_control": {"type": "ephemeral"}}]
    assert [t["name"] for t in tools] == [t["name"] for t in specs]
    assert [("cache_control" in t) for t in tools] == [False] * (len(tools) - 1) + [True]
    assert out[-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    marked = [b for m in out for b in m["content"] if "cache_control" in b]
    assert len(marked) == 1  # only the tail, among the messages
    assert specs == specs_before and messages == messages_before  # inputs untouched
    # everything but the tail block is the same as what went in
    assert out[:-1] == messages[:-1]
    assert {**out[-1]["content"][-1]} == {**messages[-1]["content"][-1],
                                          "cache_control": {"type": "ephemeral"}}


def test_cache_breakpoints_with_no_messages() -> None:
    system, tools, out = context.with_cache_breakpoints("S", [], [])
    assert out == [] and tools == [] and system[0]["cache_control"]


def test_context_size_adds_the_three_input_fields() -> None:
    usage = {"input_tokens": 12, "output_tokens": 999, "cache_read_input_tokens": 30000,
             "cache_creation_input_tokens": 4000}
    assert context.context_size(usage) == 34012  # output tokens do not count
    assert context.context_size({"input_tokens": 5}) == 5
    assert context.context_size({"input_tokens": None, "cache_read_input_tokens": None}) == 0
    assert context.context_size({}) == 0


def test_identity_lines() -> None:
    assert context.identity("alice", "crew", "teammate") == \
        "You are teammate 'alice' in team 'crew'."
    assert context.identity("lead", "crew", "lead") == "You are the lead 'lead' in team 'crew'."
    member = {"name": "alice", "kind": "teammate", "role": "backend engineer",
              "plan_mode_required": True}
    prompt = context.system_prompt(member, "crew", "/w")
    assert prompt.startswith("You are teammate 'alice' in team 'crew'.\n")
    assert "backend engineer" in prompt and "/w" in prompt and "plan mode" in prompt
    assert "plan mode" not in context.system_prompt({**member, "plan_mode_required": False},
                                                    "crew", "/w")
    found = parse_identity(prompt)
    assert found is not None and (found.name, found.team, found.kind) == \
        ("alice", "crew", "teammate")
    lead = context.system_prompt({"name": "lead", "kind": "lead"}, "crew", "/w")
    found = parse_identity(lead)
    assert found is not None and found.kind == "lead"


def test_compacted_head_restates_identity() -> None:
    ident = context.identity("bob", "crew", "teammate")
    head = compacted_head(ident, {"summary": "did things", "transcript": "tr/bob.jsonl"})
    assert head.startswith("You are teammate 'bob' in team 'crew'.")
    assert "did things" in head and "tr/bob.jsonl" in head
    found = parse_identity("", [{"role": "user", "content": [{"type": "text", "text": head}]}])
    assert found is not None and found.name == "bob"
