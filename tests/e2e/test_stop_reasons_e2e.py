"""Every stop reason of CONTRACT.md section 6 ("Today's models"), one scenario each, end to
end: a real `teamd run`, a real member, the real SDK over HTTP to the scripted server (with
thinking on, as today's default model has it). What each asks of the loop, as a table, is
tests/unit/test_stops.py."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from teamd import actions, files
from teamd.agent import stops
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests import harness
from tests.harness import (
    TEAM,
    events_of,
    lead_got,
    make_team,
    member,
    running_teamd,
    tool_use,
    turn_text,
    wait_until,
)

T = 30.0
wait_status = partial(harness.wait_status, timeout=T)


def asked_with(server: ScriptedServer, text: str) -> list[dict[str, Any]]:
    """alice's requests whose conversation carries `text` anywhere (a user turn or not)."""
    return [r for r in server.requests if r["agent"] == "alice" and text in str(r["body"])]


def bare(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages without their cache breakpoints (which move to each call's tail)."""
    return [{**m, "content": [{k: v for k, v in b.items() if k != "cache_control"}
                              for b in m["content"]]} for m in messages]


def session(ws: Workspace) -> list[dict[str, Any]]:
    return files.read_jsonl(ws.store.paths.session(TEAM, "alice")).records


def accepted(server: ScriptedServer) -> None:
    assert all(r["status"] == 200 for r in server.requests), "the server refused a request"


def start(ws: Workspace, server: ScriptedServer, workdir: Path, text: str) -> None:
    make_team(ws, workdir, "alice")
    wait_status(ws, "alice", "idle")
    actions.send(ws, TEAM, "alice", text)


def test_end_turn_stop_sequence_and_tool_use(ws: Workspace, server: ScriptedServer,
                                             workdir: Path) -> None:
    server.add_rule({"agent": "alice", "contains": "WORK-e1", "reply": {
        "content": [tool_use("bash", command="echo RAN-e1 > ran.txt")]}})
    server.add_rule({"agent": "alice", "tool_result": "bash", "reply": {
        "content": "Done, stopping at the sequence", "stop_reason": "stop_sequence"}})
    server.add_rule({"agent": "alice", "contains": "AGAIN-e1", "reply": {"content": "Fine."}})
    with running_teamd(ws, server.url):
        start(ws, server, workdir, "WORK-e1 run it")
        wait_until(lambda: [e for e in events_of(ws, "alice", "model_call")
                            if e["stop_reason"] == "stop_sequence"], T, "the stop_sequence")
        wait_until(lambda: events_of(ws, "alice", "status")[-1]["to"] == "idle", T,
                   "alice idle again")  # stop_sequence ended the turn: no call after it
        assert (workdir / "ran.txt").read_text() == "RAN-e1\n"  # tool_use ran the tool
        calls = len(server.requests)
        actions.send(ws, TEAM, "alice", "AGAIN-e1 once more")
        server.wait_for(harness.asked("AGAIN-e1", "alice"), T)
        wait_status(ws, "alice", "idle")
    assert len(server.requests) == calls + 1  # end_turn too
    stops_seen = [e["stop_reason"] for e in events_of(ws, "alice", "model_call")]
    assert {"tool_use", "stop_sequence", "end_turn"} <= set(stops_seen)
    accepted(server)


def test_max_tokens_keeps_the_cut_reply_never_runs_the_cut_call_and_continues(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    server.add_rule({"name": "cut", "agent": "alice", "contains": "CUT-m1", "times": 1,
                     "reply": {"stop_reason": "max_tokens", "content": [
                         {"type": "text", "text": "Half of the answer, then"},
                         tool_use("bash", command="touch RAN-m1")]}})
    server.add_rule({"agent": "alice", "contains": stops.CONTINUE, "reply": {
        "content": "The other half, whole."}})
    with running_teamd(ws, server.url):
        start(ws, server, workdir, "CUT-m1 answer at length")
        server.wait_for(harness.asked(stops.CONTINUE, "alice"), T)
        wait_status(ws, "alice", "idle")
    assert not (workdir / "RAN-m1").exists()  # the cut-off call never ran
    cut = next(r for r in server.requests if r["rule"] == "cut")
    going_on = server.wait_for(harness.asked(stops.CONTINUE, "alice"), 1)
    messages = going_on["body"]["messages"]
    # the cut reply kept in the history, as sent (its thinking included), then the results
    # (the cut call answered with an error) and the request to continue
    assert messages[-2] == {"role": "assistant", "content": cut["reply"]}
    result = messages[-1]["content"][0]
    assert result["type"] == "tool_result" and result["is_error"] is True
    assert result["content"] == "cut off by max_tokens; call it again"
    assert turn_text(messages[-1]).endswith(stops.CONTINUE)
    assert member(ws, TEAM, "alice")["last_error"] is None
    accepted(server)


def test_a_fourth_cut_in_a_row_ends_the_turn_and_tells_the_lead(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    server.add_rule({"agent": "alice", "any_contains": "LONG-m2", "reply": {
        "stop_reason": "max_tokens", "content": "and on and on"}})
    with running_teamd(ws, server.url):
        start(ws, server, workdir, "LONG-m2 never stop")
        told = lead_got(ws, lambda m: m["sender"] == "alice" and "max_tokens" in m["content"],
                        "the lead told of the cuts", T)
        wait_status(ws, "alice", "idle")
        # read while teamd runs: a stop clears what no longer holds (a pending member's error)
        assert "4 times in a row" in str(member(ws, TEAM, "alice")["last_error"])
    assert told["content"].startswith("alice: ") and "4 times in a row" in told["content"]
    cut = asked_with(server, "LONG-m2")
    assert len(cut) == 4  # the first call and 3 continuations; the 4th cut ends the turn
    assert [turn_text(r["body"]["messages"][-1]).count(stops.CONTINUE) for r in cut] == \
        [0, 1, 1, 1]
    assert session(ws)[-1]["ends_turn"] is True
    accepted(server)


def test_pause_turn_sends_the_paused_reply_back_as_the_last_message(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    server.add_rule({"name": "paused", "agent": "alice", "contains": "SEARCH-p1", "times": 1,
                     "delay": 1, "reply": {"stop_reason": "pause_turn", "content": "Searching…",
                                           "thinking": "Searching first."}})
    server.add_rule({"name": "on", "agent": "alice", "contains": "SEARCH-p1",
                     "reply": {"content": "Found it: 42."}})
    server.add_rule({"agent": "alice", "contains": "NEXT-p1", "reply": {"content": "Next."}})
    with running_teamd(ws, server.url):
        start(ws, server, workdir, "SEARCH-p1 look it up")
        server.wait_for(lambda r: r["rule"] == "paused", T)
        actions.send(ws, TEAM, "alice", "MEANWHILE-p1 sent while it searched")
        server.wait_for(lambda r: r["rule"] == "on", T)
        wait_status(ws, "alice", "idle")
        actions.send(ws, TEAM, "alice", "NEXT-p1 and then?")
        later = server.wait_for(harness.asked("NEXT-p1", "alice"), T)
    paused = next(r for r in server.requests if r["rule"] == "paused")
    going_on = next(r for r in server.requests if r["rule"] == "on")
    # the paused reply, unchanged, is the last message of the next call
    assert going_on["body"]["messages"][-1] == {"role": "assistant", "content": paused["reply"]}
    assert bare(going_on["body"]["messages"][:-1]) == bare(paused["body"]["messages"])
    # the reply that went on joined the same assistant turn; a message that came meanwhile
    # waited for the turn after it
    assert "MEANWHILE-p1" not in str(going_on["body"])
    assert server.wait_for(harness.asked("MEANWHILE-p1", "alice"), 1)["n"] > going_on["n"]
    joined = later["body"]["messages"][len(paused["body"]["messages"])]
    assert joined == {"role": "assistant", "content": [*paused["reply"], *going_on["reply"]]}
    accepted(server)


def test_refusal_is_not_retried_ends_the_turn_and_tells_the_lead_once(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    server.add_rule({"agent": "alice", "contains": "BAD-r1", "reply": {
        "stop_reason": "refusal", "content": [tool_use("bash", command="touch RAN-r1")]}})
    with running_teamd(ws, server.url):
        start(ws, server, workdir, "BAD-r1 do the bad thing")
        told = lead_got(ws, lambda m: m["sender"] == "alice" and "refus" in m["content"],
                        "the lead told of the refusal", T)
        wait_status(ws, "alice", "idle")
        assert "refusal" in str(member(ws, TEAM, "alice")["last_error"])
    assert told["content"].startswith("alice: ")
    assert len(asked_with(server, "BAD-r1")) == 1  # not retried
    assert not (workdir / "RAN-r1").exists()
    assert len([m for m in harness.lead_inbox(ws) if "refus" in m["content"]]) == 1
    assert session(ws)[-1]["block"]["content"] == stops.REFUSED
    accepted(server)


def test_context_window_exceeded_compacts_and_makes_the_same_call_again(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    server.add_rule({"agent": "alice", "contains": "Your context is nearly full",
                     "reply": {"content": "SUMMARY-w1: waited for work."}})
    server.add_rule({"name": "full", "agent": "alice", "contains": "HUGE-w1", "times": 1,
                     "reply": {"stop_reason": "model_context_window_exceeded",
                               "content": "Partly"}})
    server.add_rule({"name": "again", "agent": "alice", "contains": "HUGE-w1",
                     "reply": {"content": "Handled it."}})
    with running_teamd(ws, server.url):
        start(ws, server, workdir, "HUGE-w1 a big one")
        again = server.wait_for(lambda r: r["rule"] == "again", T)
        wait_status(ws, "alice", "idle")
    full = next(r for r in server.requests if r["rule"] == "full")
    # compacted, then the same pending input asked again after the summary
    assert "SUMMARY-w1" in turn_text(again["body"]["messages"][0])
    assert turn_text(full["body"]["messages"][-1]) in turn_text(again["body"]["messages"][-1])
    assert events_of(ws, "alice", "compacted")
    records = session(ws)
    at = max(i for i, r in enumerate(records) if r["type"] == "compaction")
    assert "HUGE-w1" in str(records[at]["carry"])  # the pending input carried over
    shown = [r for r in records[at:] if r["type"] == "assistant"]
    assert [b["text"] for r in shown for b in r["content"] if b["type"] == "text"] == \
        ["Handled it."]  # the cut reply was not kept
    accepted(server)
