"""Retries the harness owns and the root's shared back-off (CONTRACT.md sections 4, 7, 12):
a real `teamd run`, the real `anthropic` SDK over real HTTP, the scripted model server."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

from teamd import actions, files
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import (
    TEAM,
    asked,
    assert_shut_down,
    events_of,
    lead_got,
    lead_inbox,
    live_pid,
    make_team,
    member,
    running_teamd,
    send_to_lead,
    wait_status,
    wait_until,
)

T = 20.0


def last_error(ws: Workspace, name: str) -> str:
    return str(member(ws, TEAM, name)["last_error"] or "")


def requests_with(server: ScriptedServer, text: str, agent: str = "alice") -> list[dict[str, Any]]:
    return [r for r in server.requests if r["agent"] == agent and text in r["last_user_text"]]


def told_lead(ws: Workspace, text: str) -> list[dict[str, Any]]:
    return [m for m in lead_inbox(ws) if m["sender"] == "alice" and text in m["content"]]


# -- retried by the harness, not the SDK ---------------------------------------------------
def test_a_burst_of_429_and_529_is_retried_by_the_harness(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    server.add_rule({"agent": "alice", "contains": "BURST-1", "times": 3,
                     "error": {"status": 529, "retry_after": 0}})
    server.add_rule({"agent": "alice", "contains": "BURST-1", "times": 1,
                     "error": {"status": 429, "retry_after": 0}})
    server.add_rule({"agent": "alice", "contains": "BURST-1", "reply": send_to_lead("SURVIVED")})
    make_team(ws, workdir, "alice")
    with running_teamd(ws, server.url):
        wait_status(ws, "alice", "idle")
        pid = live_pid(ws, TEAM, "alice")
        actions.send(ws, TEAM, "alice", "BURST-1 are you there?")
        lead_got(ws, lambda m: m["content"] == "SURVIVED", "the answer after the burst")
        wait_status(ws, "alice", "idle")
        m = member(ws, TEAM, "alice")
        assert m["last_error"] is None and m["restarts"] == 0
        assert live_pid(ws, TEAM, "alice") == pid
    assert [r["status"] for r in requests_with(server, "BURST-1")] == [529, 529, 529, 429, 200]
    errors = [e["error"] for e in events_of(ws, "alice", "model_call") if e["error"]]
    assert len(errors) == 4 and "529 overloaded" in errors[0] and "429 rate limited" in errors[3]
    limited = events_of(ws, "alice", "rate_limited")
    assert [(e["status"], e["source"]) for e in limited] == [(529, "retry-after")] * 3 + [
        (429, "retry-after")]
    assert not told_lead(ws, "cannot reach the model")  # a blip is not news


def test_trouble_that_lasts_is_told_to_the_lead_once(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    server.add_rule({"agent": "alice", "contains": "LONG-1", "times": 7,
                     "error": {"status": 503, "retry_after": 0}})
    server.add_rule({"agent": "alice", "contains": "LONG-1", "reply": send_to_lead("BACK")})
    make_team(ws, workdir, "alice")
    with running_teamd(ws, server.url):
        wait_status(ws, "alice", "idle")
        actions.send(ws, TEAM, "alice", "LONG-1 are you there?")
        lead_got(ws, lambda m: m["content"] == "BACK", "the answer after the outage")
        wait_status(ws, "alice", "idle")
        assert member(ws, TEAM, "alice")["last_error"] is None
    assert [r["status"] for r in requests_with(server, "LONG-1")] == [503] * 7 + [200]
    told = told_lead(ws, "cannot reach the model")
    assert len(told) == 1 and "503" in told[0]["content"]
    assert not events_of(ws, "alice", "rate_limited")  # a 503 is no rate limit


def test_a_429_asking_for_an_hour_waits_retry_max_wait_in_the_open_and_a_shutdown_ends_it(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    server.add_rule({"agent": "alice", "contains": "HOUR-1",
                     "error": {"status": 429, "retry_after": 3600}})
    make_team(ws, workdir, "alice")
    with running_teamd(ws, server.url, retry_max_wait=2):
        wait_status(ws, "alice", "idle")
        pid = live_pid(ws, TEAM, "alice")
        assert pid is not None
        actions.send(ws, TEAM, "alice", "HOUR-1 are you there?")
        first = server.wait_for(asked("HOUR-1", "alice"), T)
        # the wait is in the roster within a second, with the time of the next try
        wait_until(lambda: "429 rate limited, retrying at" in last_error(ws, "alice"), 1.0,
                   "the wait in last_error")
        assert member(ws, TEAM, "alice")["status"] == "active"
        # other messages do not end the wait: they wait with it
        actions.send(ws, TEAM, "alice", "EXTRA-1 meanwhile")
        limit = files.read_json(ws.store.paths.ratelimit_file)
        assert limit is not None
        assert limit["schema"] == 1 and limit["status"] == 429
        assert limit["source"] == "retry-after" and limit["model"] == "claude-sonnet-5-5"
        assert first["received_at"] < limit["until"] <= first["received_at"] + 2 + 0.5
        # retried after retry_max_wait, not after the hour the server asked for
        second = server.wait_for(asked("HOUR-1", "alice"), T, since=len(server.requests))
        assert second["received_at"] - first["received_at"] >= 2 - 0.05
        assert "EXTRA-1" not in json.dumps(second["body"]["messages"])
        # a shutdown_request landing during the next wait ends it at once
        asked_at = time.monotonic()
        rid = actions.shutdown(ws, TEAM, "alice")["request"]["request_id"]
        answer = lead_got(ws, lambda m: m["type"] == "shutdown_response", "the answer", 1.0)
        assert time.monotonic() - asked_at < 1.0
        assert (answer["request_id"], answer["approve"]) == (rid, True)
        assert_shut_down(ws, "alice", pid)
        tries = requests_with(server, "HOUR-1")
        assert [r["status"] for r in tries] == [429] * len(tries)
        assert len(tries) == 2  # nothing was sent after the shutdown was asked
    limited = events_of(ws, "alice", "rate_limited")
    assert len(limited) == 2 and all(e["source"] == "retry-after" and e["status"] == 429
                                     for e in limited)


# -- the root backs off together ------------------------------------------------------------
def test_a_second_member_does_not_send_while_the_root_is_rate_limited(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    server.add_rule({"agent": "alice", "contains": "LIMIT-A", "times": 1,
                     "error": {"status": 429, "retry_after": 3600}})
    server.add_rule({"agent": "alice", "contains": "LIMIT-A", "reply": send_to_lead("A-DONE")})
    server.add_rule({"agent": "bob", "contains": "WORK-B", "reply": send_to_lead("B-DONE")})
    make_team(ws, workdir, "alice", "bob")
    with running_teamd(ws, server.url, retry_max_wait=4):
        wait_status(ws, "alice", "idle")
        wait_status(ws, "bob", "idle")
        actions.send(ws, TEAM, "alice", "LIMIT-A go")
        hit = server.wait_for(asked("LIMIT-A", "alice"), T)
        assert hit["status"] == 429
        limit = wait_until(
            lambda: files.read_json(ws.store.paths.ratelimit_file), T, "ratelimit.json"
        )
        until = float(limit["until"])
        assert until <= hit["received_at"] + 4 + 0.5
        actions.send(ws, TEAM, "bob", "WORK-B go")
        wait_until(lambda: "root is rate limited" in last_error(ws, "bob"), T,
                   "bob's last_error to say why he waits")
        assert time.time() < until  # bob learnt of it before the back-off ended
        assert not requests_with(server, "WORK-B", "bob")  # nothing sent meanwhile
        lead_got(ws, lambda m: m["content"] == "B-DONE", "bob's answer after the back-off")
        lead_got(ws, lambda m: m["content"] == "A-DONE", "alice's answer after the back-off")
        wait_status(ws, "bob", "idle")
        assert member(ws, TEAM, "bob")["last_error"] is None
    bob_tries = requests_with(server, "WORK-B", "bob")
    assert len(bob_tries) == 1 and bob_tries[0]["received_at"] >= until
    limited = events_of(ws, "*", "rate_limited")
    assert [(e["member"], e["status"], e["source"]) for e in limited] == [
        ("alice", 429, "retry-after")]
    assert limited[0]["until"] == until


# -- answers retrying cannot mend -----------------------------------------------------------
def test_unmendable_answers_are_not_retried_and_the_lead_is_told_once(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    # an unanswered message is still in the last user turn when the next one comes: the
    # newest marker's rule comes first
    server.add_rule({"name": "junk", "agent": "alice", "contains": "JUNK-4",
                     "raw": "<html>not json</html>"})
    server.add_rule({"name": "good", "agent": "alice", "contains": "GOOD-3",
                     "reply": send_to_lead("FINE")})
    server.add_rule({"name": "413", "agent": "alice", "contains": "BAD-2", "error": 413})
    server.add_rule({"name": "400", "agent": "alice", "contains": "BAD-1", "error": 400})
    make_team(ws, workdir, "alice")
    with running_teamd(ws, server.url):
        wait_status(ws, "alice", "idle")
        pid = live_pid(ws, TEAM, "alice")
        actions.send(ws, TEAM, "alice", "BAD-1 please")
        told = lead_got(ws, lambda m: "refused the call" in m["content"], "the lead told")
        assert told["sender"] == "alice" and "400" in told["content"]
        wait_status(ws, "alice", "idle")  # waits for its next message
        assert "400 invalid_request" in last_error(ws, "alice")
        assert "not retried" in last_error(ws, "alice")
        # the next message is a new try; the same trouble is not told twice
        actions.send(ws, TEAM, "alice", "BAD-2 again")
        wait_until(lambda: "413" in last_error(ws, "alice"), T, "the 413 in last_error")
        wait_status(ws, "alice", "idle")
        actions.send(ws, TEAM, "alice", "GOOD-3 now")
        lead_got(ws, lambda m: m["content"] == "FINE", "the answer once mended")
        wait_until(lambda: member(ws, TEAM, "alice")["last_error"] is None, T,
                   "last_error to clear")
        # a body that is no response: a new streak of trouble, told again
        actions.send(ws, TEAM, "alice", "JUNK-4 then")
        wait_until(lambda: "not a valid response" in last_error(ws, "alice"), T,
                   "the bad body in last_error")
        wait_until(lambda: len(told_lead(ws, "refused the call")) == 2, T, "the second tell")
        wait_status(ws, "alice", "idle")
        assert live_pid(ws, TEAM, "alice") == pid
    answered = [r["rule"] for r in server.requests if r["agent"] == "alice"]
    for rule in ("400", "413", "good", "junk"):
        assert answered.count(rule) == 1, (rule, answered)
    assert len(told_lead(ws, "refused the call")) == 2
    assert not events_of(ws, "alice", "rate_limited")


# -- every call is bounded -------------------------------------------------------------------
def test_a_response_that_never_ends_is_cut_after_api_timeout(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    # a byte every 0.2 s: no single read ever waits api_timeout, only the whole call does
    server.add_rule({"agent": "alice", "contains": "SLOW-1", "times": 1, "trickle": 0.2})
    server.add_rule({"agent": "alice", "contains": "SLOW-1", "reply": send_to_lead("AT-LAST")})
    make_team(ws, workdir, "alice")
    with running_teamd(ws, server.url, api_timeout=2):
        wait_status(ws, "alice", "idle")
        actions.send(ws, TEAM, "alice", "SLOW-1 take your time")
        first = server.wait_for(asked("SLOW-1", "alice"), T)
        wait_until(lambda: "no answer within 2 s, retrying at" in last_error(ws, "alice"), T,
                   "the cut in last_error")
        lead_got(ws, lambda m: m["content"] == "AT-LAST", "the answer on the next try")
    tries = requests_with(server, "SLOW-1")
    assert len(tries) == 2
    # cut at api_timeout, then the first back-off step (1 s)
    assert tries[1]["received_at"] - first["received_at"] >= 2 + 1 - 0.05
    errors = [e["error"] for e in events_of(ws, "alice", "model_call") if e["error"]]
    assert errors == ["model API: no answer within 2 s"]
    assert not events_of(ws, "alice", "rate_limited")  # a cut call is no rate limit



def test_a_refused_member_waits_for_a_message_without_sleeping(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    # asleep, work on the board would wake it into the same refusal, again and again
    server.add_rule({"name": "good", "agent": "alice", "contains": "GOOD-2",
                     "reply": send_to_lead("MENDED")})
    server.add_rule({"name": "400", "agent": "alice", "contains": "BAD-1", "error": 400})
    make_team(ws, workdir, "alice", "bob")
    with running_teamd(ws, server.url, idle_timeout=1):
        actions.send(ws, TEAM, "alice", "BAD-1 please")
        wait_until(lambda: "not retried" in last_error(ws, "alice"), T, "the refusal")
        wait_status(ws, "alice", "idle")
        pid = live_pid(ws, TEAM, "alice")
        # the control: bob, idle from after alice's refusal on, goes to sleep at idle_timeout
        actions.send(ws, TEAM, "bob", "hello bob")
        wait_until(lambda: any(e["to"] == "idle" for e in events_of(ws, "bob", "status")
                               if e["ts"] > refused_at(ws)), T, "bob idle after the refusal")
        wait_status(ws, "bob", "sleeping")
        assert member(ws, TEAM, "alice")["status"] == "idle"
        assert live_pid(ws, TEAM, "alice") == pid  # still up, still waiting
        actions.send(ws, TEAM, "alice", "GOOD-2 now")
        lead_got(ws, lambda m: m["content"] == "MENDED", "the answer to the next message")
        assert live_pid(ws, TEAM, "alice") == pid
    assert [r["rule"] for r in server.requests if r["agent"] == "alice"].count("400") == 1


def refused_at(ws: Workspace) -> float:
    """When alice's refusal was journaled (its failed model_call)."""
    return max(e["ts"] for e in events_of(ws, "alice", "model_call") if e["error"])


def test_a_refused_call_with_a_full_batch_still_hears_the_next_message(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    """101 messages wait for alice: she takes in 100 (a full batch), the call is refused,
    and the next message must still reach her model, with the one left over."""
    server.add_rule({"name": "good", "agent": "alice", "contains": "GOOD-2",
                     "reply": send_to_lead("HEARD")})
    server.add_rule({"name": "400", "agent": "alice", "contains": "FILL-", "times": 1,
                     "error": 400})
    make_team(ws, workdir, "alice")
    for n in range(101):  # before teamd runs: all in the inbox at her first drain
        actions.send(ws, TEAM, "alice", f"FILL-{n}")
    with running_teamd(ws, server.url):
        wait_until(lambda: "not retried" in last_error(ws, "alice"), T, "the refusal")
        first = next(r for r in server.requests if r["agent"] == "alice")
        assert first["rule"] == "400"
        body = json.dumps(first["body"])
        assert "FILL-99" in body and "FILL-100" not in body  # a batch of 100
        actions.send(ws, TEAM, "alice", "GOOD-2 now")
        lead_got(ws, lambda m: m["content"] == "HEARD", "the answer to the next message")
    later = [r for r in server.requests if r["agent"] == "alice"][1:]
    # what the refused batch left in the inbox reached the model afterwards too
    assert any("FILL-100" in json.dumps(r["body"]) for r in later)


def test_a_new_api_timeout_applies_to_a_running_member_from_its_next_call(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    server.add_rule({"agent": "alice", "contains": "SLOW-1", "times": 1, "trickle": 0.2})
    server.add_rule({"agent": "alice", "contains": "SLOW-1", "reply": send_to_lead("AT-LAST")})
    make_team(ws, workdir, "alice")
    with running_teamd(ws, server.url) as daemon:
        wait_status(ws, "alice", "idle")
        pid = live_pid(ws, TEAM, "alice")
        ws.settings_file.write_text("api_timeout = 2\n")  # was the default, 600 s
        daemon.proc.send_signal(signal.SIGHUP)
        actions.send(ws, TEAM, "alice", "SLOW-1 take your time")
        wait_until(lambda: "no answer within 2 s" in last_error(ws, "alice"), T,
                   "the new bound in last_error")
        lead_got(ws, lambda m: m["content"] == "AT-LAST", "the answer on the next try")
        assert live_pid(ws, TEAM, "alice") == pid  # no restart needed
