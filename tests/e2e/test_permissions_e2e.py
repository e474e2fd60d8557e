"""Permission rules end to end (CONTRACT.md §11, issue 11): a real `teamd run`, real forked
teammates, the real SDK over HTTP to the scripted server, real `bash`, and `teamctl` as a
person runs it. What a command would create on disk is the proof it ran (or did not)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from teamd import actions, files, inbox, permissions, requests
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import (
    TEAM,
    asked,
    events_of,
    journal,
    last_user,
    lead_got,
    live_pid,
    make_team,
    member,
    running_teamd,
    tool_use,
    turn_text,
    wait_status,
    wait_until,
)
from tests.helpers_proc import clean_env, ctl
from tests.helpers_proc import teamctl as run_teamctl

T = 20.0
PUSH = "echo pushed >> pushed.txt"  # stands for `git push`: asks first
ASK_RULES = '[permissions]\nask = ["bash(echo pushed*)"]\n'


def configure(ws: Workspace, text: str) -> None:
    ws.settings_file.write_text(text)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def results_in(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in last_user(record)["content"] if b.get("type") == "tool_result"]


def result_with(server: ScriptedServer, text: str, agent: str = "alice") -> dict[str, Any]:
    """The first request whose new tool results carry `text`; that result block."""
    seen = server.wait_for(lambda r: r["agent"] == agent and any(
        text in str(b.get("content")) for b in results_in(r)), T)
    return next(b for b in results_in(seen) if text in str(b.get("content")))


def pending_ask(ws: Workspace, name: str = "alice") -> dict[str, Any]:
    """Wait for `name` to be `waiting` on a permission request; return the record."""
    wait_status_any(ws, name, "waiting")
    found = [r for r in requests.list_requests(ws, TEAM, pending_only=True)
             if r["kind"] == "permission" and r["sender"] == name]
    assert len(found) == 1, found
    return found[0]


def wait_status_any(ws: Workspace, name: str, want: str) -> None:
    wait_status(ws, name, want, T)


def ask_when(server: ScriptedServer, marker: str, command: str = PUSH) -> None:
    server.add_rule({"agent": "alice", "contains": marker,
                     "reply": {"content": [tool_use("bash", command=command)]}})


def answered_then_done(server: ScriptedServer) -> None:
    server.add_rule({"agent": "alice", "tool_result": "bash", "reply": {"content": "Done."}})


# -- deny ----------------------------------------------------------------------------------
def test_deny_rules_stop_the_call_and_say_which_rule(ws: Workspace, server: ScriptedServer,
                                                     workdir: Path) -> None:
    configure(ws, '[permissions]\ndeny = ["bash(rm *)", "bash(*rm -rf*)", '
                  '"write_file(.git/*)"]\n')
    (workdir / "sub").mkdir()
    server.add_rule({"agent": "alice", "contains": "DENY-1", "reply": {"content": [
        # leading spaces: trimmed before matching `rm *`
        tool_use("bash", command="   rm nothing; echo a >> marker-deny.txt"),
        # a chain: the pattern sees the whole command
        tool_use("bash", command="cd sub && rm -rf y; echo b >> marker-deny.txt"),
        # a path that walks in and out again: normalised to .git/config
        tool_use("write_file", path="./a/../.git/config", content="[core]"),
        tool_use("bash", command="echo allowed >> marker-allowed.txt")]}})
    answered_then_done(server)
    make_team(ws, workdir, "alice")
    with running_teamd(ws, server.url):
        wait_status(ws, "alice", "idle")
        actions.send(ws, TEAM, "alice", "DENY-1 clean up")
        seen = server.wait_for(lambda r: r["agent"] == "alice" and len(results_in(r)) == 4, T)
        wait_status(ws, "alice", "idle")
    results = results_in(seen)
    assert [(b["is_error"], b["content"]) for b in results[:3]] == [
        (True, 'denied by rule "bash(rm *)"'), (True, 'denied by rule "bash(*rm -rf*)"'),
        (True, 'denied by rule "write_file(.git/*)"')]
    assert results[3]["is_error"] is False
    assert not (workdir / "marker-deny.txt").exists()  # neither bash call ran
    assert not (workdir / ".git").exists()
    assert lines(workdir / "marker-allowed.txt") == ["allowed"]  # the rest of the turn ran
    denied = [(e["tool"], e["input"], e["rule"]) for e in events_of(ws, "alice", "tool_denied")]
    assert denied == [("bash", "rm nothing; echo a >> marker-deny.txt", "bash(rm *)"),
                      ("bash", "cd sub && rm -rf y; echo b >> marker-deny.txt",
                       "bash(*rm -rf*)"),
                      ("write_file", ".git/config", "write_file(.git/*)")]


# -- ask, approve, --always ----------------------------------------------------------------
def test_ask_waits_then_approve_runs_it_once_and_always_stops_asking(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    configure(ws, ASK_RULES)
    ask_when(server, "ASK-1")
    ask_when(server, "ASK-2")
    answered_then_done(server)
    make_team(ws, workdir, "alice")
    pushed = workdir / "pushed.txt"
    with running_teamd(ws, server.url):
        wait_status(ws, "alice", "idle")
        actions.send(ws, TEAM, "alice", "ASK-1 push it")
        record = pending_ask(ws)
        rid = record["request_id"]
        assert (record["tool"], record["input"], record["rule"], record["ran"]) == \
            ("bash", {"command": PUSH}, "bash(echo pushed*)", False)
        assert not pushed.exists()
        # the lead heard: tool, argument, rule and id, in the content and the fields
        ask = lead_got(ws, lambda m: m["type"] == "permission_request", "the ask")
        assert (ask["sender"], ask["request_id"], ask["tool"], ask["input"], ask["rule"]) == \
            ("alice", rid, "bash", PUSH, "bash(echo pushed*)")
        for part in ("bash", PUSH, "bash(echo pushed*)", rid):
            assert part in ask["content"]
        asked_ev = events_of(ws, "alice", "permission_asked")
        assert [(e["tool"], e["input"], e["rule"], e["request_id"]) for e in asked_ev] == \
            [("bash", PUSH, "bash(echo pushed*)", rid)]
        # teamctl shows it: one readable line, the whole record with --json, and status
        listing = ctl(ws, "requests", TEAM, "--pending")
        line = next(x for x in listing.splitlines() if rid in x)
        assert "permission" in line and f"bash: {PUSH}" in line
        whole = json.loads(ctl(ws, "requests", TEAM, "--pending", "--json"))
        assert [r["input"] for r in whole] == [{"command": PUSH}]
        doc = json.loads(ctl(ws, "status", TEAM, "--json"))
        alice = next(m for m in doc["teams"][0]["members"] if m["name"] == "alice")
        assert alice["status"] == "waiting"
        assert alice["waiting_for"] == f"permission {rid}: bash: {PUSH}"
        assert "waiting" in ctl(ws, "status", TEAM)

        out = ctl(ws, "approve", TEAM, rid, "--always")
        assert rid in out
        wait_until(lambda: lines(pushed) == ["pushed"], T, "the approved command to run")
        result = result_with(server, "[exit code 0]")
        assert result["is_error"] is False
        wait_status(ws, "alice", "idle")
        done = requests.get(ws, TEAM, rid)
        assert (done["status"], done["ran"]) == ("approved", True)
        always = json.loads((ws.store.paths.team_dir(TEAM) / "permissions.json").read_text())
        assert always["allow"] == [f"bash({PUSH})"]

        # the same call again: allowed by the team's always rule, no new request
        actions.send(ws, TEAM, "alice", "ASK-2 push again")
        wait_until(lambda: len(lines(pushed)) == 2, T, "the second push")
        wait_status(ws, "alice", "idle")
    assert [r["request_id"] for r in requests.list_requests(ws, TEAM)
            if r["kind"] == "permission"] == [rid]
    assert len(events_of(ws, "alice", "permission_asked")) == 1
    assert lines(pushed) == ["pushed", "pushed"]


def test_reject_with_feedback_reaches_the_model(ws: Workspace, server: ScriptedServer,
                                                workdir: Path) -> None:
    configure(ws, ASK_RULES)
    ask_when(server, "ASK-R")
    answered_then_done(server)
    make_team(ws, workdir, "alice")
    with running_teamd(ws, server.url):
        wait_status(ws, "alice", "idle")
        actions.send(ws, TEAM, "alice", "ASK-R push it")
        rid = pending_ask(ws)["request_id"]
        ctl(ws, "reject", TEAM, rid, "--feedback", "FEEDBACK-7c1 open a pull request")
        result = result_with(server, "permission refused")
        assert result["is_error"] is True
        assert result["content"] == "permission refused: FEEDBACK-7c1 open a pull request"
        wait_status(ws, "alice", "idle")
        record = requests.get(ws, TEAM, rid)
        assert (record["status"], record["ran"]) == ("rejected", False)
        # a second answer is refused, and --always needs a permission request to approve
        again = run_teamctl(ws.root, "approve", TEAM, rid, env=clean_env())
        assert again.returncode == 2 and b"already rejected" in again.stderr
    assert not (workdir / "pushed.txt").exists()


def test_always_is_only_for_permission_requests(ws: Workspace, workdir: Path) -> None:
    make_team(ws, workdir, "alice", plan_mode=True)
    plan = actions.send(ws, TEAM, "lead", "PLAN", type_="plan_approval_request",
                        sender="alice")
    done = run_teamctl(ws.root, "approve", TEAM, plan["request_id"], "--always",
                       env=clean_env())
    assert done.returncode == 2
    assert b"--always applies to permission requests" in done.stderr
    assert requests.get(ws, TEAM, plan["request_id"])["status"] == "pending"  # untouched
    assert not (ws.store.paths.team_dir(TEAM) / "permissions.json").exists()


# -- the LLM lead answers ------------------------------------------------------------------
def test_an_llm_lead_answers_with_send_message(ws: Workspace, server: ScriptedServer,
                                               workdir: Path) -> None:
    configure(ws, ASK_RULES)
    server.add_rule({"agent": "lead", "regex":
                     r'type="permission_request" request_id="(?P<rid>perm-[0-9a-f]+)"',
                     "reply": {"content": [tool_use(
                         "SendMessage", recipient="alice", type="permission_response",
                         request_id="{rid}", approve=True, content="Go ahead.")]}})
    ask_when(server, "ASK-L")
    answered_then_done(server)
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "lead", "Lead the team; answer permission requests.",
                  lead=True, cwd=str(workdir))
    actions.spawn(ws, TEAM, "alice", "Wait for work.", cwd=str(workdir))
    pushed = workdir / "pushed.txt"
    with running_teamd(ws, server.url):
        wait_status(ws, "alice", "idle")
        wait_status(ws, "lead", "idle")
        actions.send(ws, TEAM, "alice", "ASK-L push it")
        wait_until(lambda: lines(pushed) == ["pushed"], T, "the lead-approved command")
        seen = server.wait_for(asked('type="permission_request"', "lead"), 1)
        text = turn_text(last_user(seen))
        record = next(r for r in requests.list_requests(ws, TEAM) if r["kind"] == "permission")
        for part in ("bash", PUSH, "bash(echo pushed*)", record["request_id"]):
            assert part in text
        assert "permission_response" in seen["body"]["system"][0]["text"]
        result_with(server, "[exit code 0]")
        assert (record["sender"], record["recipient"]) == ("alice", "lead")
        record = requests.get(ws, TEAM, record["request_id"])
        assert (record["status"], record["ran"]) == ("approved", True)
        answer = result_with(server, "they were told", agent="lead")
        assert answer["is_error"] is False


# -- restarts ------------------------------------------------------------------------------
@pytest.mark.parametrize("approve_while_down", [False, True],
                         ids=["approved-after-restart", "approved-while-down"])
def test_kill_while_waiting_then_approve_runs_exactly_once(
        ws: Workspace, server: ScriptedServer, workdir: Path, approve_while_down: bool) -> None:
    configure(ws, ASK_RULES)
    ask_when(server, "ASK-K")
    answered_then_done(server)
    make_team(ws, workdir, "alice")
    pushed = workdir / "pushed.txt"
    with running_teamd(ws, server.url, backoff_initial=2 if approve_while_down else 0.1):
        wait_status(ws, "alice", "idle")
        actions.send(ws, TEAM, "alice", "ASK-K push it")
        rid = pending_ask(ws)["request_id"]
        pid = live_pid(ws, TEAM, "alice")
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        if approve_while_down:
            wait_until(lambda: live_pid(ws, TEAM, "alice") is None, T, "alice to be dead")
            ctl(ws, "approve", TEAM, rid)
            assert live_pid(ws, TEAM, "alice") is None  # answered before the restart
        wait_until(lambda: (live_pid(ws, TEAM, "alice") or pid) != pid, T, "a restart")
        if not approve_while_down:
            # the new process waits again on the same record, without asking twice
            assert pending_ask(ws)["request_id"] == rid
            ctl(ws, "approve", TEAM, rid)
        wait_until(lambda: lines(pushed), T, "the approved command to run")
        result_with(server, "[exit code 0]")
        wait_status(ws, "alice", "idle")
        assert member(ws, TEAM, "alice")["restarts"] == 1
    assert lines(pushed) == ["pushed"]  # exactly once
    assert [r["request_id"] for r in requests.list_requests(ws, TEAM)] == [rid]
    asks = [e["message"] for e in events_of(ws, "alice", "message")
            if e["message"]["type"] == "permission_request"]
    assert len({m["id"] for m in asks}) == 1  # the lead was asked once
    bash_runs = [e for e in events_of(ws, "alice", "tool_call") if e["tool"] == "bash"]
    assert [e["ok"] for e in bash_runs] == [True]  # one run, after the restart


def test_kill_right_after_the_approved_call_ran_never_runs_it_again(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    configure(ws, ASK_RULES)
    slow = "echo pushed >> pushed.txt; sleep 30"
    ask_when(server, "ASK-S", command=slow)
    server.add_rule({"agent": "alice", "contains": "interrupted by a restart; not re-run",
                     "reply": {"content": "Noted."}})
    make_team(ws, workdir, "alice")
    pushed = workdir / "pushed.txt"
    with running_teamd(ws, server.url, backoff_initial=0.1):
        wait_status(ws, "alice", "idle")
        actions.send(ws, TEAM, "alice", "ASK-S push it")
        rid = pending_ask(ws)["request_id"]
        ctl(ws, "approve", TEAM, rid)
        wait_until(lambda: lines(pushed), T, "the approved command to start")
        assert requests.get(ws, TEAM, rid)["ran"] is True
        pid = live_pid(ws, TEAM, "alice")
        assert pid is not None
        os.kill(pid, signal.SIGKILL)  # while its `sleep 30` runs
        wait_until(lambda: (live_pid(ws, TEAM, "alice") or pid) != pid, T, "a restart")
        result = result_with(server, "interrupted by a restart; not re-run")
        assert result["is_error"] is True
        wait_status(ws, "alice", "idle")
    assert lines(pushed) == ["pushed"]


# -- shutdown and timeout while waiting ----------------------------------------------------
def test_a_shutdown_ends_the_wait_and_is_answered_at_once(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    configure(ws, ASK_RULES)
    ask_when(server, "ASK-D")
    make_team(ws, workdir, "alice")
    with running_teamd(ws, server.url):
        wait_status(ws, "alice", "idle")
        actions.send(ws, TEAM, "alice", "ASK-D push it")
        rid = pending_ask(ws)["request_id"]
        pid = live_pid(ws, TEAM, "alice")
        calls = len(server.requests)
        shutdown = actions.shutdown(ws, TEAM, "alice", reason="wrap up")["request"]
        answer = lead_got(ws, lambda m: m["type"] == "shutdown_response",
                          "the shutdown answer within a second", timeout=1.0)
        assert (answer["request_id"], answer["approve"]) == (shutdown["request_id"], True)
        record = requests.get(ws, TEAM, rid)
        assert (record["status"], record["answer_reason"], record["ran"]) == \
            ("rejected", "shutting down", False)
        wait_status(ws, "alice", "shutdown")
        assert live_pid(ws, TEAM, "alice") is None and pid is not None
        exits = wait_until(lambda: [e["code"] for e in events_of(ws, "alice", "exited")], T,
                           "the exit journaled (it follows the status)")
        assert exits == [0]
        assert len(server.requests) == calls  # the harness answered, not the model
    assert not (workdir / "pushed.txt").exists()
    session = files.read_jsonl(ws.store.paths.session(TEAM, "alice")).records
    refused = [r["block"] for r in session if r["type"] == "tool_result"]
    assert refused[-1]["content"] == "permission refused: shutting down"


def test_permission_timeout_rejects_an_unanswered_request(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    configure(ws, "permission_timeout = 1\n" + ASK_RULES)
    ask_when(server, "ASK-T")
    answered_then_done(server)
    make_team(ws, workdir, "alice")
    with running_teamd(ws, server.url):
        wait_status(ws, "alice", "idle")
        actions.send(ws, TEAM, "alice", "ASK-T push it")
        rid = pending_ask(ws)["request_id"]
        result = result_with(server, "permission refused")
        assert result["content"] == "permission refused: timeout"
        record = requests.get(ws, TEAM, rid)
        assert (record["status"], record["answer_reason"]) == ("rejected", "timeout")
        assert record["resolved_at"] - record["created_at"] >= 1
        wait_status(ws, "alice", "idle")
    assert not (workdir / "pushed.txt").exists()


# -- changing the rules --------------------------------------------------------------------
def test_new_rules_apply_from_the_next_call_and_a_bad_rule_keeps_them(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    for n in (1, 2, 3):
        server.add_rule({"agent": "alice", "contains": f"RUN-{n}", "reply": {"content": [
            tool_use("bash", command=f"echo {n} >> runs.txt")]}})
    answered_then_done(server)
    make_team(ws, workdir, "alice")
    runs = workdir / "runs.txt"
    with running_teamd(ws, server.url) as daemon:
        wait_status(ws, "alice", "idle")
        pid = live_pid(ws, TEAM, "alice")
        actions.send(ws, TEAM, "alice", "RUN-1")
        wait_until(lambda: lines(runs) == ["1"], T, "the first run")
        wait_status(ws, "alice", "idle")
        configure(ws, '[permissions]\ndeny = ["bash(echo*)"]\n')
        daemon.proc.send_signal(signal.SIGHUP)
        actions.send(ws, TEAM, "alice", "RUN-2")
        assert result_with(server, "denied by rule")["content"] == 'denied by rule "bash(echo*)"'
        wait_status(ws, "alice", "idle")
        # a rule that does not parse: teamd says so and keeps the rules in force
        configure(ws, '[permissions]\ndeny = ["bsh(echo*)"]\n')
        daemon.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: "bsh(echo*)" in daemon.output(), T, "teamd to name the bad rule")
        actions.send(ws, TEAM, "alice", "RUN-3")
        wait_until(lambda: len(events_of(ws, "alice", "tool_denied")) == 2, T, "a denial")
        wait_status(ws, "alice", "idle")
        assert daemon.proc.poll() is None and live_pid(ws, TEAM, "alice") == pid
        # a member forked while the file is broken starts with the rules in force too
        # (it does not crash on the bad rule, nor run with none)
        actions.restart(ws, TEAM, "alice")
        wait_until(lambda: (live_pid(ws, TEAM, "alice") or pid) != pid, T, "a new alice")
        wait_status(ws, "alice", "idle")
        actions.send(ws, TEAM, "alice", "RUN-3 again")
        wait_until(lambda: len(events_of(ws, "alice", "tool_denied")) == 3, T, "a denial")
        assert member(ws, TEAM, "alice")["restarts"] == 0
    assert lines(runs) == ["1"]


def test_teamd_refuses_to_start_with_a_bad_rule(ws: Workspace, workdir: Path) -> None:
    configure(ws, '[permissions]\nask = ["TaskCreate(x)"]\n')
    done = subprocess.run([sys.executable, "-m", "teamd", "run", "--root", str(ws.root)],
                          capture_output=True, text=True, timeout=30, env=clean_env())
    assert done.returncode == 2
    assert '"TaskCreate(x)"' in done.stderr and "teamd.toml" in done.stderr
    assert not (ws.store.paths.teams_dir / "teamd.json").exists()  # no supervisor ever ran


def test_the_lead_inbox_message_is_valid_for_readers(ws: Workspace, workdir: Path) -> None:
    """The ask is a well-formed message for every reader of the lead's inbox."""
    make_team(ws, workdir, "alice")
    record = permissions.open_ask(ws, TEAM, "alice", "lead", "bash", {"command": "x" * 5000},
                                  "x" * 5000, "bash(x*)", "perm-0123456789")
    assert record["asked"] is True and record["status"] == "pending"
    again = permissions.open_ask(ws, TEAM, "alice", "lead", "bash", {"command": "x" * 5000},
                                 "x" * 5000, "bash(x*)", "perm-0123456789")
    assert again["request_id"] == "perm-0123456789"
    msgs = inbox.peek(ws, TEAM, "lead")
    assert len(msgs) == 1  # asked once
    assert len(msgs[0]["input"]) == permissions.ARG_SHOWN  # cut to 4 KiB; the record has all
    assert requests.get(ws, TEAM, "perm-0123456789")["input"] == {"command": "x" * 5000}
    assert [e["event"] for e in journal(ws, TEAM)].count("permission_asked") == 1
