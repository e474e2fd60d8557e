"""teamd.inbox: messages, delivery, peek and lossless drain (CONTRACT §3)."""

from __future__ import annotations

import uuid

import pytest

from teamd import actions, events, files, inbox
from teamd.errors import BadInput
from teamd.layout import Workspace
from tests.harness import make_team

TEAM = "t"


@pytest.fixture
def team(ws: Workspace) -> str:
    return make_team(ws, None, "alice", "bob", team=TEAM, prompt="work")


# -- make --------------------------------------------------------------------------------
def test_make_has_every_required_field() -> None:
    msg = inbox.make("message", "lead", "alice", "hi", summary="s", request_id=None)
    assert set(msg) == {"id", "type", "sender", "recipient", "content", "timestamp", "summary"}
    assert msg["type"] == "message" and msg["sender"] == "lead" and msg["recipient"] == "alice"
    assert msg["content"] == "hi" and msg["summary"] == "s"
    assert isinstance(msg["id"], str) and msg["id"]
    assert isinstance(msg["timestamp"], float)
    assert "request_id" not in msg  # None extras are left out


def test_make_ids_are_unique() -> None:
    ids = {inbox.make("message", "lead", "a", "x")["id"] for _ in range(2000)}
    assert len(ids) == 2000


def test_make_refuses_unknown_type() -> None:
    with pytest.raises(BadInput, match="unknown message type 'chat'"):
        inbox.make("chat", "lead", "a", "x")


def test_content_limit_is_256_kib_of_utf8() -> None:
    assert inbox.check_content("x" * 256 * 1024)
    with pytest.raises(BadInput, match="262145 bytes"):
        inbox.check_content("x" * (256 * 1024 + 1))
    # counted in UTF-8 bytes, not characters
    with pytest.raises(BadInput, match="limit"):
        inbox.check_content("é" * (128 * 1024 + 1))


@pytest.mark.parametrize("bad", ["a\x00b", "\udcff", "ok\ud800"])
def test_content_must_be_valid_text(bad: str) -> None:
    with pytest.raises(BadInput):
        inbox.check_content(bad)


def test_content_must_be_text() -> None:
    with pytest.raises(BadInput, match="text"):
        inbox.check_content(b"bytes")  # type: ignore[arg-type]


# -- deliver, peek, drain ----------------------------------------------------------------
def test_deliver_appends_to_the_recipients_inbox_and_journals(ws: Workspace, team: str) -> None:
    m1 = inbox.make("message", "lead", "alice", "one")
    m2 = inbox.make("message", "bob", "alice", "two\nlines")
    inbox.deliver(ws, team, [m1])
    inbox.deliver(ws, team, [m2])
    assert inbox.peek(ws, team, "alice") == [m1, m2]
    assert inbox.peek(ws, team, "bob") == []
    raw = ws.store.paths.inbox(team, "alice").read_bytes()
    assert raw.count(b"\n") == 2 and raw.endswith(b"\n")
    journal = [r for r in events.read(ws, team) if r["event"] == "message"]
    assert [r["message"] for r in journal] == [m1, m2]
    assert [r["member"] for r in journal] == ["lead", "bob"]


def test_peek_does_not_take(ws: Workspace, team: str) -> None:
    msg = inbox.make("message", "lead", "alice", "x")
    inbox.deliver(ws, team, [msg])
    assert inbox.peek(ws, team, "alice") == [msg]
    assert inbox.peek(ws, team, "alice") == [msg]


def test_drain_takes_everything_once_and_history_stays(ws: Workspace, team: str) -> None:
    sent = [inbox.make("message", "lead", "alice", f"m{i}") for i in range(5)]
    inbox.deliver(ws, team, sent)
    recorded: list[dict[str, object]] = []
    assert inbox.drain(ws, team, "alice", recorded.extend) == sent
    assert recorded == sent
    assert inbox.peek(ws, team, "alice") == []
    assert ws.store.paths.inbox(team, "alice").read_bytes() == b""
    assert inbox.drain(ws, team, "alice", recorded.extend) == []
    assert len(recorded) == 5
    # the journal still has every message after the drain
    ids = [r["message"]["id"] for r in events.read(ws, team) if r["event"] == "message"]
    assert ids == [m["id"] for m in sent]


def test_drain_keeps_messages_when_the_consumer_fails(ws: Workspace, team: str) -> None:
    msg = inbox.make("message", "lead", "alice", "precious")
    inbox.deliver(ws, team, [msg])

    def crash(batch: list[dict[str, object]]) -> None:
        raise RuntimeError("session write failed")

    with pytest.raises(RuntimeError):
        inbox.drain(ws, team, "alice", crash)
    assert inbox.peek(ws, team, "alice") == [msg]


def test_drain_moves_a_bad_line_aside(ws: Workspace, team: str) -> None:
    msg = inbox.make("message", "lead", "alice", "good")
    inbox.deliver(ws, team, [msg])
    with open(ws.store.paths.inbox(team, "alice"), "ab") as fh:
        fh.write(b"this is not json\n")
    assert inbox.peek(ws, team, "alice") == [msg]  # readers skip it
    assert inbox.drain(ws, team, "alice", lambda b: None) == [msg]
    rejected = files.read_jsonl(
        ws.store.paths.team_dir(team) / "alice_inbox.rejected.jsonl"
    ).records
    assert [r["line"] for r in rejected] == ["this is not json"]


def test_a_torn_inbox_tail_does_not_glue_onto_the_next_message(ws: Workspace,
                                                               team: str) -> None:
    with open(ws.store.paths.inbox(team, "alice"), "ab") as fh:
        fh.write(b'{"id": "dead-writer", "type": "mess')
    msg = inbox.make("message", "lead", "alice", "after")
    inbox.deliver(ws, team, [msg])
    assert inbox.peek(ws, team, "alice") == [msg]
    assert files.parse_lines(ws.store.paths.inbox(team, "alice").read_bytes()).clean


def test_broadcast_is_one_event_with_the_same_id_in_every_inbox(ws: Workspace,
                                                                team: str) -> None:
    first = inbox.make("broadcast", "alice", "bob", "all hands")
    copies = [{**first, "recipient": r} for r in ("bob", "lead")]
    inbox.deliver(ws, team, copies)
    got_bob, got_lead = inbox.peek(ws, team, "bob"), inbox.peek(ws, team, "lead")
    assert len(got_bob) == len(got_lead) == 1
    assert got_bob[0]["id"] == got_lead[0]["id"] == first["id"]
    assert got_bob[0]["recipient"] == "bob" and got_lead[0]["recipient"] == "lead"
    journal = [r for r in events.read(ws, team) if r["event"] == "message"]
    assert len(journal) == 1
    assert journal[0]["message"]["id"] == first["id"]
    assert journal[0]["message"]["recipients"] == ["bob", "lead"]


def test_a_json_line_that_is_not_a_message_is_moved_aside(ws: Workspace) -> None:
    """Valid JSON missing the message fields must not reach a consumer (it would trip on
    it at every restart); it goes to *.rejected.jsonl like any bad line."""
    actions.create_team(ws, "t")
    actions.spawn(ws, "t", "bob", "p")
    actions.send(ws, "t", "bob", "first")
    path = ws.store.paths.inbox("t", "bob")
    with open(path, "ab") as fh:
        fh.write(b'{"id":"abc","content":"hello"}\n{"id":null,"type":"message"}\n')
    actions.send(ws, "t", "bob", "second")
    assert [m["content"] for m in inbox.peek(ws, "t", "bob")] == ["first", "second"]
    got: list[dict] = []
    inbox.drain(ws, "t", "bob", got.extend)
    assert [m["content"] for m in got] == ["first", "second"]
    rejected = files.read_jsonl(files.rejected_path(path)).records
    assert len(rejected) == 2 and '"abc"' in rejected[0]["line"]
    assert path.read_bytes() == b""


# -- what a reader refuses (CONTRACT §3) -------------------------------------------------
def raw_message(**fields: object) -> dict[str, object]:
    base: dict[str, object] = {"id": uuid.uuid4().hex, "type": "message", "sender": "lead",
                               "recipient": "alice", "content": "x", "timestamp": 1.0}
    base.update(fields)
    return {k: v for k, v in base.items() if v is not None}


def test_a_reader_refuses_what_a_writer_would_have(ws: Workspace, team: str) -> None:
    first = inbox.make("message", "lead", "alice", "first")
    last = inbox.make("message", "lead", "alice", "last")
    bad: list[tuple[bytes, str, str | None]] = [  # (line, reason, id in the journal)
        (b"\xff\xfe not utf-8", "not UTF-8", None),
        (b"{not json", "not JSON", None),
        (b"[1, 2]", "not a JSON object", None),
    ]
    for fields, reason in [
        ({"id": "m-no-sender", "sender": None}, "missing field sender"),
        ({"id": "m-no-stamp", "timestamp": None}, "missing field timestamp"),
        ({"id": "m-no-reason", "type": "shutdown_request", "request_id": "r1"},
         "missing field reason"),
        ({"id": "m-approve", "type": "shutdown_response", "request_id": "r1",
          "approve": "yes", "reason": ""}, "approve is not true or false"),
        ({"id": "m-no-task", "type": "task_assigned"}, "missing field task_id"),
        ({"id": "m-odd", "type": "telepathy"}, "unknown type 'telepathy'"),
        ({"id": "m-big", "content": "c" * (inbox.MAX_CONTENT + 1)},
         f"content over 256 KiB ({inbox.MAX_CONTENT + 1} bytes)"),
        ({"id": first["id"], "content": "a copy"}, "duplicate id"),
    ]:
        bad.append((files.dumps_line(raw_message(**fields))[:-1], reason, str(fields["id"])))
    huge = files.dumps_line(raw_message(id="m-huge", content="h" * (2 << 20)))[:-1]
    bad.append((huge, f"line over 1 MiB ({len(huge)} bytes)", None))
    path = ws.store.paths.inbox(team, "alice")
    path.write_bytes(files.dumps_line(first) + b"".join(line + b"\n" for line, _, _ in bad)
                     + files.dumps_line(last))
    before = path.read_bytes()

    assert inbox.peek(ws, team, "alice") == [first, last]
    assert path.read_bytes() == before  # a peek moves nothing
    assert not files.rejected_path(path).exists()

    got: list[dict[str, object]] = []
    assert inbox.drain(ws, team, "alice", got.extend) == [first, last]
    assert got == [first, last]
    assert path.read_bytes() == b""
    rejected = files.read_jsonl(files.rejected_path(path)).records
    assert [r["reason"] for r in rejected] == [reason for _, reason, _ in bad]
    for record, (line, _, _) in zip(rejected, bad, strict=True):
        if record.get("cut"):  # the over-long line: its head and its size
            assert record["bytes"] == len(line)
            assert line.startswith(record["line"].encode())
        else:
            assert record["line"] == line.decode("utf-8", "backslashreplace")
    journal = [e for e in events.read(ws, team) if e["event"] == "message_rejected"]
    assert [(e["reason"], e.get("id")) for e in journal] == [
        (reason, None if mid is None or mid.startswith("m-huge") else mid)
        for _, reason, mid in bad]
    assert {e["file"] for e in journal} == {".teams/t/alice_inbox.jsonl"}
    assert {e["member"] for e in journal} == {"alice"}


def test_make_writes_every_field_a_reader_asks_for() -> None:
    answer = inbox.make("plan_approval_response", "lead", "alice", "ok", request_id="r",
                        approve=True, feedback=None)
    assert answer["feedback"] == "" and inbox.refusal(answer) is None
    note = inbox.make("idle_notification", "alice", "lead", "idle", reason="no task")
    assert note["summary"] == "" and inbox.refusal(note) is None
    with pytest.raises(BadInput, match="shutdown_request: missing field request_id"):
        inbox.make("shutdown_request", "lead", "alice", "stop", reason="done")
    with pytest.raises(BadInput, match="missing field task_id"):
        inbox.make("task_assigned", "teamd", "alice", "Task #1")
    with pytest.raises(BadInput, match="1 MiB"):  # 256 KiB of text escaped past 1 MiB
        inbox.make("message", "lead", "alice", "\x01" * (200 * 1024))
    for kind in ("task_assigned", "permission_request", "permission_response",
                 "budget_reached"):
        assert kind in inbox.TYPES


def test_a_drain_takes_a_batch_and_leaves_the_rest_in_order(ws: Workspace, team: str) -> None:
    sent = [inbox.make("message", "lead", "alice", f"m{i}") for i in range(150)]
    stop = inbox.make("shutdown_request", "lead", "alice", "stop", request_id="r",
                      reason="done")
    inbox.deliver(ws, team, [*sent[:140], stop, *sent[140:]])
    got: list[dict[str, object]] = []
    inbox.drain(ws, team, "alice", got.extend, max_messages=100, max_content=inbox.MAX_CONTENT)
    assert got == [*sent[:100], stop]  # the shutdown request is always among them
    assert inbox.peek(ws, team, "alice") == sent[100:]
    got.clear()
    inbox.drain(ws, team, "alice", got.extend, max_messages=100, max_content=inbox.MAX_CONTENT)
    assert got == sent[100:]
    assert ws.store.paths.inbox(team, "alice").read_bytes() == b""


def test_a_drain_takes_at_most_256_kib_of_content(ws: Workspace, team: str) -> None:
    big = [inbox.make("message", "lead", "alice", str(i) * (100 * 1024)) for i in range(3)]
    small = inbox.make("message", "lead", "alice", "small")
    inbox.deliver(ws, team, [*big, small])
    got: list[dict[str, object]] = []
    inbox.drain(ws, team, "alice", got.extend, max_messages=100, max_content=inbox.MAX_CONTENT)
    assert got == big[:2]  # the third would pass 256 KiB; the small one does not overtake it
    assert inbox.peek(ws, team, "alice") == [big[2], small]
