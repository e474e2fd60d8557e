"""teamctl through typer's runner: every command that needs no running process (issue 2).

Errors raised by a command surface here as `result.exception`; the exit codes and the
one-line stderr of the real console script are checked in test_bad_input.py.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import subprocess
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from teamctl.cli import app
from teamd import actions, board, events, inbox, requests, roster, settings
from teamd.errors import BadInput, TeamdError
from teamd.layout import Workspace
from tests.harness import cli, wait_until
from tests.helpers_proc import TEAMCTL, snapshot

runner = CliRunner()
JQ = shutil.which("jq")


def as_json(result: Result) -> Any:
    return json.loads(result.stdout)


def as_jsonl(result: Result) -> list[Any]:
    return [json.loads(line) for line in result.stdout.splitlines()]


def jq(text: str, program: str) -> str:
    assert JQ is not None
    done = subprocess.run([JQ, "-r", program], input=text.encode(), capture_output=True,
                          timeout=10, check=True)
    return done.stdout.decode()


@pytest.fixture
def root(ws: Workspace) -> Path:
    cli(ws.root, "create", "t", "--description", "test team")
    cli(ws.root, "spawn", "t", "alice", "--prompt", "work", "--role", "backend")
    cli(ws.root, "spawn", "t", "bob", "--prompt", "work")
    return ws.root


# -- init, create, spawn -----------------------------------------------------------------
def test_init_writes_defaults_once(ws: Workspace) -> None:
    out = cli(ws.root, "init")
    assert str(ws.settings_file) in out.stdout
    table = tomllib.loads(ws.settings_file.read_text())
    assert table["idle_timeout"] == 60 and table["events_keep"] == 5
    # every key, and the tables ([prices] empty: its example is a comment)
    assert set(table) == {*settings.Settings().as_toml_table(), *settings.TABLES}
    assert table["permissions"] == {"default": "allow", "allow": [], "ask": [], "deny": []}
    assert table["retry_max_wait"] == 60 and table["api_timeout"] == 600
    assert table["prices"] == {} and table["lead_wake_on_idle"] == "quiet"
    again = cli(ws.root, "init", ok=False)
    assert isinstance(again.exception, BadInput)
    ws.settings_file.write_text("idle_timeout = 1\n")
    cli(ws.root, "init", "--force")
    assert tomllib.loads(ws.settings_file.read_text())["idle_timeout"] == 60


def test_create_and_json(ws: Workspace) -> None:
    out = cli(ws.root, "create", "t", "--description", "d", "--json")
    doc = as_json(out)
    assert doc["name"] == "t" and doc["state"] == "active" and doc["description"] == "d"
    assert ws.store.team_exists("t")
    dup = cli(ws.root, "create", "t", ok=False)
    assert isinstance(dup.exception, BadInput)


def test_root_defaults_to_teamd_root_env(ws: Workspace) -> None:
    # the autouse fixture points $TEAMD_ROOT at ws.root; no --root given
    result = runner.invoke(app, ["create", "envteam"])
    assert result.exit_code == 0, result.output
    assert ws.store.team_exists("envteam")


def test_spawn_notes_that_no_supervisor_runs(root: Path) -> None:
    out = cli(root, "spawn", "t", "carol", "--prompt", "p", "--plan-mode", "--model", "m")
    assert "spawned carol@t (status pending)" in out.stdout
    assert "no supervisor is running" in out.stderr
    m = roster.get(roster.load(Workspace.at(root), "t"), "carol")
    assert m["plan_mode_required"] is True and m["model"] == "m"
    doc = as_json(cli(root, "spawn", "t", "dave", "--prompt", "p", "--json"))
    assert doc["agent_id"] == "dave@t" and doc["desired"] == "running"


# -- send, broadcast, inbox --------------------------------------------------------------
def test_send_and_inbox_peek_and_drain(root: Path) -> None:
    ws = Workspace.at(root)
    sent = as_json(cli(root, "send", "t", "lead", "from alice", "--sender", "alice",
                       "--json"))
    assert sent["sender"] == "alice" and sent["recipient"] == "lead"
    out = cli(root, "send", "t", "alice", "do the thing")
    assert out.stdout.startswith("sent message ") and "to alice" in out.stdout
    # peek at the lead's inbox: shown, kept
    peeked = cli(root, "inbox", "t", "--peek", "--json")
    assert [m["id"] for m in as_jsonl(peeked)] == [sent["id"]]
    assert len(inbox.peek(ws, "t", "lead")) == 1
    # a teammate's inbox is only peeked at, and says so
    alice = cli(root, "inbox", "t", "alice")
    assert "do the thing" in alice.stdout and "only peeking" in alice.stderr
    assert len(inbox.peek(ws, "t", "alice")) == 1
    # the lead's inbox drains: printed, then cleared; the history stays in events.jsonl
    drained = cli(root, "inbox", "t")
    assert "alice → lead: from alice" in drained.stdout
    assert inbox.peek(ws, "t", "lead") == []
    assert ws.store.paths.inbox("t", "lead").read_bytes() == b""
    assert any(r["event"] == "message" and r["message"]["id"] == sent["id"]
               for r in events.read(ws, "t"))
    empty = cli(root, "inbox", "t")
    assert empty.stdout == "" and "inbox is empty" in empty.stderr
    assert cli(root, "inbox", "t", "--json").stdout == ""


def test_send_reads_standard_input(root: Path) -> None:
    text = "line one\nline two — ünïcode\n"
    msg = as_json(cli(root, "send", "t", "alice", "-", "--json", input=text.encode()))
    assert msg["content"] == text
    big = "x" * (256 * 1024)  # exactly the limit is fine
    msg = as_json(cli(root, "send", "t", "alice", "-", "--json", input=big))
    assert len(msg["content"]) == 256 * 1024
    too_big = cli(root, "send", "t", "alice", "-", input=big + "x", ok=False)
    assert isinstance(too_big.exception, BadInput)


def test_broadcast(root: Path) -> None:
    ws = Workspace.at(root)
    out = cli(root, "broadcast", "t", "all hands")
    assert "to alice, bob" in out.stdout
    copies = as_json(cli(root, "broadcast", "t", "from bob", "--sender", "bob", "--json"))
    assert sorted(c["recipient"] for c in copies) == ["alice", "lead"]
    assert len({c["id"] for c in copies}) == 1
    assert [m["content"] for m in inbox.peek(ws, "t", "alice")] == ["all hands", "from bob"]
    if JQ:
        assert jq(json.dumps(copies), ".[].recipient").split() == ["alice", "lead"]


def test_protocol_messages_through_send(root: Path) -> None:
    ws = Workspace.at(root)
    req = as_json(cli(root, "send", "t", "lead", "my plan", "--type", "plan_approval_request",
                      "--sender", "alice", "--json"))
    assert requests.get(ws, "t", req["request_id"])["plan"] == "my plan"
    answer = as_json(cli(root, "send", "t", "alice", "no", "--type", "plan_approval_response",
                         "--request-id", req["request_id"], "--reject", "--feedback", "why",
                         "--json"))
    assert answer["approve"] is False and answer["feedback"] == "why"
    assert requests.get(ws, "t", req["request_id"])["status"] == "rejected"


# -- tasks -------------------------------------------------------------------------------
def test_task_add_list_show_update(root: Path) -> None:
    assert cli(root, "task", "list", "t").stdout.strip() == "no tasks"
    assert "created task #1: Design schema" in cli(root, "task", "add", "t",
                                                   "Design schema").stdout
    t2 = as_json(cli(root, "task", "add", "t", "Build API", "--description", "REST → GQL",
                     "--blocked-by", "1", "--json"))
    assert t2["id"] == 2 and t2["blocked_by"] == [1] and t2["description"] == "REST → GQL"
    cli(root, "task", "add", "t", "Frontend", "--blocked-by", "1, 2")
    listing = as_json(cli(root, "task", "list", "t", "--json"))
    assert [t["id"] for t in listing] == [1, 2, 3]
    assert listing[0]["blocks"] == [2, 3] and listing[2]["blocked_by"] == [1, 2]
    table = cli(root, "task", "list", "t").stdout.splitlines()
    assert table[0].split() == ["ID", "STATUS", "OWNER", "BLOCKED", "BY", "SUBJECT"]
    assert table[3].split()[:4] == ["#3", "pending", "-", "1,2"]
    shown = cli(root, "task", "show", "t", "2").stdout
    assert "subject:     Build API" in shown and "REST → GQL" in shown
    assert as_json(cli(root, "task", "show", "t", "2", "--json")) == listing[1]
    out = cli(root, "task", "update", "t", "1", "--owner", "alice", "--status", "in_progress")
    assert "task #1: in_progress, owner alice" in out.stdout
    done = as_json(cli(root, "task", "update", "t", "1", "--status", "completed", "--json"))
    assert done["status"] == "completed" and isinstance(done["completed_at"], float)
    cleared = as_json(cli(root, "task", "update", "t", "3", "--owner", "bob", "--json"))
    assert cleared["owner"] == "bob"
    cleared = as_json(cli(root, "task", "update", "t", "3", "--owner", "", "--json"))
    assert cleared["owner"] is None
    linked = as_json(cli(root, "task", "update", "t", "3", "--blocked-by", "2", "--json"))
    assert linked["blocked_by"] == [1, 2]
    cli(root, "task", "add", "t", "Docs")
    linked = as_json(cli(root, "task", "update", "t", "4", "--blocked-by", "3", "--json"))
    assert linked["blocked_by"] == [3]
    assert board.get(Workspace.at(root), "t", 3)["blocks"] == [4]


@pytest.mark.skipif(JQ is None, reason="jq is not installed")
def test_json_listings_work_in_a_jq_pipeline(root: Path) -> None:
    for subject in ("one", "two", "three"):
        cli(root, "task", "add", "t", subject)
    shell = (f"'{TEAMCTL}' --root '{root}' task list t --json | jq '.[].id'")
    done = subprocess.run(shell, shell=True, capture_output=True, timeout=30, check=True)
    assert done.stdout.decode().split() == ["1", "2", "3"]
    status = cli(root, "status", "t", "--json").stdout
    assert jq(status, '.teams[0].members[] | "\\(.name) \\(.status)"').splitlines() == [
        "alice pending", "bob pending"]
    cli(root, "send", "t", "lead", "x", "--sender", "alice")
    lines = cli(root, "logs", "t", "--json").stdout
    assert "message" in jq(lines, ".event").split()
    peek = cli(root, "inbox", "t", "--peek", "--json").stdout
    assert jq(peek, ".sender").split() == ["alice"]
    assert jq(cli(root, "requests", "t", "--json").stdout, "length").strip() == "0"


# -- requests, approve, reject, shutdown -------------------------------------------------
def test_requests_approve_reject(root: Path) -> None:
    ws = Workspace.at(root)
    assert cli(root, "requests", "t").stdout.strip() == "no requests"
    p1 = actions.send(ws, "t", "lead", "plan A", type_="plan_approval_request",
                      sender="alice")["request_id"]
    p2 = actions.send(ws, "t", "lead", "plan B", type_="plan_approval_request",
                      sender="bob")["request_id"]
    listed = as_json(cli(root, "requests", "t", "--json"))
    assert [r["request_id"] for r in listed] == [p1, p2]
    assert all(r["status"] == "pending" for r in listed)
    table = cli(root, "requests", "t").stdout
    assert table.splitlines()[0].split()[:5] == ["REQUEST", "KIND", "FROM", "TO", "STATUS"]
    assert "plan A" in table
    assert f"approved {p1}" in cli(root, "approve", "t", p1, "--feedback", "go").stdout
    assert f"rejected {p2}" in cli(root, "reject", "t", p2, "--feedback", "smaller").stdout
    assert requests.get(ws, "t", p1)["status"] == "approved"
    assert requests.get(ws, "t", p2)["feedback"] == "smaller"
    assert [m["type"] for m in inbox.peek(ws, "t", "alice")] == ["plan_approval_response"]
    assert inbox.peek(ws, "t", "bob")[0]["approve"] is False
    assert as_json(cli(root, "requests", "t", "--pending", "--json")) == []
    # the same answer again (a re-run after a crash): exit 0, the message not sent twice
    assert cli(root, "approve", "t", p1).exit_code == 0
    assert len(inbox.peek(ws, "t", "alice")) == 1
    otherwise = cli(root, "reject", "t", p1, "--feedback", "no", ok=False)
    assert isinstance(otherwise.exception, BadInput)
    no_feedback = cli(root, "reject", "t", p1, ok=False)
    assert isinstance(no_feedback.exception, BadInput)


def test_shutdown_of_a_member_with_no_process(root: Path) -> None:
    ws = Workspace.at(root)
    out = cli(root, "shutdown", "t", "alice", "--reason", "done", "--wait", "--timeout", "5")
    assert "alice was not running: shut down" in out.stdout
    m = roster.get(roster.load(ws, "t"), "alice")
    assert (m["desired"], m["status"]) == ("stopped", "shutdown")
    [record] = requests.list_requests(ws, "t")
    assert (record["status"], record["answer_reason"]) == ("approved", "not running")
    assert inbox.peek(ws, "t", "alice") == []
    again = cli(root, "shutdown", "t", "alice", ok=False)
    assert isinstance(again.exception, BadInput)


def test_stop_force_and_restart_of_a_member_with_no_process(root: Path) -> None:
    ws = Workspace.at(root)
    refused = cli(root, "stop", "t", "bob", ok=False)
    assert isinstance(refused.exception, BadInput)  # --force is required
    assert "bob stopped" in cli(root, "stop", "t", "bob", "--force").stdout
    assert roster.get(roster.load(ws, "t"), "bob")["status"] == "shutdown"
    out = cli(root, "restart", "t", "bob")
    assert "restart of bob requested" in out.stdout and "no supervisor" in out.stderr
    assert roster.get(roster.load(ws, "t"), "bob")["status"] == "pending"


# -- status, logs ------------------------------------------------------------------------
def test_status_says_no_supervisor_is_running(root: Path) -> None:
    board.create(Workspace.at(root), "t", "x")
    out = cli(root, "status").stdout
    assert out.startswith("supervisor: none running for ")
    assert "team t (active) tasks: 1 pending, 0 in progress, 0 completed" in out
    header = next(line for line in out.splitlines() if line.startswith("NAME"))
    assert header.split()[:6] == ["NAME", "STATUS", "TASK", "UPTIME", "PID", "CPU%"]
    doc = as_json(cli(root, "status", "--json"))
    assert doc["supervisor"] is None and doc["root"] == str(root)
    [team] = doc["teams"]
    assert team["name"] == "t" and team["tasks"] == {"pending": 1, "in_progress": 0,
                                                     "completed": 0}
    assert [(m["name"], m["live"], m["status"]) for m in team["members"]] == [
        ("alice", False, "pending"), ("bob", False, "pending")]
    one = as_json(cli(root, "status", "t", "--json"))
    assert [t["name"] for t in one["teams"]] == ["t"]
    unknown = cli(root, "status", "nope", ok=False)
    assert isinstance(unknown.exception, BadInput)


def test_status_with_no_teams(ws: Workspace) -> None:
    out = cli(ws.root, "status").stdout
    assert "none running" in out and "no teams" in out
    assert as_json(cli(ws.root, "status", "--json"))["teams"] == []


def test_logs(root: Path) -> None:
    cli(root, "send", "t", "alice", "hello alice")
    cli(root, "send", "t", "bob", "hello bob")
    text = cli(root, "logs", "t").stdout
    assert "team_created" in text and "lead → alice: hello alice" in text
    records = as_jsonl(cli(root, "logs", "t", "--json"))
    assert records[0]["event"] == "team_created"
    assert all({"ts", "event"} <= set(r) for r in records)
    alice_only = as_jsonl(cli(root, "logs", "t", "alice", "--json"))
    assert [r["event"] for r in alice_only] == ["member_added", "message"]
    assert alice_only[1]["message"]["content"] == "hello alice"


# -- follow modes (a real process, read with a deadline) ---------------------------------
def read_lines(proc: subprocess.Popen[bytes], count: int, timeout: float = 15) -> list[str]:
    """Read `count` lines from the process's stdout, failing after `timeout` seconds."""
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    buf, lines = b"", list[str]()
    deadline = time.monotonic() + timeout
    fd = proc.stdout.fileno()
    while len(lines) < count:
        left = deadline - time.monotonic()
        assert left > 0, f"got only {lines!r} (partial {buf!r})"
        if not sel.select(left):
            continue
        chunk = os.read(fd, 65536)
        assert chunk, f"process ended early: {lines!r}"
        buf += chunk
        while b"\n" in buf and len(lines) < count:
            line, buf = buf.split(b"\n", 1)
            lines.append(line.decode())
    return lines


def follow(root: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([str(TEAMCTL), "--root", str(root), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    proc.communicate(timeout=10)


@pytest.mark.timeout(60)
def test_inbox_follow_drains_new_messages_as_they_land(root: Path) -> None:
    ws = Workspace.at(root)
    early = actions.send(ws, "t", "lead", "before", sender="alice")
    proc = follow(root, "inbox", "t", "--follow", "--json")
    try:
        assert json.loads(read_lines(proc, 1)[0])["id"] == early["id"]
        sent = [actions.send(ws, "t", "lead", f"m{i}", sender="bob")["id"] for i in range(5)]
        got = [json.loads(line)["id"] for line in read_lines(proc, 5)]
        assert got == sent
        # drained: the follower takes them out of the inbox once it has printed them
        wait_until(lambda: ws.store.paths.inbox("t", "lead").read_bytes() == b"", 15, "the drain")
    finally:
        stop(proc)


@pytest.mark.timeout(60)
def test_inbox_follow_of_a_teammate_peeks(root: Path) -> None:
    ws = Workspace.at(root)
    proc = follow(root, "inbox", "t", "alice", "--follow", "--json")
    try:
        sent = [actions.send(ws, "t", "alice", f"m{i}")["id"] for i in range(3)]
        assert [json.loads(x)["id"] for x in read_lines(proc, 3)] == sent
        more = actions.send(ws, "t", "alice", "later")["id"]
        assert json.loads(read_lines(proc, 1)[0])["id"] == more  # each shown once
        assert [m["id"] for m in inbox.peek(ws, "t", "alice")] == [*sent, more]
    finally:
        stop(proc)


@pytest.mark.timeout(60)
def test_logs_follow_prints_history_then_new_events(root: Path) -> None:
    # --follow alone starts at the end (CONTRACT §9); -n N brings the last N along
    ws = Workspace.at(root)
    history = len(events.read(ws, "t"))
    proc = follow(root, "logs", "t", "--follow", "--json", "-n", str(history))
    try:
        old = [json.loads(x) for x in read_lines(proc, history)]
        assert old[0]["event"] == "team_created"
        msg = actions.send(ws, "t", "alice", "live one")
        new = json.loads(read_lines(proc, 1)[0])
        assert new["event"] == "message" and new["message"]["id"] == msg["id"]
    finally:
        stop(proc)


# -- delete ------------------------------------------------------------------------------
def test_delete_of_a_team_with_no_live_process(root: Path) -> None:
    ws = Workspace.at(root)
    cli(root, "create", "keep")
    cli(root, "task", "add", "keep", "survives")
    cli(root, "task", "add", "t", "goes")
    out = cli(root, "delete", "t", "--timeout", "5")
    assert out.stdout.strip().startswith("deleted team t; its journal and transcripts are in")
    assert not ws.store.paths.team_dir("t").exists() and not ws.store.paths.tasks_dir("t").exists()
    assert ws.store.team_names() == ["keep"]
    assert board.get(ws, "keep", 1)["subject"] == "survives"
    gone = cli(root, "task", "list", "t", ok=False)
    assert isinstance(gone.exception, BadInput)
    # and the name can be used again
    cli(root, "create", "t")
    assert as_json(cli(root, "task", "list", "t", "--json")) == []


@pytest.mark.timeout(60)
def test_delete_waits_for_a_live_member_and_gives_up_with_exit_1(root: Path) -> None:
    ws = Workspace.at(root)
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        import psutil

        proc = psutil.Process(sleeper.pid)

        def change(config: dict[str, Any]) -> None:
            roster.get(config, "alice").update(pid=proc.pid, status="idle",
                                               pid_create_time=proc.create_time())

        roster.update(ws, "t", change)
        result = cli(root, "delete", "t", "--timeout", "0.3", ok=False)
        assert isinstance(result.exception, TeamdError)
        assert not isinstance(result.exception, BadInput)
        assert "timed out" in str(result.exception)
        assert "still up: alice" in str(result.exception)  # who is still up
        config = roster.load(ws, "t")
        assert config["state"] == "deleting"
        # the live member was asked to shut down; the one with no process was not woken
        [msg] = inbox.peek(ws, "t", "alice")
        assert msg["type"] == "shutdown_request"
        assert inbox.peek(ws, "t", "bob") == []
        refused = cli(root, "send", "t", "bob", "hi", ok=False)
        assert "is being deleted" in str(refused.exception)
    finally:
        sleeper.kill()
        sleeper.wait(10)


def test_read_only_commands_change_nothing(root: Path) -> None:
    ws = Workspace.at(root)
    cli(root, "task", "add", "t", "x")
    actions.send(ws, "t", "alice", "hi")
    cli(root, "inbox", "t")  # creates the lead inbox's lock file once
    before = snapshot(root)
    for args in (("task", "list", "t"), ("task", "show", "t", "1"), ("status",),
                 ("status", "t", "--json"), ("logs", "t"), ("requests", "t"),
                 ("inbox", "t", "alice"), ("inbox", "t", "--peek")):
        cli(root, *args)
    assert snapshot(root) == before


def test_inbox_only_peeks_at_an_llm_leads_inbox_and_drains_the_persons(root: Path) -> None:
    """Beside an LLM lead the person is `user`: `inbox TEAM` drains user_inbox.jsonl, and
    the LLM lead's inbox is only peeked at, whether the lead runs, sleeps or was stopped."""
    ws = Workspace.at(root)
    cli(root, "spawn", "t", "lead", "--lead", "--prompt", "lead the team")
    msg = actions.send(ws, "t", "lead", "for the llm lead", sender="alice")
    mine = actions.send(ws, "t", "user", "for the person", sender="alice")
    for stopped in (False, True):
        if stopped:
            actions.stop(ws, "t", "lead")
        out = cli(root, "inbox", "t", "lead", "--json")
        assert [m["id"] for m in as_jsonl(out)] == [msg["id"]]
        assert "only peeking: an LLM lead reads it" in out.stderr
        assert [m["id"] for m in inbox.peek(ws, "t", "lead")] == [msg["id"]]  # not taken
    out = cli(root, "inbox", "t", "--json")
    assert [m["id"] for m in as_jsonl(out)] == [mine["id"]]
    assert "peeking" not in out.stderr
    assert (
        inbox.peek(ws, "t", "user") == [] and ws.store.paths.inbox("t", "user").read_bytes() == b""
    )
    assert inbox.peek(ws, "t", "lead") != []
