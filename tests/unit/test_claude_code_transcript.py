"""Which recorded turns Claude Code took in, read from its own transcript (CONTRACT §14,
"Delivery, exactly once"): entries shaped as Claude Code 2.1.332 writes them (seen in the
transcripts of the e2e tests), a real file under a Claude Code HOME."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from teamd.agent.claude_code import transcript

SID = "0d3b17a4-138c-4ad7-91f2-93f5cf201fc1"


def queue(operation: str, **extra: Any) -> dict[str, Any]:
    return {"type": "queue-operation", "operation": operation, "sessionId": SID, **extra}


def user(text: str) -> dict[str, Any]:
    return {"type": "user", "message": {"role": "user", "content": [
        {"type": "text", "text": text}]}, "sessionId": SID}


def absorbed(text: str) -> dict[str, Any]:
    return {"type": "attachment", "attachment": {
        "type": "queued_command", "prompt": [{"type": "text", "text": text}]}}


def write(home: Path, entries: list[dict[str, Any]], tail: bytes = b"") -> None:
    folder = home / ".claude" / "projects" / "-work"
    folder.mkdir(parents=True)
    (folder / f"{SID}.jsonl").write_bytes(
        b"".join(json.dumps(e).encode() + b"\n" for e in entries) + tail)


def test_turns_taken_in_are_not_given_again(tmp_path: Path) -> None:
    tool_result = {"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}}
    write(tmp_path, [
        queue("enqueue"), queue("dequeue"), queue("enqueue"), user("prompt"),
        {"type": "assistant", "message": {"content": [{"type": "text", "text": "A"}]}},
        queue("dequeue"), user("A"), tool_result,
        queue("enqueue"),  # B: written mid-turn, absorbed after the next tool call
        queue("remove", content="B", reason="absorbed_mid_turn"), absorbed("B"),
        queue("enqueue"),  # C: only queued when it died
    ], tail=b'{"type":"user","message":{"role":"us')  # a torn last line
    taken = transcript.taken_in(tmp_path, SID)
    # the same text given twice is taken twice only if it is there twice
    assert transcript.not_taken(["prompt", "A", "B", "C", "A", "B"], taken) == [3, 4, 5]


def test_a_dequeue_without_its_user_entry_is_given_again(tmp_path: Path) -> None:
    # Claude Code dequeued "LATE" and died before writing its entry: resumed from this
    # transcript, it would never see "LATE" unless it is given again
    write(tmp_path, [queue("enqueue", content="prompt"), queue("dequeue"), user("prompt"),
                     queue("enqueue", content="LATE"), queue("dequeue"),
                     queue("enqueue", content="NEVER")])
    taken = transcript.taken_in(tmp_path, SID)
    assert transcript.not_taken(["prompt", "LATE", "NEVER"], taken) == [1, 2]
    # once its entry is written, it is taken: given once
    path = transcript.path(tmp_path, SID)
    assert path is not None
    with path.open("a") as more:
        more.write(json.dumps(user("LATE")) + "\n")
    taken = transcript.taken_in(tmp_path, SID)
    assert transcript.not_taken(["prompt", "LATE", "NEVER"], taken) == [2]


def test_an_absorption_counts_only_with_its_attachment(tmp_path: Path) -> None:
    # Claude Code died between the `remove` and the `queued_command` attachment: resumed,
    # it would rebuild a conversation without B, so B is given again
    write(tmp_path, [queue("remove", content="B", reason="absorbed_mid_turn")])
    taken = transcript.taken_in(tmp_path, SID)
    assert transcript.not_taken(["B"], taken) == [0]
    # once the attachment is there, B was taken in: given once
    path = transcript.path(tmp_path, SID)
    assert path is not None
    with path.open("a") as more:
        more.write(json.dumps(absorbed("B")) + "\n")
    taken = transcript.taken_in(tmp_path, SID)
    assert transcript.not_taken(["B", "B"], taken) == [1]


def test_no_transcript_yet_means_nothing_was_taken(tmp_path: Path) -> None:
    assert transcript.path(tmp_path, SID) is None
    assert transcript.not_taken(["prompt", "A"], transcript.taken_in(tmp_path, SID)) == [0, 1]


def test_a_transcript_ending_on_a_turn_nothing_answered_says_so(tmp_path: Path) -> None:
    tool_result = {"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}}
    reply = {"type": "assistant", "message": {"content": [{"type": "text", "text": "ok"}]}}
    cases = {
        "answered": ([user("A"), reply], False),
        "cut before any reply": ([user("A"), reply, queue("dequeue"), user("B")], True),
        "cut after a tool ran": ([user("A"), reply, tool_result], False),
        "a reply, then bookkeeping": ([user("A"), reply, queue("enqueue")], False),
    }
    for name, (entries, unanswered) in cases.items():
        home = tmp_path / name.replace(" ", "-")
        write(home, entries)
        assert transcript.taken_in(home, SID).unanswered is unanswered, name
