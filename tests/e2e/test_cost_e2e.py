"""Cost, budgets, the shared rate limit and the quiet lead end to end (CONTRACT.md section 12):
a real `teamd run` forking real members, the real `anthropic` SDK over real HTTP, the
scripted model server reporting the usage, headers and 429s each test needs."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from teamd import actions, files, roster
from teamd.layout import LEAD, Workspace
from teamd.scripted import ScriptedServer
from tests.harness import (
    TEAM,
    asked,
    cli,
    events_of,
    journal,
    lead_got,
    lead_inbox,
    live_pid,
    member,
    read_log,
    running_teamd,
    send_to_lead,
    tool_use,
    turn_text,
    wait_status,
    wait_until,
)

T = 30.0
#: what a scripted call reports: 30,000 input tokens = $0.06 at Sonnet 5.5's $2 per million
BIG = {"input_tokens": 30_000, "output_tokens": 0, "cache_read_input_tokens": 0,
       "cache_creation_input_tokens": 0}
CALL_USD = 0.06


def calls_of(server: ScriptedServer, name: str) -> list[dict[str, Any]]:
    return [r for r in server.requests if r["agent"] == name]


def spent(ws: Workspace) -> float:
    return float((files.read_json(ws.store.paths.spend(TEAM)) or {})["spent_usd"])


def budget_notes(ws: Workspace) -> list[dict[str, Any]]:
    return [m for m in lead_inbox(ws) if m["type"] == "budget_reached"]


def chain(agent: str, steps: int, usage: dict[str, int] = BIG) -> list[dict[str, Any]]:
    """Rules for `agent`: its first `steps` calls each ask for a bash step; later calls end
    the turn. Every call reports `usage`."""
    return [{"agent": agent, "times": steps, "reply": {
                "content": [tool_use("bash", command="true")], "usage": usage}},
            {"agent": agent, "reply": {"content": "Done.", "usage": usage}}]


# -- cost ------------------------------------------------------------------------------------
def test_every_call_is_priced_into_the_event_the_member_and_the_team(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    all_four = {"input_tokens": 1_000, "output_tokens": 2_000,
                "cache_creation_input_tokens": 10_000, "cache_read_input_tokens": 100_000}
    server.add_rule({"agent": "alice", "contains": "PRICE-1",
                     "reply": {**send_to_lead("PRICED"), "usage": all_four}})
    server.add_rule({"agent": "bob", "contains": "FREE-1", "reply": send_to_lead("UNPRICED")})
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "alice", "Wait for work.", cwd=str(workdir))
    actions.spawn(ws, TEAM, "bob", "Wait for work.", cwd=str(workdir),
                  model="claude-nonesuch-1")
    with running_teamd(ws, server.url):
        wait_status(ws, "alice", "idle")
        wait_status(ws, "bob", "idle")
        # a model with no price: said once, in last_error, and nothing is blocked
        assert "no price known for model claude-nonesuch-1" in str(
            member(ws, TEAM, "bob")["last_error"])
        actions.send(ws, TEAM, "alice", "PRICE-1 go")
        actions.send(ws, TEAM, "bob", "FREE-1 go")
        lead_got(ws, lambda m: m["content"] == "PRICED", "alice's answer")
        lead_got(ws, lambda m: m["content"] == "UNPRICED", "bob's answer")
        wait_status(ws, "alice", "idle")
        wait_status(ws, "bob", "idle")
        bob = member(ws, TEAM, "bob")
        assert bob["last_error"] is None  # once per process: not said again
        status = json.loads(cli(ws, "status", TEAM, "--json").stdout)
        table = cli(ws, "status", TEAM).stdout
    alice_calls = events_of(ws, "alice", "model_call")
    priced = [e for e in alice_calls if all(e[k] == v for k, v in all_four.items())]
    # by hand, Sonnet 5.5: 1,000 × $2 + 10,000 × $2.50 (5-minute writes) + 100,000 × $0.10
    # + 2,000 × $10, per million
    assert len(priced) == 1 and priced[0]["cost_usd"] == pytest.approx(0.057, abs=1e-9)
    assert all(e["cache_creation_1h"] == 0 for e in alice_calls)  # always there, 0 when none
    assert all(isinstance(e["cost_usd"], float) and e["cost_usd"] > 0 for e in alice_calls)
    alice_total = sum(e["cost_usd"] for e in alice_calls)
    bob_calls = events_of(ws, "bob", "model_call")
    assert len(bob_calls) >= 3 and all(e["cost_usd"] is None for e in bob_calls)
    # the member's usage and the team's spend.json agree with the journal; bob counts 0
    assert member(ws, TEAM, "alice")["usage"]["cost_usd"] == pytest.approx(alice_total)
    assert bob["usage"]["cost_usd"] == 0.0 and bob["usage"]["input_tokens"] > 0
    assert spent(ws) == pytest.approx(alice_total)
    team = status["teams"][0]
    assert team["spent_usd"] == pytest.approx(alice_total) and team["budget_usd"] is None
    costs = {m["name"]: m["usage"]["cost_usd"] for m in team["members"]}
    assert costs == {"alice": pytest.approx(alice_total), "bob": 0.0}
    assert f"spent ${alice_total:.4f}" in table and "COST" in table


# -- budgets ---------------------------------------------------------------------------------
def test_a_member_at_its_budget_pauses_tells_the_lead_once_and_goes_on_when_raised(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    for rule in chain("alice", 3):
        server.add_rule(rule)
    actions.create_team(ws, TEAM)
    cli(ws, "spawn", TEAM, "alice", "--prompt", "Work.", "--cwd", str(workdir),
        "--budget", "0.05")
    with running_teamd(ws, server.url):
        wait_status(ws, "alice", "paused")
        pid = live_pid(ws, TEAM, "alice")
        alice = member(ws, TEAM, "alice")
        assert alice["last_error"] == "member budget reached: $0.06 of $0.05"
        assert alice["usage"]["cost_usd"] == pytest.approx(CALL_USD)
        note = lead_got(ws, lambda m: m["type"] == "budget_reached", "the budget note")
        assert (note["sender"], note["member"], note["scope"]) == ("alice", "alice", "member")
        assert (note["spent_usd"], note["budget_usd"]) == (pytest.approx(CALL_USD), 0.05)
        assert f"teamctl budget {TEAM} USD --member alice" in note["content"]
        # the call that passed the budget was the last one: paused, it makes no other
        assert len(calls_of(server, "alice")) == 1
        reached = events_of(ws, "alice", "budget_reached")
        assert [(e["scope"], e["budget_usd"]) for e in reached] == [("member", 0.05)]
        status = json.loads(cli(ws, "status", TEAM, "--json").stdout)
        assert status["teams"][0]["members"][0]["status"] == "paused"
    # a supervisor restart: paused again at once, and the lead is not told twice
    with running_teamd(ws, server.url):
        wait_until(lambda: live_pid(ws, TEAM, "alice") not in (None, pid), T, "a new alice")
        wait_status(ws, "alice", "paused")
        pid = live_pid(ws, TEAM, "alice")
        assert len(calls_of(server, "alice")) == 1 and len(budget_notes(ws)) == 1
        # raised: the member goes on at once (it waits on inotify, not a timer)
        cli(ws, "budget", TEAM, "1", "--member", "alice")
        raised = time.time()
        nxt = server.wait_for(lambda r: r["agent"] == "alice", T, since=1)
        assert nxt["received_at"] - raised < 1.0
        wait_status(ws, "alice", "idle")
        assert member(ws, TEAM, "alice")["last_error"] is None
        assert live_pid(ws, TEAM, "alice") == pid  # the same process went on
    assert len(calls_of(server, "alice")) == 4  # its chain, finished
    assert len(budget_notes(ws)) == 1
    assert member(ws, TEAM, "alice")["usage"]["cost_usd"] == pytest.approx(4 * CALL_USD)
    assert spent(ws) == pytest.approx(4 * CALL_USD)


def test_a_budget_is_never_blind_a_model_with_no_price_is_not_called(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    """alice and carol (models the table leaves unpriced: one the SDK lists, one it does
    not) have budgets: neither calls, both
    pause with the contract's words; bob (priced) works. A price added and SIGHUP'd lets
    alice go on; carol's budget removed lets her go on (counted in tokens, not dollars)."""
    actions.create_team(ws, TEAM)
    spawned = {name: cli(ws, "spawn", TEAM, name, "--prompt", "Work.", "--cwd", str(workdir),
                         "--model", model, "--budget", "1")
               for name, model in (("alice", "claude-mythos-preview"), ("bob", "claude-sonnet-5-5"),
                                   ("carol", "claude-sonnet-9-9"))}
    assert "warning: no price for model claude-mythos-preview (alice)" in spawned["alice"].stderr
    assert "no price" not in spawned["bob"].stderr
    with running_teamd(ws, server.url) as daemon:
        for name, model in (("alice", "claude-mythos-preview"), ("carol", "claude-sonnet-9-9")):
            wait_status(ws, name, "paused")
            assert member(ws, TEAM, name)["last_error"] == \
                f"no price for model {model}: add it under [prices] in teamd.toml"
        wait_status(ws, "bob", "idle")
        # the scripted server's log: bob called, the two paused members never did
        assert calls_of(server, "bob") and not calls_of(server, "alice") \
            and not calls_of(server, "carol")
        assert events_of(ws, "alice", "budget_reached") == []  # no budget was reached
        again = cli(ws, "budget", TEAM, "2", "--member", "alice")
        assert again.stderr.count("no price for model claude-mythos-preview (alice)") == 1
        # a price for alice's model, and SIGHUP: it goes on, priced by teamd.toml
        ws.settings_file.write_text(
            '[prices]\n"claude-mythos-preview" = {input = 20, output = 100}\n')
        daemon.proc.send_signal(signal.SIGHUP)
        server.wait_for(lambda r: r["agent"] == "alice", T)
        wait_status(ws, "alice", "idle")
        assert member(ws, TEAM, "alice")["last_error"] is None
        alice_calls = events_of(ws, "alice", "model_call")
        assert alice_calls and all(e["cost_usd"] > 0 for e in alice_calls)
        # carol's budget removed: nothing covers her any more, so she goes on, unpriced
        assert member(ws, TEAM, "carol")["status"] == "paused" and not calls_of(server, "carol")
        cli(ws, "budget", TEAM, "0", "--member", "carol")
        server.wait_for(lambda r: r["agent"] == "carol", T)
        wait_status(ws, "carol", "idle")
        assert all(e["cost_usd"] is None for e in events_of(ws, "carol", "model_call"))
    # a team budget covers every member: carol's model is named in one warning line
    team_wide = cli(ws, "budget", TEAM, "10")
    assert team_wide.stderr.strip().splitlines() == [
        "warning: no price for model claude-sonnet-9-9 (carol): under a budget it is paused, "
        "never called; add it under [prices] in teamd.toml"]


def test_a_team_budget_pauses_all_three_members_and_raising_it_wakes_them(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    names = ("alice", "bob", "carol")
    for name in names:
        for rule in chain(name, 4):
            server.add_rule(rule)
    cli(ws, "create", TEAM, "--budget", "0.10")
    for name in names:
        actions.spawn(ws, TEAM, name, "Work.", cwd=str(workdir))
    with running_teamd(ws, server.url):
        for name in names:
            wait_status(ws, name, "paused")
        before = len(server.requests)
        # two calls pass $0.10; each other member may have had one call in flight
        assert 2 <= before <= 4 and spent(ws) == pytest.approx(before * CALL_USD)
        for name in names:  # what the spend was when each one checked
            line = str(member(ws, TEAM, name)["last_error"])
            assert line.startswith("team budget reached: $") and line.endswith(" of $0.10")
        notes = wait_until(lambda: len(budget_notes(ws)) == 3 and budget_notes(ws), T,
                           "one note from each member")
        assert sorted(m["member"] for m in notes) == list(names)
        assert {(m["scope"], m["budget_usd"]) for m in notes} == {("team", 0.10)}
        assert len(server.requests) == before  # paused: no calls
        table = cli(ws, "status", TEAM).stdout
        assert f"spent ${before * CALL_USD:.4f} of $0.1000" in table
        # a paused member still answers a shutdown, at once
        rid = actions.shutdown(ws, TEAM, "carol")["request"]["request_id"]
        answer = lead_got(ws, lambda m: m["type"] == "shutdown_response", "carol's answer")
        assert (answer["request_id"], answer["approve"]) == (rid, True)
        wait_status(ws, "carol", "shutdown")
        # raised: both remaining members call again at once
        cli(ws, "budget", TEAM, "10")
        raised = time.time()
        for name in ("alice", "bob"):
            nxt = server.wait_for(lambda r, n=name: r["agent"] == n, T, since=before)
            assert nxt["received_at"] - raised < 1.0
        for name in ("alice", "bob"):
            wait_status(ws, name, "idle")
    assert len(budget_notes(ws)) == 3
    assert spent(ws) == pytest.approx(len(server.requests) * CALL_USD)
    assert sum(member(ws, TEAM, n)["usage"]["cost_usd"] for n in names) == \
        pytest.approx(spent(ws))


# -- the shared rate limit -------------------------------------------------------------------
def test_a_429_window_holds_all_three_members_back_and_all_finish_after(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    gate = workdir / "gate"
    wait_gate = f"while [ ! -e {gate} ]; do sleep 0.05; done"
    server.add_rule({"name": "window", "agent": "alice", "contains": "GO-A", "window": 2.0,
                     "error": {"status": 429, "retry_after": 2}})
    server.add_rule({"agent": "alice", "contains": "GO-A", "reply": send_to_lead("A-DONE")})
    for name in ("bob", "carol"):
        server.add_rule({"agent": name, "contains": "GO", "reply": {"content": [
            tool_use("bash", command=wait_gate)]}})
        server.add_rule({"agent": name, "tool_result": "bash",
                         "reply": send_to_lead(f"{name}-DONE")})
    actions.create_team(ws, TEAM)
    for name in ("alice", "bob", "carol"):
        actions.spawn(ws, TEAM, name, "Wait for work.", cwd=str(workdir))
    with running_teamd(ws, server.url, retry_max_wait=5):
        for name in ("alice", "bob", "carol"):
            wait_status(ws, name, "idle")
        # bob and carol are at work (in a tool) when alice runs into the limit
        for name in ("bob", "carol"):
            actions.send(ws, TEAM, name, "GO please")
            server.wait_for(asked("GO please", name), T)
        actions.send(ws, TEAM, "alice", "GO-A please")
        first = server.wait_for(lambda r: r["status"] == 429, T)
        wait_until(lambda: files.read_json(ws.store.paths.ratelimit_file), T, "ratelimit.json")
        gate.touch()  # their tools end now: their next calls fall inside the window
        for name in ("bob", "carol"):
            wait_until(lambda n=name: "rate limited (shared) until" in str(
                member(ws, TEAM, n)["last_error"]), T, f"{name} to say it waits")
        for text in ("A-DONE", "bob-DONE", "carol-DONE"):
            lead_got(ws, lambda m, t=text: m["content"] == t, text)
    window_end = first["received_at"] + 2.0
    inside = [r for r in server.requests if first["received_at"] < r["received_at"]
              < window_end - 0.05]
    assert inside == [], [(r["agent"], r["status"]) for r in inside]
    assert [r["status"] for r in server.requests].count(429) == 1
    limit = [e for e in journal(ws, TEAM) if e.get("event") == "rate_limited"]
    assert [(e["member"], e["status"], e["source"]) for e in limit] == [
        ("alice", 429, "retry-after")]


def test_used_up_ratelimit_headers_hold_the_root_back_before_any_429(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    server.add_rule({"agent": "alice", "contains": "SPEND-1", "reply": send_to_lead("SPENT"),
                     "ratelimit": {"family": "input-tokens", "remaining": 0, "reset_in": 2}})
    server.add_rule({"agent": "bob", "contains": "WORK-B", "reply": send_to_lead("B-DONE")})
    actions.create_team(ws, TEAM)
    for name in ("alice", "bob"):
        actions.spawn(ws, TEAM, name, "Wait for work.", cwd=str(workdir))
    with running_teamd(ws, server.url):
        wait_status(ws, "alice", "idle")
        wait_status(ws, "bob", "idle")
        actions.send(ws, TEAM, "alice", "SPEND-1 go")
        hit = server.wait_for(asked("SPEND-1", "alice"), T)
        limit = wait_until(
            lambda: files.read_json(ws.store.paths.ratelimit_file), T, "ratelimit.json"
        )
        assert (limit["status"], limit["source"]) == (None, "headers")
        until = float(limit["until"])
        assert hit["received_at"] + 2 - 0.5 <= until <= hit["received_at"] + 2 + 0.5
        actions.send(ws, TEAM, "bob", "WORK-B go")
        wait_until(lambda: "rate limited (shared) until" in str(
            member(ws, TEAM, "bob")["last_error"]), T, "bob to say he waits")
        lead_got(ws, lambda m: m["content"] == "B-DONE", "bob's answer after the reset")
    bob = [r for r in server.requests if r["agent"] == "bob" and r["received_at"] > hit[
        "received_at"]]
    assert bob and bob[0]["received_at"] >= until
    # held back before any 429 (a call cut as teamd stops at the end may log no status)
    assert 429 not in [r["status"] for r in server.requests]
    events = events_of(ws, "alice", "rate_limited")
    assert [(e["status"], e["source"], e["until"]) for e in events] == [
        (None, "headers", until)]


def test_max_concurrent_calls_caps_the_root_and_a_killed_member_frees_its_slot(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    names = [f"m{i}" for i in range(5)]
    slow = 0.3
    server.add_rule({"agent": "m0", "contains": "HANG", "delay": 60,
                     "reply": {"content": "late"}})
    server.add_rule({"agent": "m1", "contains": "HANG", "delay": 60,
                     "reply": {"content": "late"}})
    server.add_rule({"tool_result": "SendMessage", "delay": slow, "reply": {"content": "ok"}})
    server.add_rule({"tool_result": "bash", "delay": slow,
                     "reply": send_to_lead("{agent} did it")})
    server.add_rule({"contains": "WORK", "delay": slow, "reply": {"content": [
        tool_use("bash", command="true")]}})
    actions.create_team(ws, TEAM)
    for name in names:
        actions.spawn(ws, TEAM, name, "Wait for work.", cwd=str(workdir))
    with running_teamd(ws, server.url, max_concurrent_calls=2):
        for name in names:
            wait_status(ws, name, "idle")
        server.reset_peak()
        for name in names:
            actions.send(ws, TEAM, name, "WORK now")
        for name in names:
            lead_got(ws, lambda m, n=name: m["content"] == f"{n} did it", f"{name}'s work")
        for name in names:
            wait_status(ws, name, "idle")
        # fifteen slow calls by five members, never more than two at once
        assert server.peak_in_flight == 2
        assert sorted(os.listdir(ws.store.paths.calls_dir)) == ["0.lock", "1.lock"]
        assert all(
            os.stat(ws.store.paths.calls_dir / f).st_mode & 0o777 == 0o600
            for f in ("0.lock", "1.lock")
        )
        # m0 and m1 hold both slots with calls the server sits on; m2 must wait
        for name in ("m0", "m1"):
            actions.send(ws, TEAM, name, "HANG on")
            server.wait_for(asked("HANG on", name), T)
        since = len(server.requests)
        waits = read_log(ws, TEAM, "m2").count("all 2 call slots are taken")
        actions.send(ws, TEAM, "m2", "WORK again")
        wait_until(lambda: read_log(ws, TEAM, "m2").count("all 2 call slots are taken")
                   > waits, T, "m2 to wait for a slot")
        assert not [r for r in server.requests[since:] if r["agent"] == "m2"]
        pid = live_pid(ws, TEAM, "m0")
        assert pid is not None
        os.kill(pid, signal.SIGKILL)  # its flock dies with it
        killed = time.time()
        got = server.wait_for(lambda r: r["agent"] == "m2", T, since=since)
        assert got["received_at"] >= killed


# -- the lead's attention --------------------------------------------------------------------
def lead_team(ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    for name in ("alice", "bob"):
        gate = workdir / f"gate-{name}"
        server.add_rule({"agent": name, "contains": "JOB", "reply": {"content": [
            tool_use("bash", command=f"while [ ! -e {gate} ]; do sleep 0.05; done")]}})
        server.add_rule({"agent": name, "tool_result": "bash",
                         "reply": {"content": f"{name} finished the job."}})
    server.add_rule({"agent": "lead", "reply": {"content": "Noted."}})
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, LEAD, "Lead the team.", lead=True, cwd=str(workdir))
    for name in ("alice", "bob"):
        actions.spawn(ws, TEAM, name, "Wait for work.", cwd=str(workdir))


def settled(ws: Workspace) -> bool:
    """Everyone idle and the lead has taken in all its mail and answered it. The session is
    read last: a notice taken in after it was read would otherwise go unseen (the lead
    records what it takes in before it cuts its inbox)."""
    if not all(member(ws, TEAM, n)["status"] == "idle" for n in ("lead", "alice", "bob")) \
            or lead_inbox(ws):
        return False
    records = files.read_jsonl(ws.store.paths.session(TEAM, LEAD)).records
    return bool(records) and records[-1]["type"] == "assistant"


def notice_from(ws: Workspace, name: str, after: float) -> None:
    """Wait until `name`'s idle notification, sent after `after`, is journaled."""
    def sent() -> bool:
        return any(e.get("event") == "message" and e["message"]["type"] == "idle_notification"
                   and e["message"]["sender"] == name and e["ts"] > after
                   for e in journal(ws, TEAM))
    wait_until(sent, T, f"{name}'s idle notification")


def alice_done_first(ws: Workspace, server: ScriptedServer, workdir: Path) -> int:
    """Give alice and bob a job each, let alice finish hers (bob's stays held at his gate),
    and wait for her idle notification; returns how many requests came before the jobs."""
    since = len(server.requests)
    for name in ("alice", "bob"):
        actions.send(ws, TEAM, name, "JOB for you")
        server.wait_for(asked("JOB for you", name), T)
    (workdir / "gate-alice").touch()
    notice_from(ws, "alice", server.requests[since]["received_at"])
    return since


def notices_in(record: dict[str, Any]) -> list[str]:
    """Who the idle notifications of a lead request's new input are from."""
    text = turn_text(record["body"]["messages"][-1])
    return [n for n in ("alice", "bob")
            if f'<teammate-message sender="{n}" type="idle_notification">' in text]


@pytest.mark.parametrize("mode", ["quiet", "each"])
def test_idle_notifications_wake_the_lead_as_lead_wake_on_idle_says(
        ws: Workspace, server: ScriptedServer, workdir: Path, mode: str) -> None:
    lead_team(ws, server, workdir)
    with running_teamd(ws, server.url, lead_wake_on_idle=mode):
        wait_until(lambda: settled(ws), T, "the team to settle")
        since = alice_done_first(ws, server, workdir)
        if mode == "each":
            # alice's notice wakes the lead while bob still works
            woken = server.wait_for(lambda r: r["agent"] == "lead", T, since=since)
            assert notices_in(woken) == ["alice"]
            assert member(ws, TEAM, "bob")["status"] == "active"
        else:
            wait_status(ws, "alice", "idle")
            time.sleep(0.5)  # room for a wrong wake-up to show (the lead reacts in ms)
            assert not [r for r in server.requests[since:] if r["agent"] == "lead"]
            assert member(ws, TEAM, "lead")["status"] == "idle"
            assert [m["sender"] for m in lead_inbox(ws)] == ["alice"]  # it waits there
        (workdir / "gate-bob").touch()
        # a notice follows the idle status (teamd may have a task for it first, issue 10)
        notice_from(ws, "bob", server.requests[since]["received_at"])
        wait_until(lambda: settled(ws), T, "the team to settle again")
        lead_calls = [r for r in server.requests[since:] if r["agent"] == "lead"]
        if mode == "quiet":
            # one call, once both were idle, taking in both notices
            assert [notices_in(r) for r in lead_calls] == [["alice", "bob"]]
        else:
            assert [notices_in(r) for r in lead_calls] == [["alice"], ["bob"]]


def test_a_sleeping_lead_is_woken_by_idle_notices_only_once_the_team_is_quiet(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    lead_team(ws, server, workdir)
    with running_teamd(ws, server.url, idle_timeout=1):
        wait_status(ws, "lead", "sleeping")
        for name in ("alice", "bob"):
            wait_until(lambda n=name: roster.find(roster.load(ws, TEAM), n)["status"]
                       in ("idle", "sleeping"), T, f"{name} to rest")
        since = alice_done_first(ws, server, workdir)
        wait_until(lambda: member(ws, TEAM, "alice")["status"] in ("idle", "sleeping"), T,
                   "alice to rest")
        time.sleep(0.5)  # room for a wrong wake-up to show
        assert member(ws, TEAM, "lead")["status"] == "sleeping"
        (workdir / "gate-bob").touch()
        woken = server.wait_for(lambda r: r["agent"] == "lead", T, since=since)
        assert notices_in(woken) == ["alice", "bob"]
