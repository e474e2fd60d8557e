"""The end of a Claude Code turn when its transcript lags (CONTRACT §14, "Delivery, exactly
once"): input Claude Code took in may land in its transcript after the `result` that
ends the turn; the runtime reads the transcript again on each poll rather than waiting for
ever — and a turn Claude Code took off its queue after that `result` still ends only at its
own. A real member's runtime (this test process is the member, `make_live`), a real
process standing in for the CLI (`cat`: it takes turns in and says nothing, so each step
times out on its events), real transcript files written as Claude Code 2.1.332 does."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from teamd.agent.claude_code import process
from teamd.agent.claude_code.runtime import ClaudeCodeRuntime
from teamd.agent.loop import Member
from teamd.layout import Workspace
from tests.harness import TEAM, make_live, make_team

SID = "5e2a9c1d-7f43-4b8e-a0d6-0c1f2e3d4b5a"
RESULT = {"type": "result", "subtype": "success", "is_error": False}


@pytest.fixture
def runtime(ws: Workspace, workdir: Path) -> Iterator[ClaudeCodeRuntime]:
    make_team(ws, workdir, "cc")
    make_live(ws, TEAM, "cc", status="active")
    rt = ClaudeCodeRuntime(Member(ws, TEAM, "cc"))
    rt.session_id = SID
    rt.cli = process.ClaudeProcess(["/bin/cat"], workdir, process.environment(
        rt.home, "http://127.0.0.1:9", "stand-in"))
    try:
        yield rt
    finally:
        rt.stop()


def log(rt: ClaudeCodeRuntime, *entries: dict[str, Any]) -> None:
    """Append entries to Claude Code's transcript of the session, as it writes them."""
    folder = rt.home / ".claude" / "projects" / "-work"
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"{SID}.jsonl").open("a") as transcript:
        transcript.writelines(json.dumps({**e, "sessionId": SID}) + "\n" for e in entries)


def queue(operation: str, **extra: Any) -> dict[str, Any]:
    return {"type": "queue-operation", "operation": operation, **extra}


def user(text: str) -> dict[str, Any]:
    return {"type": "user", "message": {"role": "user", "content": [
        {"type": "text", "text": text}]}}


def give(rt: ClaudeCodeRuntime, text: str) -> None:
    """Record an input and let the runtime give it to the CLI (nothing said: a step)."""
    rt.m.session.append({"type": "user", "content": [{"type": "text", "text": text}]})
    assert not rt.take_turn().ended
    assert rt.busy


def test_input_whose_entry_lands_after_the_result_ends_the_turn_once_it_lands(
        runtime: ClaudeCodeRuntime) -> None:
    give(runtime, "FIRST-1")
    log(runtime, queue("enqueue", content="FIRST-1"), queue("dequeue"))
    # the result came before the turn's `user` entry was written: it looks not taken
    assert not runtime.heard(RESULT).ended
    assert not runtime.take_turn().ended and runtime.busy  # still not in the transcript
    log(runtime, user("FIRST-1"))
    assert runtime.take_turn().ended  # read again on the next poll: the turn is over
    assert not runtime.busy and runtime.awaits_input()


def test_a_turn_taken_off_the_queue_after_the_result_ends_at_its_own(
        runtime: ClaudeCodeRuntime) -> None:
    give(runtime, "WORK-1")
    log(runtime, queue("enqueue", content="WORK-1"), queue("dequeue"), user("WORK-1"))
    give(runtime, "LATER-2")  # written after its last tool call: queued, not absorbed
    log(runtime, queue("enqueue", content="LATER-2"))
    assert not runtime.heard(RESULT).ended  # LATER-2 is still to come
    log(runtime, queue("dequeue"), user("LATER-2"))  # Claude Code begins it
    assert not runtime.take_turn().ended and runtime.busy  # at work on it: no end yet
    assert runtime.heard(RESULT).ended  # its own result ends it
