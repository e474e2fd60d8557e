"""What a reply's stop reason asks of the teammate's loop (CONTRACT.md section 6, "Today's
models"), and each model's size (`teamd.model_limits`). The loop doing it, end to end, is
tests/e2e/test_stop_reasons_e2e.py."""

from __future__ import annotations

from typing import Any

from teamd import model_limits
from teamd.agent import stops

THOUGHT = {"type": "thinking", "thinking": "hm", "signature": "c2ln"}


def call(n: int) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"t{n}", "name": "bash", "input": {"command": "ls"}}


def test_end_turn_stop_sequence_and_tool_use() -> None:
    for stop in ("end_turn", "stop_sequence"):
        done = stops.handle([THOUGHT, {"type": "text", "text": "bye"}], stop, {}, 0)
        assert done.ends_turn and not done.run and done.trouble is None
        assert done.record["content"][0] is THOUGHT and done.record["stop_reason"] == stop
    done = stops.handle([THOUGHT, call(1), call(2)], "tool_use", {}, 0)
    assert [c["id"] for c in done.run] == ["t1", "t2"] and not done.ends_turn


def test_max_tokens_continues_and_never_runs_the_cut_call() -> None:
    done = stops.handle([THOUGHT, call(1), call(2)], "max_tokens", {}, 0)
    assert [c["id"] for c in done.run] == ["t1"]  # whole: runs
    assert done.unrun == [("t2", "cut off by max_tokens; call it again")]
    assert done.follow_up is not None and done.follow_up["content"][0]["text"] == stops.CONTINUE
    assert not done.ends_turn and done.trouble is None
    text_cut = stops.handle([{"type": "text", "text": "half a sen"}], "max_tokens", {}, 2)
    assert not text_cut.unrun and text_cut.follow_up is not None


def test_a_fourth_cut_in_a_row_ends_the_turn_and_tells() -> None:
    done = stops.handle([THOUGHT, call(1)], "max_tokens", {}, stops.MAX_CONTINUATIONS)
    assert done.ends_turn and done.record["ends_turn"] and done.follow_up is None
    assert done.unrun == [("t1", stops.CUT_OFF)] and not done.run
    assert done.trouble is not None and "4 times in a row" in done.trouble[1]


def test_pause_turn_goes_on_and_refusal_ends_the_turn() -> None:
    paused = stops.handle([THOUGHT, {"type": "text", "text": "searching"}], "pause_turn", {}, 0)
    assert not paused.ends_turn and not paused.run and paused.follow_up is None
    refused = stops.handle([], "refusal", {}, 0)
    assert refused.ends_turn and refused.record["ends_turn"]
    assert refused.trouble is not None and "refus" in refused.trouble[1]


def test_model_sizes_and_caps() -> None:
    five = model_limits.limits("claude-sonnet-5-5")
    assert five == model_limits.Limits(1_000_000, 128_000)
    assert model_limits.limits("claude-opus-4-5-20251101") == model_limits.Limits(200_000,
                                                                                  64_000)
    assert model_limits.limits("my-local-model") is None
    assert model_limits.max_tokens("claude-sonnet-5-5", 32000) == 32000
    assert model_limits.max_tokens("claude-haiku-4-5", 100_000) == 64_000
    assert model_limits.max_tokens("my-local-model", 10**6) == 10**6
    assert model_limits.compact_threshold("claude-sonnet-4-5", 10**6) == 180_000
    assert model_limits.compact_threshold("claude-sonnet-5-5", 150_000) == 150_000
    warning = model_limits.cap_warning("claude-haiku-4-5", 100_000)
    assert warning is not None and "64000" in warning
    assert model_limits.cap_warning("claude-sonnet-5-5", 32000) is None


def test_readable_thinking_asked_of_every_model_that_takes_it() -> None:
    from teamd.agent import context

    for model in ("claude-sonnet-5-5", "claude-opus-4-6", "claude-fable-5-1", "a-proxy-model"):
        assert context.model_options(model, "")["thinking"] == {"type": "adaptive",
                                                                 "display": "summarized"}
    assert "thinking" not in context.model_options("claude-sonnet-4-5-20250929", "")
    assert context.model_options("claude-opus-5-5", "max")["output_config"] == {"effort": "max"}
    assert "output_config" not in context.model_options("claude-opus-5-5", "")
