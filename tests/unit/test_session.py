"""The teammate's conversation on disk (`sessions/{name}.jsonl`) and how it is rebuilt."""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import pytest

from teamd import files
from teamd.agent.session import INTERRUPTED, Session, compacted_head, render_message
from teamd.files import Json
from teamd.layout import Workspace
from teamd.store.files.paths import Paths
from tests.harness import file_size_limit

IDENTITY = "You are teammate 'alice' in team 'crew'."


def msg(mid: str, text: str, type_: str = "message", **extra: Any) -> Json:
    return {"id": mid, "type": type_, "sender": "lead", "recipient": "alice",
            "content": text, "timestamp": 1.0, **extra}


def text(t: str) -> Json:
    return {"type": "text", "text": t}


def use(uid: str, name: str = "bash") -> Json:
    return {"type": "tool_use", "id": uid, "name": name, "input": {"command": "true"}}


def result(uid: str, content: str = "ok", is_error: bool = False) -> Json:
    return {"type": "tool_result", "block": {"type": "tool_result", "tool_use_id": uid,
                                             "content": content, "is_error": is_error}}


def session_at(tmp_path: Path, records: list[Json], name: str = "alice") -> Session:
    files.ensure_dir(Paths(tmp_path).sessions_dir("crew"))
    session = Session.load(Workspace(tmp_path).store, "crew", name)
    for record in records:
        session.append(record)
    return session


def reload(s: Session) -> Session:
    """The session as a restarted process finds it."""
    return Session.load(s.store, s.team, s.name)


def path_of(s: Session) -> Path:
    return Path(s.where)  # the files store shows a session as its path


def roles(messages: list[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in messages]


def test_appends_are_durable_lines_and_reload_the_same(tmp_path: Path) -> None:
    s = session_at(tmp_path, [{"type": "user", "content": [text("go")]},
                              {"type": "assistant", "content": [text("ok")]}])
    lines = path_of(s).read_bytes().splitlines()
    assert len(lines) == 2 and all(json.loads(line)["ts"] for line in lines)
    again = reload(s)
    assert again.records == s.records
    assert again.messages(IDENTITY) == s.messages(IDENTITY)


def test_rebuild_alternates_turns_with_tool_results_first(tmp_path: Path) -> None:
    s = session_at(tmp_path, [
        {"type": "user", "content": [text("the prompt")]},
        {"type": "assistant", "content": [text("let me look"), use("t1"), use("t2")]},
        {"type": "inbox", "messages": [msg("m1", "a note")]},  # taken in mid-tools
        result("t1", "one"),
        result("t2", "two"),
        {"type": "inbox", "messages": [msg("m2", "another", request_id=None)]},
        {"type": "assistant", "content": [text("done")]},
        {"type": "user", "content": [text("<auto-claimed>Task #1: x</auto-claimed>")]},
    ])
    out = reload(s).messages(IDENTITY)
    assert roles(out) == ["user", "assistant", "user", "assistant", "user"]
    assert out[0]["content"] == [text("the prompt")]
    third = out[2]["content"]
    assert [b["type"] for b in third] == ["tool_result", "tool_result", "text", "text"]
    assert [b["tool_use_id"] for b in third[:2]] == ["t1", "t2"]
    assert third[2]["text"] == render_message(msg("m1", "a note"))
    assert third[2]["text"] == \
        '<teammate-message sender="lead" type="message">a note</teammate-message>'
    assert out[4]["content"] == [text("<auto-claimed>Task #1: x</auto-claimed>")]
    assert s.known_ids == {"m1", "m2"}


def test_render_message_carries_protocol_fields() -> None:
    shown = render_message(msg("m", "Plan rejected.", "plan_approval_response",
                               request_id="plan-1", approve=False, feedback="add tests"))
    assert shown == ('<teammate-message sender="lead" type="plan_approval_response" '
                     'request_id="plan-1" approve="false">Plan rejected.\nFeedback: add tests'
                     '</teammate-message>')


def test_two_replies_in_a_row_stay_alternating(tmp_path: Path) -> None:
    s = session_at(tmp_path, [{"type": "assistant", "content": [text("a")]},
                              {"type": "assistant", "content": [text("b")]}])
    out = s.messages(IDENTITY)
    assert roles(out) == ["user", "assistant", "user", "assistant"]
    assert out[0]["content"] == [text(IDENTITY)]  # never starts with the assistant


def test_interrupted_tool_use_is_pending_until_answered(tmp_path: Path) -> None:
    s = session_at(tmp_path, [
        {"type": "user", "content": [text("go")]},
        {"type": "assistant", "content": [use("done1"), use("cut2"), use("cut3")]},
        result("done1"),
    ])
    s = reload(s)  # as a restarted process finds it
    assert [u["id"] for u in s.pending_tool_uses()] == ["cut2", "cut3"]
    assert not s.ends_with_reply()
    for u in s.pending_tool_uses():
        s.append(result(u["id"], INTERRUPTED, is_error=True))
    assert s.pending_tool_uses() == []
    assert not s.ends_with_reply()  # the model must see the results: another call
    last = s.messages(IDENTITY)[-1]
    assert last["role"] == "user"
    assert [(b["tool_use_id"], b["content"], b["is_error"]) for b in last["content"]] == [
        ("done1", "ok", False), ("cut2", INTERRUPTED, True), ("cut3", INTERRUPTED, True)]
    s.append({"type": "assistant", "content": [text("ok then")]})
    assert s.ends_with_reply()


def test_compaction_record_resets_the_conversation(tmp_path: Path) -> None:
    s = session_at(tmp_path, [
        {"type": "user", "content": [text("old prompt")]},
        {"type": "inbox", "messages": [msg("m1", "old message")]},
        {"type": "assistant", "content": [text("old reply")]},
        {"type": "compaction", "summary": "SUMMARY", "transcript": "t/x.jsonl",
         "known_ids": ["m1"], "carry": []},
    ])
    for session in (s, reload(s)):
        out = session.messages(IDENTITY)
        assert roles(out) == ["user"]
        head = out[0]["content"][0]["text"]
        assert head == compacted_head(IDENTITY, session.records[0])
        assert head.startswith(IDENTITY) and "SUMMARY" in head and "t/x.jsonl" in head
        assert "old" not in json.dumps(out)
        assert not session.ends_with_reply()


def test_compaction_carries_unanswered_input(tmp_path: Path) -> None:
    s = session_at(tmp_path, [
        {"type": "user", "content": [text("prompt")]},
        {"type": "assistant", "content": [use("t1")]},
        result("t1"),
        {"type": "assistant", "content": [text("reply")]},
        {"type": "inbox", "messages": [msg("m9", "wake up")]},
        {"type": "user", "content": [text("<auto-claimed>Task #4: y</auto-claimed>")]},
    ])
    cut = s.turn_start()
    assert [r["type"] for r in s.records[cut:]] == ["inbox", "user"]
    assert "wake up" not in json.dumps(s.messages(IDENTITY, upto=cut))
    s.append({"type": "compaction", "summary": "S", "transcript": "t", "carry":
              s.records[cut:], "known_ids": sorted(s.known_ids)})
    for session in (s, reload(s)):
        out = session.messages(IDENTITY)
        assert roles(out) == ["user"]
        blocks = out[0]["content"]
        assert blocks[0]["text"].startswith(IDENTITY)
        assert "wake up" in blocks[1]["text"] and "Task #4" in blocks[2]["text"]
        assert "m9" in session.known_ids


def test_the_turn_in_progress_is_all_after_the_last_reply_that_ended_a_turn(
        tmp_path: Path) -> None:
    s = session_at(tmp_path, [{"type": "user", "content": [text("prompt")]},
                              {"type": "inbox", "messages": [msg("m1", "x")]}])
    assert s.turn_start() == 0  # nothing answered yet: it is all the turn in progress
    s.append({"type": "assistant", "content": [use("t1")], "stop_reason": "tool_use"})
    s.append(result("t1"))
    assert s.turn_start() == 0  # a tool loop is not over
    s.append({"type": "assistant", "content": [text("done")], "stop_reason": "end_turn"})
    s.append({"type": "inbox", "messages": [msg("m2", "more")]})
    ended = len(s.records) - 1
    assert s.turn_start() == ended
    for stop in ("pause_turn", "max_tokens"):  # a reply cut or paused: the turn goes on
        s.append({"type": "assistant", "content": [text("part")], "stop_reason": stop})
        assert s.turn_start() == ended and not s.ends_with_reply()
    # a turn the harness ended on a cut reply with a call: it and its answers are history
    s.append({"type": "assistant", "content": [use("t2")], "stop_reason": "max_tokens",
              "ends_turn": True})
    s.append(result("t2"))
    assert s.turn_start() == len(s.records) and s.ends_with_reply()
    assert s.cuts_in_a_row() == 0


def test_a_paused_reply_is_the_last_message_and_goes_on_in_the_same_turn(
        tmp_path: Path) -> None:
    thought = {"type": "thinking", "thinking": "hm", "signature": "c2ln"}
    s = session_at(tmp_path, [
        {"type": "user", "content": [text("prompt")]},
        {"type": "assistant", "content": [thought, text("searching")],
         "stop_reason": "pause_turn"}])
    out = s.messages(IDENTITY)
    assert roles(out) == ["user", "assistant"] and out[-1]["content"][0] == thought
    s.append({"type": "assistant", "content": [text("found it")], "stop_reason": "end_turn"})
    for session in (s, reload(s)):
        out = session.messages(IDENTITY)
        assert roles(out) == ["user", "assistant"]
        assert out[-1]["content"] == [thought, text("searching"), text("found it")]
    s.append({"type": "inbox", "messages": [msg("m1", "next")]})
    assert roles(s.messages(IDENTITY)) == ["user", "assistant", "user"]


def test_cuts_in_a_row_count_back_to_the_last_other_reply(tmp_path: Path) -> None:
    s = session_at(tmp_path, [{"type": "user", "content": [text("prompt")]}])
    for n in range(1, 4):
        s.append({"type": "assistant", "content": [text("cut")], "stop_reason": "max_tokens"})
        s.append({"type": "user", "continuation": True, "content": [text("go on")]})
        assert s.cuts_in_a_row() == n
    s.append({"type": "assistant", "content": [text("whole")], "stop_reason": "end_turn"})
    assert s.cuts_in_a_row() == 0


def test_known_ids_survive_compaction(tmp_path: Path) -> None:
    s = session_at(tmp_path, [
        {"type": "inbox", "messages": [msg("m1", "a"), msg("m2", "b")]},
        {"type": "assistant", "content": [text("ok")]},
        {"type": "compaction", "summary": "S", "transcript": "t",
         "known_ids": ["m1", "m2"], "carry": []},
        {"type": "inbox", "messages": [msg("m3", "c")]},
    ])
    assert reload(s).known_ids == {"m1", "m2", "m3"}
    # even when nothing before the compaction record is left to read
    only = session_at(tmp_path, [], name="only")
    path_of(only).write_bytes(files.dumps_line(s.records[0]) + files.dumps_line(s.records[1]))
    assert s.records[0]["type"] == "compaction"
    assert reload(only).known_ids == {"m1", "m2", "m3"}


def test_torn_tail_is_moved_aside(tmp_path: Path) -> None:
    s = session_at(tmp_path, [{"type": "user", "content": [text("go")]},
                              {"type": "assistant", "content": [text("ok")]}])
    with open(path_of(s), "ab") as fh:
        fh.write(b'{"type": "inbox", "messages": [{"id": "half')  # died mid-write
    again = reload(s)
    assert [r["type"] for r in again.records] == ["user", "assistant"]
    assert path_of(again).read_bytes().endswith(b"\n")
    rejected = files.read_jsonl(files.rejected_path(path_of(s))).records
    assert len(rejected) == 1 and rejected[0]["reason"] == "torn"
    assert '"id": "half' in rejected[0]["line"]
    again.append({"type": "inbox", "messages": [msg("m5", "next")]})
    reread = reload(s)
    assert [r["type"] for r in reread.records] == ["user", "assistant", "inbox"]
    assert reread.known_ids == {"m5"}


def test_bad_line_is_moved_aside_not_fatal(tmp_path: Path) -> None:
    s = session_at(tmp_path, [{"type": "user", "content": [text("go")]}])
    with open(path_of(s), "ab") as fh:
        fh.write(b"not json\n")
    s.append({"type": "assistant", "content": [text("ok")]})
    again = reload(s)
    assert [r["type"] for r in again.records] == ["user", "assistant"]
    assert files.read_jsonl(files.rejected_path(path_of(s))).records[0]["reason"] == "bad"


def test_messages_built_incrementally_match_a_fresh_rebuild(tmp_path: Path) -> None:
    """`messages` keeps the turns up to the last reply between calls; whatever is
    appended (or compacted) after, it must equal a rebuild from the file."""
    s = session_at(tmp_path, [])
    script: list[Json] = [
        {"type": "user", "content": [text("prompt")]},
        {"type": "assistant", "content": [text("a1"), use("t1")]},
        result("t1"),
        {"type": "inbox", "messages": [msg("m1", "one")]},
        {"type": "assistant", "content": [text("a2")]},
        {"type": "assistant", "content": [text("a3")]},  # two replies in a row
        {"type": "inbox", "messages": [msg("m2", "two")]},
        {"type": "user", "content": [text("<auto-claimed>Task #1: t</auto-claimed>")]},
        {"type": "assistant", "content": [use("t2")]},
        result("t2", INTERRUPTED, is_error=True),
        {"type": "compaction", "summary": "S1", "transcript": "t1", "known_ids": ["m1"],
         "carry": [{"type": "inbox", "messages": [msg("m3", "three")]}]},
        {"type": "assistant", "content": [text("a4")]},
        {"type": "inbox", "messages": [msg("m4", "four")]},
        {"type": "assistant", "content": [text("a5")]},
    ]
    for record in script:
        s.append(record)
        fresh = reload(s)
        assert s.messages(IDENTITY) == fresh.messages(IDENTITY)
        assert s.messages(IDENTITY) == fresh.messages(IDENTITY)  # a second call, from cache
        assert s.messages("You are teammate 'x' in team 'y'.") == \
            fresh.messages("You are teammate 'x' in team 'y'.")
    out = s.messages(IDENTITY)
    assert roles(out) == ["user", "assistant", "user", "assistant"]
    assert "three" in json.dumps(out[0]) and "four" in json.dumps(out[2])


def test_a_failed_append_leaves_no_torn_line_and_waits_until_it_can(tmp_path: Path) -> None:
    """CONTRACT §3: a teammate that cannot append to its session retries (through
    `when_stuck`, which waits) and never leaves a torn line."""
    s = session_at(tmp_path, [{"type": "user", "content": [text("go")]}])
    before = path_of(s).read_bytes()
    calls: list[tuple[int | None, int, bytes]] = []
    limit = file_size_limit(len(before) + 50)  # room for 50 bytes of the line, not all

    def stuck(exc: OSError | None, attempt: int) -> None:
        calls.append((exc.errno if exc else None, attempt, path_of(s).read_bytes()))
        if attempt == 1 and exc is not None:
            limit.__exit__(None, None, None)  # space comes back

    s.when_stuck = stuck
    limit.__enter__()
    try:
        with pytest.raises(OSError):  # a caller that cannot wait gets the error
            s.append({"type": "assistant", "content": [text("r" * 5000)]}, wait=False)
        s.append({"type": "assistant", "content": [text("r" * 5000)]})
    finally:
        limit.__exit__(None, None, None)
    assert [(e, a) for e, a, _ in calls] == [(errno.EFBIG, 0), (errno.EFBIG, 1), (None, 2)]
    assert all(data == before for _, _, data in calls[:2])  # cut back each time
    again = reload(s)
    assert [r["type"] for r in again.records] == ["user", "assistant"]
    assert path_of(s).read_bytes().endswith(b"\n")
    assert not files.rejected_path(path_of(s)).exists()
