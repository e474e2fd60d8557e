"""teamd.requests: request records and the compare-and-set answer (CONTRACT §6)."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from teamd import events, files, requests
from teamd.errors import BadInput
from teamd.layout import Workspace
from tests.helpers_proc import answer_worker, snapshot

TEAM = "t"


def test_open_writes_a_pending_record(ws: Workspace, team: str) -> None:
    rec = requests.open_request(ws, team, "plan_approval", "alice", "lead", plan="do it")
    assert rec["request_id"].startswith("plan-")
    on_disk = files.read_json(ws.store.paths.request(team, rec["request_id"]))
    assert on_disk == rec
    assert set(rec) == {"schema", "request_id", "kind", "sender", "recipient", "status",
                        "created_at", "resolved_at", "reason", "plan", "feedback"}
    assert rec["schema"] == 1 and rec["status"] == "pending" and rec["resolved_at"] is None
    assert rec["kind"] == "plan_approval" and rec["plan"] == "do it"
    opened = [r for r in events.read(ws, team) if r["event"] == "request_opened"]
    assert opened[0]["request_id"] == rec["request_id"] and opened[0]["status"] == "pending"
    s = requests.open_request(ws, team, "shutdown", "lead", "alice", reason="done")
    assert s["request_id"].startswith("shutdown-") and s["reason"] == "done"


def test_open_refuses_unknown_kind_and_duplicate_id(ws: Workspace, team: str) -> None:
    with pytest.raises(BadInput, match="kind"):
        requests.open_request(ws, team, "vacation", "alice", "lead")
    requests.open_request(ws, team, "shutdown", "lead", "a", request_id="fixed-1")
    before = snapshot(ws.root)
    with pytest.raises(BadInput, match="already exists"):
        requests.open_request(ws, team, "shutdown", "lead", "a", request_id="fixed-1")
    assert snapshot(ws.root) == before


def test_answer_is_compare_and_set_from_pending(ws: Workspace, team: str) -> None:
    rid = requests.open_request(ws, team, "plan_approval", "alice", "lead",
                                plan="p")["request_id"]
    rec = requests.answer(ws, team, rid, False, feedback="more tests")
    assert rec["status"] == "rejected" and rec["feedback"] == "more tests"
    assert isinstance(rec["resolved_at"], float)
    assert files.read_json(ws.store.paths.request(team, rid)) == rec
    before = snapshot(ws.root)
    for approve in (True, False):
        with pytest.raises(BadInput, match="already rejected"):
            requests.answer(ws, team, rid, approve)
    assert snapshot(ws.root) == before  # the second answer changed nothing
    answered = [r for r in events.read(ws, team) if r["event"] == "request_answered"]
    assert [(r["request_id"], r["status"]) for r in answered] == [(rid, "rejected")]


def test_answer_refuses_unknown_and_wrong_kind(ws: Workspace, team: str) -> None:
    with pytest.raises(BadInput, match="unknown request"):
        requests.get(ws, team, "nope-1")
    rid = requests.open_request(ws, team, "shutdown", "lead", "alice")["request_id"]
    with pytest.raises(BadInput, match="not plan_approval"):
        requests.answer(ws, team, rid, True, expect_kind="plan_approval")
    assert requests.get(ws, team, rid)["status"] == "pending"
    rec = requests.answer(ws, team, rid, True, reason="bye", expect_kind="shutdown")
    assert rec["status"] == "approved" and rec["answer_reason"] == "bye"
    assert rec["reason"] is None  # the asker gave none; the answer does not take its place


def test_list_and_plan_gate(ws: Workspace, team: str) -> None:
    assert requests.list_requests(ws, team) == []
    a = requests.open_request(ws, team, "plan_approval", "alice", "lead", plan="1")
    b = requests.open_request(ws, team, "shutdown", "lead", "bob")
    c = requests.open_request(ws, team, "plan_approval", "bob", "lead", plan="2")
    assert [r["request_id"] for r in requests.list_requests(ws, team)] == [
        a["request_id"], b["request_id"], c["request_id"]]
    assert not requests.plan_approved(ws, team, "alice")
    requests.answer(ws, team, a["request_id"], True)
    requests.answer(ws, team, c["request_id"], False)
    pending = requests.list_requests(ws, team, pending_only=True)
    assert [r["request_id"] for r in pending] == [b["request_id"]]
    assert requests.plan_approved(ws, team, "alice")
    assert not requests.plan_approved(ws, team, "bob")


def test_a_hand_broken_record_is_skipped_and_named(ws: Workspace, team: str,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    good = requests.open_request(ws, team, "plan_approval", "alice", "lead", plan="1")
    bad = ws.store.paths.requests_dir(team) / "plan-0badc0ffee.json"
    bad.write_text('{"schema": 1, "req')
    assert [r["request_id"] for r in requests.list_requests(ws, team)] == [good["request_id"]]
    assert requests.pending_plan(ws, team, "alice") == good
    assert f"{bad}: skipped, not a request" in caplog.text
    assert bad.read_text() == '{"schema": 1, "req'  # left for a person to look at


@pytest.mark.timeout(60)
def test_racing_answers_from_processes_exactly_one_wins(ws: Workspace, team: str,
                                                        tmp_path: Path) -> None:
    rid = requests.open_request(ws, team, "shutdown", "lead", "alice")["request_id"]
    ctx = multiprocessing.get_context("fork")
    go = ctx.Event()
    outs = [tmp_path / f"answer{i}.json" for i in range(8)]
    procs = [ctx.Process(target=answer_worker,
                         args=(str(ws.root), team, rid, i % 2 == 0, str(out), go))
             for i, out in enumerate(outs)]
    for p in procs:
        p.start()
    go.set()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    results = [json.loads(out.read_text()) for out in outs]
    winners = [i for i, r in enumerate(results) if r == "won"]
    assert len(winners) == 1, results
    assert all(r.startswith("refused: ") and "already" in r
               for i, r in enumerate(results) if i != winners[0])
    status = requests.get(ws, team, rid)["status"]
    assert status == ("approved" if winners[0] % 2 == 0 else "rejected")
    answered = [r for r in events.read(ws, team) if r["event"] == "request_answered"]
    assert len(answered) == 1


def test_a_pending_plan_counts_only_since_the_member_joined(ws: Workspace, team: str) -> None:
    """A plan left pending by an earlier member of the same name is not the new one's."""
    old = requests.open_request(ws, TEAM, "plan_approval", "dave", "lead", plan="old")
    joined_at = old["created_at"] + 1.0
    assert requests.pending_plan(ws, TEAM, "dave")["request_id"] == old["request_id"]
    assert requests.pending_plan(ws, TEAM, "dave", since=joined_at) is None
    new = requests.open_request(ws, TEAM, "plan_approval", "dave", "lead", plan="new",
                                request_id="plan-new")
    files.write_json(ws.store.paths.request(TEAM, "plan-new"), {**new, "created_at": joined_at})
    assert requests.pending_plan(ws, TEAM, "dave", since=joined_at)["request_id"] == "plan-new"
