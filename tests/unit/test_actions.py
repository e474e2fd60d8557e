"""teamd.actions: what teamctl and a lead do to a team, through the files only."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import psutil
import pytest

from teamd import actions, board, events, files, inbox, requests, roster
from teamd.errors import BadInput, TeamdError
from teamd.layout import Workspace
from tests.harness import make_live
from tests.helpers_proc import snapshot

TEAM = "t"


@pytest.fixture
def team(ws: Workspace) -> str:
    actions.create_team(ws, TEAM, "a test team")
    for name in ("alice", "bob"):
        actions.spawn(ws, TEAM, name, "work", role=f"{name} role")
    return TEAM


def member(ws: Workspace, name: str) -> files.Json:
    return roster.get(roster.load(ws, TEAM), name)


def journal(ws: Workspace, event: str) -> list[files.Json]:
    return [r for r in events.read(ws, TEAM) if r["event"] == event]


# -- teams and members -------------------------------------------------------------------
def test_create_team_lays_out_the_folders(ws: Workspace) -> None:
    config = actions.create_team(ws, "new", "desc")
    assert config["schema"] == 2 and config["name"] == "new" and config["state"] == "active"
    assert config["members"] == [] and config["description"] == "desc"
    assert files.read_json(ws.store.paths.config("new")) == config
    for folder in (
        ws.store.paths.members_dir("new"),
        ws.store.paths.requests_dir("new"),
        ws.store.paths.sessions_dir("new"),
        ws.store.paths.transcripts_dir("new"),
        ws.store.paths.logs_dir("new"),
        ws.store.paths.tasks_dir("new"),
    ):
        assert folder.is_dir()
    assert [r["event"] for r in events.read(ws, "new")] == ["team_created"]
    before = snapshot(ws.root)
    with pytest.raises(BadInput, match="already exists"):
        actions.create_team(ws, "new")
    assert snapshot(ws.root) == before


def test_spawn_adds_a_pending_member_with_desired_running(ws: Workspace, team: str) -> None:
    m = member(ws, "alice")
    assert m["agent_id"] == "alice@t" and m["kind"] == "teammate" and m["role"] == "alice role"
    assert m["desired"] == "running" and m["status"] == "pending" and m["pid"] is None
    assert m["cwd"] == str(ws.root.resolve()) and m["restarts"] == 0
    assert m["usage"] == {"input_tokens": 0, "output_tokens": 0,
                          "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0,
                          "cost_usd": 0.0}
    assert m["budget_usd"] is None
    added = journal(ws, "member_added")
    assert [(r["member"], r["kind"], r["role"]) for r in added] == [
        ("alice", "teammate", "alice role"), ("bob", "teammate", "bob role")]


def test_colors_follow_join_order(ws: Workspace) -> None:
    actions.create_team(ws, TEAM)
    for i in range(7):
        actions.spawn(ws, TEAM, f"m{i}", "p")
    colors = [m["color"] for m in roster.load(ws, TEAM)["members"]]
    assert colors == ["cyan", "yellow", "magenta", "green", "blue", "cyan", "yellow"]


@pytest.mark.parametrize("name, kw, match", [
    ("alice", {}, "already in team"),
    ("teamd", {}, "reserved"),
    ("lead", {}, "--lead"),
    ("boss", {"lead": True}, "--lead requires"),
    ("carol", {"prompt": "  "}, "prompt"),
    ("carol", {"cwd": "/no/such/dir"}, "not a directory"),
    ("Carol", {}, "invalid"),
])
def test_spawn_refusals_change_nothing(ws: Workspace, team: str, name: str,
                                      kw: dict[str, object], match: str) -> None:
    before = snapshot(ws.root)
    args: dict[str, object] = {"prompt": "work", **kw}
    prompt = args.pop("prompt")
    with pytest.raises(BadInput, match=match):
        actions.spawn(ws, team, name, prompt, **args)  # type: ignore[arg-type]
    assert snapshot(ws.root) == before


def test_an_llm_lead_is_a_member_of_kind_lead(ws: Workspace, team: str,
                                              tmp_path: Path) -> None:
    m = actions.spawn(ws, team, "lead", "lead the team", lead=True, cwd=str(tmp_path))
    assert m["kind"] == "lead" and m["cwd"] == str(tmp_path.resolve())


# -- messages ----------------------------------------------------------------------------
def test_send_delivers_and_journals(ws: Workspace, team: str) -> None:
    msg = actions.send(ws, team, "alice", "hello", summary="greeting")
    assert msg["sender"] == "lead" and msg["recipient"] == "alice" and msg["summary"] == "greeting"
    assert inbox.peek(ws, team, "alice") == [msg]
    reply = actions.send(ws, team, "lead", "hi back", sender="alice")
    assert inbox.peek(ws, team, "lead") == [reply]
    assert [r["message"]["id"] for r in journal(ws, "message")] == [msg["id"], reply["id"]]


@pytest.mark.parametrize("recipient, kw, match", [
    ("ghost", {}, "unknown recipient"),
    ("alice", {"sender": "ghost"}, "unknown sender"),
    ("alice", {"sender": "alice"}, "oneself"),
    ("lead", {}, "oneself"),
    # the lead is told why, by teamctl and the lead's SendMessage alike (one dispatcher)
    ("lead", {"type_": "shutdown_request", "reason": "r"}, "not shut down with a request"),
    ("alice", {"type_": "gossip"}, "unknown message type"),
    ("alice", {"request_id": "x-1"}, "do not apply"),
    ("lead", {"type_": "member_failed", "sender": "alice"}, "teamd only"),
    ("lead", {"type_": "shutdown_response", "sender": "alice"}, "--request-id"),
    ("alice", {"content": "x" * (256 * 1024 + 1)}, "limit"),
    ("alice", {"content": "nul\x00"}, "NUL"),
    ("../x", {}, "invalid"),
])
def test_send_refusals_change_nothing(ws: Workspace, team: str, recipient: str,
                                     kw: dict[str, object], match: str) -> None:
    before = snapshot(ws.root)
    args: dict[str, object] = {"content": "hi", **kw}
    content = args.pop("content")
    with pytest.raises(BadInput, match=match):
        actions.send(ws, team, recipient, content, **args)  # type: ignore[arg-type]
    assert snapshot(ws.root) == before


def test_broadcast_reaches_running_members_and_the_lead_except_the_sender(
        ws: Workspace, team: str) -> None:
    actions.spawn(ws, team, "carol", "work")
    actions.stop(ws, team, "bob")  # desired=stopped: left out
    copies = actions.broadcast(ws, team, "standup", sender="alice")
    assert sorted(c["recipient"] for c in copies) == ["carol", "lead"]
    assert len({c["id"] for c in copies}) == 1
    assert all(c["type"] == "broadcast" and c["sender"] == "alice" for c in copies)
    assert inbox.peek(ws, team, "carol")[0]["id"] == copies[0]["id"]
    assert inbox.peek(ws, team, "lead")[0]["id"] == copies[0]["id"]
    assert inbox.peek(ws, team, "alice") == [] and inbox.peek(ws, team, "bob") == []
    [event] = journal(ws, "message")
    assert event["message"]["id"] == copies[0]["id"]
    assert sorted(event["message"]["recipients"]) == ["carol", "lead"]
    from_lead = actions.broadcast(ws, team, "from the lead")
    assert sorted(c["recipient"] for c in from_lead) == ["alice", "carol"]
    # send --type broadcast is the same thing
    via_send = actions.send(ws, team, "alice", "again", type_="broadcast")
    assert via_send["type"] == "broadcast"


def test_broadcast_with_nobody_to_reach_is_refused(ws: Workspace) -> None:
    actions.create_team(ws, "empty")
    with pytest.raises(BadInput, match="nobody"):
        actions.broadcast(ws, "empty", "hello?")


# -- shutdown ----------------------------------------------------------------------------
def test_shutdown_of_a_member_not_live_is_answered_on_its_behalf(ws: Workspace,
                                                                 team: str) -> None:
    board.create(ws, team, "alice's work")
    board.claim(ws, team, "alice", 1)
    result = actions.shutdown(ws, team, "alice", reason="done for today")
    assert result["answered"] is True
    record = requests.get(ws, team, result["request"]["request_id"])
    assert record["kind"] == "shutdown" and record["status"] == "approved"
    assert (record["reason"], record["answer_reason"]) == ("done for today", "not running")
    assert record["recipient"] == "alice"
    assert isinstance(record["resolved_at"], float)
    m = member(ws, "alice")
    assert m["desired"] == "stopped" and m["status"] == "shutdown"
    assert inbox.peek(ws, team, "alice") == []  # not woken: nothing in its inbox
    assert inbox.peek(ws, team, "lead") == []
    msgs = [r["message"] for r in journal(ws, "message")]
    assert [(m["type"], m["sender"], m["recipient"]) for m in msgs] == [
        ("shutdown_request", "lead", "alice"), ("shutdown_response", "alice", "lead")]
    assert msgs[0]["request_id"] == msgs[1]["request_id"] == record["request_id"]
    assert msgs[1]["approve"] is True and msgs[1]["reason"] == "not running"
    assert [(r["from"], r["to"]) for r in journal(ws, "status")] == [("pending", "shutdown")]
    # it left for good: its unfinished task is back in the pool
    task = board.get(ws, team, 1)
    assert task["status"] == "pending" and task["owner"] is None
    # a second shutdown is refused
    before = snapshot(ws.root)
    with pytest.raises(BadInput, match="already shut down"):
        actions.shutdown(ws, team, "alice")
    assert snapshot(ws.root) == before


def test_shutdown_of_a_live_member_writes_the_request_to_its_inbox(
        ws: Workspace, team: str, live_process: psutil.Process) -> None:
    make_live(ws, TEAM, "alice", live_process)
    result = actions.shutdown(ws, team, "alice", reason="wrap up")
    assert result["answered"] is False
    [msg] = inbox.peek(ws, team, "alice")
    assert msg["type"] == "shutdown_request" and msg["reason"] == "wrap up"
    assert msg["request_id"] == result["request"]["request_id"]
    assert requests.get(ws, team, msg["request_id"])["status"] == "pending"
    m = member(ws, "alice")
    assert m["desired"] == "running" and m["status"] == "idle"  # the member decides
    # the member answers with send --type shutdown_response
    actions.send(ws, team, "lead", "ok", type_="shutdown_response", sender="alice",
                 request_id=msg["request_id"], approve=True)
    assert requests.get(ws, team, msg["request_id"])["status"] == "approved"
    with pytest.raises(BadInput, match="already approved"):
        actions.send(ws, team, "lead", "ok", type_="shutdown_response", sender="alice",
                     request_id=msg["request_id"], approve=False)


def test_a_reused_pid_is_not_live(ws: Workspace, team: str,
                                  live_process: psutil.Process) -> None:
    def change(config: files.Json) -> None:
        roster.get(config, "alice").update(pid=live_process.pid,
                                           pid_create_time=live_process.create_time() - 100,
                                           status="idle")

    roster.update(ws, TEAM, change)
    assert not roster.is_live(member(ws, "alice"))
    assert actions.shutdown(ws, team, "alice")["answered"] is True


def test_stop_and_restart_of_a_member_not_live(ws: Workspace, team: str) -> None:
    board.create(ws, team, "bob's")
    board.claim(ws, team, "bob", 1)
    m = actions.stop(ws, team, "bob")
    assert m["desired"] == "stopped" and m["status"] == "shutdown"
    assert board.get(ws, team, 1)["owner"] is None
    m = actions.restart(ws, team, "bob")
    assert m["desired"] == "running" and m["status"] == "pending"
    assert isinstance(m["restart_requested_at"], float)
    assert member(ws, "bob") == m


# -- plans -------------------------------------------------------------------------------
def test_plan_approval_round_trip(ws: Workspace, team: str) -> None:
    req = actions.send(ws, team, "lead", "1. read 2. write", type_="plan_approval_request",
                       sender="alice")
    rid = req["request_id"]
    record = requests.get(ws, team, rid)
    assert record["kind"] == "plan_approval" and record["plan"] == "1. read 2. write"
    with pytest.raises(BadInput, match="feedback"):
        actions.answer_request(ws, team, rid, False, only="plan_approval")
    answer = actions.answer_request(ws, team, rid, False, "add tests", only="plan_approval")
    assert answer["type"] == "plan_approval_response" and answer["approve"] is False
    assert answer["recipient"] == "alice" and answer["feedback"] == "add tests"
    assert inbox.peek(ws, team, "alice") == [answer]
    assert not requests.plan_approved(ws, team, "alice")
    before = snapshot(ws.root)
    with pytest.raises(BadInput, match="already rejected"):
        actions.answer_request(ws, team, rid, True, only="plan_approval")
    assert snapshot(ws.root) == before
    rid2 = actions.send(ws, team, "lead", "v2", type_="plan_approval_request",
                        sender="alice")["request_id"]
    actions.answer_request(ws, team, rid2, True, only="plan_approval")
    assert requests.plan_approved(ws, team, "alice")
    shut = actions.shutdown(ws, team, "bob")["request"]["request_id"]
    with pytest.raises(BadInput, match="shutdown request"):
        actions.answer_request(ws, team, shut, True, only="plan_approval")


# -- deletion ----------------------------------------------------------------------------
@pytest.mark.parametrize("attempt", [
    lambda ws: actions.send(ws, TEAM, "alice", "hi"),
    lambda ws: actions.broadcast(ws, TEAM, "hi all"),
    lambda ws: actions.spawn(ws, TEAM, "carol", "work"),
    lambda ws: actions.require_team(ws, TEAM, accepting=True),
])
def test_a_team_being_deleted_takes_no_new_work(ws: Workspace, team: str, attempt: object
                                                ) -> None:
    actions.begin_delete(ws, team)
    assert roster.load(ws, team)["state"] == "deleting"
    assert journal(ws, "team_deleting")
    before = snapshot(ws.root)
    with pytest.raises(BadInput, match=f"team '{TEAM}' is being deleted"):
        attempt(ws)  # type: ignore[operator]
    assert snapshot(ws.root) == before


def test_winding_down_still_lands_while_deleting(ws: Workspace, team: str,
                                                 live_process: psutil.Process) -> None:
    make_live(ws, TEAM, "alice", live_process)
    rid = actions.shutdown(ws, team, "alice")["request"]["request_id"]
    actions.begin_delete(ws, team)
    actions.send(ws, team, "lead", "bye", type_="shutdown_response", sender="alice",
                 request_id=rid, approve=True)
    actions.send(ws, team, "lead", "idle", type_="idle_notification", sender="bob")
    assert [m["type"] for m in inbox.peek(ws, team, "lead")] == ["shutdown_response",
                                                                "idle_notification"]


def test_remove_team_removes_only_that_team(ws: Workspace, team: str) -> None:
    actions.create_team(ws, "other")
    board.create(ws, "other", "keep me")
    board.create(ws, team, "drop me")
    actions.remove_team(ws, team)
    assert (
        not ws.store.paths.team_dir(team).exists() and not ws.store.paths.tasks_dir(team).exists()
    )
    assert ws.store.team_names() == ["other"]
    assert board.get(ws, "other", 1)["subject"] == "keep me"
    leftovers = [
        p.name for p in (*ws.store.paths.teams_dir.iterdir(), *ws.store.paths.tasks_root.iterdir())
    ]
    # no .deleted-* folder left behind; the post-mortem is in the archive
    assert sorted(leftovers) == [".archive", "other", "other"]


def test_remove_team_archives_journal_sessions_and_transcripts(ws: Workspace, team: str,
                                                                monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    monkeypatch.setenv("TEAMD_EVENTS_MAX_BYTES", "300")
    for i in range(10):
        events.emit(ws, team, "tick", n=i)
    files.append_jsonl(ws.store.paths.session(team, "alice"), [{"type": "user", "content": []}])
    files.ensure_dir(ws.store.paths.transcripts_dir(team))
    (ws.store.paths.transcripts_dir(team) / "alice-1.jsonl").write_text("{}\n")
    actions.send(ws, team, "alice", "a message")
    board.create(ws, team, "a task")
    archive = actions.remove_team(ws, team)
    assert archive is not None and ws.store.paths.archives(team) == [archive]
    assert re.fullmatch(rf"{team}-\d{{8}}T\d{{6}}\.\d{{6}}", archive.name)
    names = {p.name for p in archive.iterdir()}
    assert {"events.jsonl", "events.1.jsonl", "sessions", "transcripts", "config.json",
            "tasks"} <= names
    assert not any(n.endswith("_inbox.jsonl") or n.endswith(".lock") for n in names)
    last = files.read_jsonl(archive / "events.jsonl").records[-1]
    assert last["event"] == "team_deleted"
    assert (archive / "sessions" / "alice.jsonl").is_file()
    assert (archive / "transcripts" / "alice-1.jsonl").is_file()
    assert stat.S_IMODE(archive.stat().st_mode) == 0o700
    assert (
        not ws.store.paths.team_dir(team).exists() and not ws.store.paths.tasks_dir(team).exists()
    )


def test_remove_team_with_purge_keeps_nothing(ws: Workspace, team: str) -> None:
    actions.begin_delete(ws, team, purge=True)
    assert actions.finish_delete(ws, team)
    assert ws.store.paths.archives(team) == [] and not ws.store.paths.team_dir(team).exists()
    assert sorted(p.name for p in ws.store.paths.teams_dir.iterdir()) == []
    assert actions.remove_team(ws, team) is None  # already gone: nothing to do, no error


def test_remove_team_refuses_while_a_member_is_live(ws: Workspace, team: str,
                                                    live_process: psutil.Process) -> None:
    make_live(ws, TEAM, "bob", live_process)
    with pytest.raises(TeamdError, match="live members"):
        actions.remove_team(ws, team)
    assert ws.store.team_exists(team)


def test_shutdown_with_a_reason_too_large_changes_nothing(ws: Workspace) -> None:
    actions.create_team(ws, "t")
    actions.spawn(ws, "t", "bob", "p")
    before = sorted(p.name for p in ws.store.paths.team_dir("t").rglob("*"))
    with pytest.raises(BadInput):
        actions.shutdown(ws, "t", "bob", reason="x" * (300 * 1024))
    assert sorted(p.name for p in ws.store.paths.team_dir("t").rglob("*")) == before
    assert requests.list_requests(ws, "t") == []


# -- one home for the rules teamctl and a lead's tools share (issue 9) -------------------
def test_task_owner_is_normalised_in_one_place(ws: Workspace, team: str) -> None:
    config = roster.load(ws, TEAM)
    assert actions.task_owner(config, board.UNSET) is board.UNSET
    assert actions.task_owner(config, "") is None and actions.task_owner(config, None) is None
    assert actions.task_owner(config, "alice") == "alice"
    with pytest.raises(BadInput, match="unknown member 'carol'"):
        actions.task_owner(config, "carol")
    board.create(ws, TEAM, "x")
    assert actions.update_task(ws, TEAM, 1, owner="bob")["owner"] == "bob"
    assert actions.update_task(ws, TEAM, 1, status="in_progress")["owner"] == "bob"
    assert actions.update_task(ws, TEAM, 1, owner="")["owner"] is None
    assert actions.update_task(ws, TEAM, 1, owner="alice", holder="bob")["owner"] == "alice"
    before = snapshot(ws.root)
    with pytest.raises(BadInput, match="unknown member"):
        actions.update_task(ws, TEAM, 1, owner="carol")
    with pytest.raises(board.NotHolder):  # a teammate changes only its own or unowned
        actions.update_task(ws, TEAM, 1, status="completed", holder="bob")
    assert snapshot(ws.root) == before


def test_a_task_hook_sees_the_task_before_it_is_written(ws: Workspace, team: str) -> None:
    seen: list[files.Json] = []

    def refuse(task: files.Json) -> None:
        seen.append(task)
        raise BadInput("no thanks")

    before = snapshot(ws.root)
    with pytest.raises(BadInput, match="no thanks"):
        actions.add_task(ws, TEAM, "s", "d", [], created_by="alice", before_write=refuse)
    assert seen == [{"subject": "s", "description": "d", "blocked_by": [],
                     "created_by": "alice"}]
    assert snapshot(ws.root) == before and board.list_tasks(ws, TEAM) == []


@pytest.mark.parametrize("words, fields", [
    (actions.FLAGS, ("--request-id", "--approve or --reject", "--approve/--reject")),
    (actions.TOOL_INPUTS, ("request_id", "approve (true or false)", "approve")),
])
def test_response_fields_are_one_rule_spelled_per_caller(
        words: actions.Spelling, fields: tuple[str, str, str]) -> None:
    rid, approve, pair = fields
    for t in actions.ANSWERS:
        with pytest.raises(BadInput) as no_both:
            actions.check_answer_fields(t, None, None, words=words)
        assert str(no_both.value) == f"{t} needs {rid} and {approve}"
        with pytest.raises(BadInput) as no_approve:
            actions.check_answer_fields(t, "r-1", None, words=words)
        assert str(no_approve.value) == f"{t} needs {approve}"
        actions.check_answer_fields(t, "r-1", False, words=words)
    with pytest.raises(BadInput) as extra:
        actions.check_answer_fields("message", "r-1", None, words=words)
    assert str(extra.value) == (f"{rid} and {pair} do not apply to message; they only apply "
                                "to shutdown_response, plan_approval_response, "
                                "permission_response")
    actions.check_answer_fields("message", None, None, words=words)


def test_teamctl_and_the_lead_tool_refuse_a_wrong_answer_alike(ws: Workspace, team: str,
                                                               tmp_path: Path) -> None:
    from teamd.agent.tools import Toolbox

    rid = actions.send(ws, TEAM, "lead", "my plan", type_="plan_approval_request",
                       sender="alice")["request_id"]
    lead = Toolbox(ws, TEAM, "lead", kind="lead", cwd=tmp_path, bash_timeout=5,
                   plan_mode_required=False)
    before = snapshot(ws.root)
    for recipient, approve in (("bob", True), ("alice", False)):
        with pytest.raises(BadInput) as by_cli:
            actions.send(ws, TEAM, recipient, "", type_="plan_approval_response",
                         request_id=rid, approve=approve)
        by_tool = lead.run("SendMessage", {"recipient": recipient, "content": "",
                                           "type": "plan_approval_response",
                                           "request_id": rid, "approve": approve})
        assert by_tool.is_error
        # the same sentence, the field spelled as the caller knows it
        assert by_tool.content == str(by_cli.value).replace("--feedback", "feedback")
    assert "only lead answers it, to alice" in lead.run("SendMessage", {
        "recipient": "bob", "content": "", "type": "plan_approval_response",
        "request_id": rid, "approve": True}).content
    # nothing answered, nothing sent (the tool's refusals are journalled as tool calls)
    assert {k: v for k, v in snapshot(ws.root).items() if not k.endswith("events.jsonl")} \
        == {k: v for k, v in before.items() if not k.endswith("events.jsonl")}
    assert requests.get(ws, TEAM, rid)["status"] == "pending"


def test_who_drains_which_inbox(ws: Workspace, team: str) -> None:
    config = roster.load(ws, TEAM)
    assert actions.inbox_owner(config, None) == ("lead", True)  # the person's own
    assert actions.inbox_owner(config, "alice") == ("alice", False)  # its process drains it
    with pytest.raises(BadInput, match="'user' is the person beside an LLM lead"):
        actions.inbox_owner(config, "user")
    with pytest.raises(BadInput, match="unknown member"):
        actions.inbox_owner(config, "carol")
    actions.spawn(ws, TEAM, "lead", "lead", lead=True)
    config = roster.load(ws, TEAM)
    assert actions.inbox_owner(config, None) == ("user", True)
    assert actions.inbox_owner(config, "lead") == ("lead", False)  # the LLM lead drains it


def test_delete_team_removes_at_once_when_nobody_is_live(ws: Workspace, team: str,
                                                        live_process: psutil.Process) -> None:
    make_live(ws, TEAM, "alice", live_process)
    started = actions.delete_team(ws, TEAM)
    assert [r["recipient"] for r in started["requests"]] == ["alice"]
    assert started["deleted"] is False and not actions.team_gone(ws, TEAM)
    assert actions.asked_to_shut_down(started["requests"]) == "asked alice to shut down"
    actions.create_team(ws, "quiet")
    assert actions.delete_team(ws, "quiet") == {"requests": [], "deleted": True}
    assert actions.team_gone(ws, "quiet")
    assert actions.asked_to_shut_down([]) is None
