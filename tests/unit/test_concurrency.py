"""Concurrency across real processes (issue 2): sends racing a drainer, claims racing each
other, task creation racing itself. Processes are forked; each worker writes what it did to
its own file, and the test compares that with what is on disk."""

from __future__ import annotations

import json
import multiprocessing
from collections import Counter
from collections.abc import Sequence
from multiprocessing.process import BaseProcess
from pathlib import Path

import pytest

from teamd import actions, board, events, files, requests, roster
from teamd.layout import Workspace
from tests.helpers_proc import (
    claim_worker,
    create_worker,
    drain_worker,
    send_worker,
    shutdown_worker,
)

TEAM = "t"
ctx = multiprocessing.get_context("fork")


def join_all(procs: Sequence[BaseProcess], timeout: float = 60) -> None:
    for p in procs:
        p.join(timeout)
    stuck = [p.pid for p in procs if p.exitcode is None]
    for p in procs:
        if p.exitcode is None:
            p.kill()
            p.join(5)
    assert not stuck, f"workers still running after {timeout}s: {stuck}"
    assert [p.exitcode for p in procs] == [0] * len(procs)


@pytest.mark.timeout(120)
def test_8x500_sends_race_a_draining_consumer(ws: Workspace, tmp_path: Path) -> None:
    senders, per_sender = 8, 500
    actions.create_team(ws, TEAM)
    names = [f"s{i}" for i in range(senders)]
    for name in names:
        actions.spawn(ws, TEAM, name, "send")
    got_file = tmp_path / "drained.jsonl"
    go, stop, ready = ctx.Event(), ctx.Event(), ctx.Event()
    drainer = ctx.Process(target=drain_worker,
                          args=(str(ws.root), TEAM, "lead", str(got_file), stop, ready))
    drainer.start()
    assert ready.wait(30)
    outs = [tmp_path / f"sent-{name}.json" for name in names]
    procs = [ctx.Process(target=send_worker,
                         args=(str(ws.root), TEAM, name, per_sender, str(out), go))
             for name, out in zip(names, outs, strict=True)]
    for p in procs:
        p.start()
    go.set()
    try:
        join_all(procs)
    finally:
        stop.set()  # the drainer does one last drain after this
        join_all([drainer])

    sent = {name: json.loads(out.read_text()) for name, out in zip(names, outs, strict=True)}
    all_ids = [mid for pairs in sent.values() for _, mid in pairs]
    assert len(all_ids) == len(set(all_ids)) == senders * per_sender

    raw = got_file.read_bytes()
    assert raw.endswith(b"\n")
    found = files.parse_lines(raw)
    assert found.clean, (found.bad[:3], found.torn[:100])  # no torn or glued line
    received = found.records
    # every id exactly once
    counts = Counter(m["id"] for m in received)
    assert not [i for i, n in counts.items() if n > 1], "an id arrived twice"
    assert set(counts) == set(all_ids), "an id never arrived"
    # in per-sender order, and intact
    by_sender: dict[str, list[int]] = {name: [] for name in names}
    for m in received:
        who, seq = m["content"].split()
        assert who == m["sender"] and m["recipient"] == "lead" and m["type"] == "message"
        by_sender[who].append(int(seq))
    for name in names:
        assert by_sender[name] == list(range(per_sender)), name
        assert [mid for _, mid in sent[name]] == [m["id"] for m in received
                                                  if m["sender"] == name]
    # the drainer really raced the senders: it took the inbox in many batches
    assert json.loads(Path(f"{got_file}.batches").read_text()) > 10
    # the inbox is empty, nothing was rejected, and the journal has every message once
    assert ws.store.paths.inbox(TEAM, "lead").read_bytes() == b""
    assert not (ws.store.paths.team_dir(TEAM) / "lead_inbox.rejected.jsonl").exists()
    journal = [r["message"]["id"] for r in events.read(ws, TEAM) if r["event"] == "message"]
    assert sorted(journal) == sorted(all_ids)


@pytest.mark.timeout(120)
def test_16_processes_race_to_claim_200_tasks(ws: Workspace, tmp_path: Path) -> None:
    actions.create_team(ws, TEAM)
    for i in range(200):
        board.create(ws, TEAM, f"task {i}")
    members = [f"m{i:02d}" for i in range(16)]
    outs = [tmp_path / f"claimed-{m}.json" for m in members]
    go = ctx.Event()
    procs = [ctx.Process(target=claim_worker, args=(str(ws.root), TEAM, m, str(out), go))
             for m, out in zip(members, outs, strict=True)]
    for p in procs:
        p.start()
    go.set()
    join_all(procs)

    claimed = {m: json.loads(out.read_text()) for m, out in zip(members, outs, strict=True)}
    every = [tid for ids in claimed.values() for tid in ids]
    assert sorted(every) == list(range(1, 201)), "a task claimed twice or never"
    for m, ids in claimed.items():
        assert ids == sorted(ids), f"{m} did not claim lowest ids first"
    tasks = {t["id"]: t for t in board.list_tasks(ws, TEAM)}
    for m, ids in claimed.items():
        for tid in ids:
            assert tasks[tid]["owner"] == m and tasks[tid]["status"] == "in_progress"
    journal = [(r["task_id"], r["member"]) for r in events.read(ws, TEAM)
               if r["event"] == "task_claimed"]
    assert sorted(journal) == sorted((tid, m) for m, ids in claimed.items() for tid in ids)
    assert sum(1 for ids in claimed.values() if ids) > 1, "no race happened"


@pytest.mark.timeout(120)
def test_8_processes_create_tasks_without_handing_an_id_out_twice(ws: Workspace,
                                                                   tmp_path: Path) -> None:
    actions.create_team(ws, TEAM)
    writers, each = 8, 25
    outs = [tmp_path / f"created-{i}.json" for i in range(writers)]
    go = ctx.Event()
    procs = [ctx.Process(target=create_worker,
                         args=(str(ws.root), TEAM, f"w{i}", each, str(out), go))
             for i, out in enumerate(outs)]
    for p in procs:
        p.start()
    go.set()
    join_all(procs)

    ids = [tid for out in outs for tid in json.loads(out.read_text())]
    assert sorted(ids) == list(range(1, writers * each + 1))
    assert int(ws.store.paths.highwatermark(TEAM).read_text()) == writers * each
    tasks = board.list_tasks(ws, TEAM)
    assert [t["id"] for t in tasks] == list(range(1, writers * each + 1))
    for i, out in enumerate(outs):
        for tid in json.loads(out.read_text()):
            assert tasks[tid - 1]["created_by"] == f"w{i}"
    leftovers = [
        p.name for p in ws.store.paths.tasks_dir(TEAM).iterdir() if p.name.endswith(".tmp")
    ]
    assert leftovers == []


@pytest.mark.timeout(60)
def test_racing_shutdowns_of_a_member_not_live_answer_it_once(ws: Workspace,
                                                                tmp_path: Path) -> None:
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "alice", "work")
    outs = [tmp_path / f"shutdown-{i}.json" for i in range(6)]
    go = ctx.Event()
    procs = [ctx.Process(target=shutdown_worker, args=(str(ws.root), TEAM, "alice", str(o), go))
             for o in outs]
    for p in procs:
        p.start()
    go.set()
    join_all(procs)
    results = [json.loads(o.read_text()) for o in outs]
    opened = [r for r in results if not r.startswith("refused")]
    assert len(opened) == 1, results
    assert all("already shut down" in r for r in results if r.startswith("refused"))
    [record] = requests.list_requests(ws, TEAM)
    assert record["request_id"] == opened[0] and record["status"] == "approved"
    member = roster.get(roster.load(ws, TEAM), "alice")
    assert (member["desired"], member["status"]) == ("stopped", "shutdown")
    responses = [r for r in events.read(ws, TEAM) if r["event"] == "message"
                 and r["message"]["type"] == "shutdown_response"]
    assert len(responses) == 1
