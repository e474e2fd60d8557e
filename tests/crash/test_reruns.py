"""What a re-run after a crash finds, set up in the files directly (the sweep reaches the
same states with real kills: test_sweep.py): `send --id` and `broadcast --id` deliver once,
`approve` after its record was written delivers the answer once, a status move saved
without its journal line is journaled by the next look, and so is a team's creation (by
`teamd`'s start or `create` run again) when its journal holds no line at all."""

from __future__ import annotations

from pathlib import Path

from teamd import actions, events, files, inbox, journal_gaps, once, requests, roster
from teamd.errors import BadInput
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import cli, journal, make_team, running_teamd, wait_until


def messages(ws: Workspace, team: str, msg_id: str) -> list[dict[str, object]]:
    return [e for e in journal(ws, team) if e["event"] == "message"
            and e["message"]["id"] == msg_id]


def test_send_with_an_id_twice_delivers_once(ws: Workspace, workdir: Path) -> None:
    team = make_team(ws, workdir, "alice")
    for _ in range(2):
        out = cli(ws, "send", team, "alice", "--id", "login-1", "Finish the login page")
        assert "login-1" in out.output
    assert [m["id"] for m in inbox.peek(ws, team, "alice")] == ["login-1"]
    assert len(messages(ws, team, "login-1")) == 1


def test_a_copy_already_in_its_inbox_is_not_appended_again(ws: Workspace,
                                                            workdir: Path) -> None:
    """The state a crash between the inbox append and its journal line leaves."""
    team = make_team(ws, workdir, "alice")
    msg = inbox.make("message", "lead", "alice", "hello", id="hello-1")
    files.append_jsonl(ws.store.paths.inbox(team, "alice"), [msg], durable=True)
    cli(ws, "send", team, "alice", "--id", "hello-1", "hello")
    assert [m["id"] for m in inbox.peek(ws, team, "alice")] == ["hello-1"]
    assert len(messages(ws, team, "hello-1")) == 1  # the line the crash cost, now there


def test_broadcast_with_an_id_twice_delivers_once(ws: Workspace, workdir: Path) -> None:
    team = make_team(ws, workdir, "alice", "bob")
    for _ in range(2):
        cli(ws, "broadcast", team, "--id", "freeze-1", "Code freeze at 17:00")
    for name in ("alice", "bob"):
        assert [m["id"] for m in inbox.peek(ws, team, name)] == ["freeze-1"]
    [event] = messages(ws, team, "freeze-1")
    assert event["message"]["recipients"] == ["alice", "bob"]  # type: ignore[index]


def test_a_bad_id_is_refused_and_changes_nothing(ws: Workspace, workdir: Path) -> None:
    team = make_team(ws, workdir, "alice")
    for bad in ("../x", "", "a b", "x" * 129):
        result = cli(ws, "send", team, "alice", "--id", bad, "hi", ok=False)
        assert isinstance(result.exception, BadInput)  # exit 2 from `teamctl`
        assert "bad message id" in str(result.exception)
    result = cli(ws, "send", team, "alice", "--id", "x1", "--type", "idle_notification",
                 "hi", ok=False)
    assert isinstance(result.exception, BadInput)
    assert inbox.peek(ws, team, "alice") == []


def test_approve_after_its_record_was_written_delivers_the_answer_once(
        ws: Workspace, workdir: Path) -> None:
    """The state a crash between the record and its message leaves: running approve
    again delivers the message (its id derived from the request's), once; a different
    answer is still refused."""
    team = make_team(ws, workdir, "alice")
    rid = actions.send(ws, team, "lead", "the plan", type_="plan_approval_request",
                       sender="alice")["request_id"]
    requests.answer(ws, team, rid, True)  # the record, and then the kill
    for _ in range(2):
        assert cli(ws, "approve", team, rid).exit_code == 0
    [answer] = inbox.peek(ws, team, "alice")
    assert (answer["id"], answer["type"], answer["approve"]) == (
        once.answer_id(rid), "plan_approval_response", True)
    assert len(messages(ws, team, once.answer_id(rid))) == 1
    refused = cli(ws, "reject", team, rid, "--feedback", "no", ok=False)
    assert isinstance(refused.exception, BadInput)
    assert "already approved" in str(refused.exception)


def test_a_status_saved_without_its_line_is_journaled_once(ws: Workspace,
                                                           workdir: Path) -> None:
    team = make_team(ws, workdir, "alice")
    path = ws.store.paths.member_status(team, "alice")
    record = files.read_json(path)
    assert record is not None
    files.write_json(path, {**record, "status": "idle"})  # saved; its writer killed here
    assert journal_gaps.mend(ws, team, "alice") is True
    assert journal_gaps.mend(ws, team, "alice") is False
    [line] = [e for e in journal(ws, team) if e["event"] == "status"]
    assert (line["from"], line["to"], line["repaired"]) == ("pending", "idle", True)


def test_a_member_spawned_again_is_not_taken_for_its_predecessor(
        ws: Workspace, workdir: Path) -> None:
    """The last status line of a removed member of that name is not the new one's."""
    team = make_team(ws, workdir, "alice")
    events.emit(ws, team, "status", member="alice", **{"from": "idle", "to": "shutdown"})
    actions.remove_member(ws, team, "alice")
    actions.spawn(ws, team, "alice", "again", cwd=str(workdir))
    assert roster.get(roster.load(ws, team), "alice")["status"] == "pending"
    assert journal_gaps.mend(ws, team, "alice") is False


def _created_unjournaled(ws: Workspace, workdir: Path) -> str:
    """The state `create` killed before its `team_created` line leaves: the team's files,
    an empty journal."""
    team = make_team(ws, workdir)
    ws.store.paths.events(team).write_bytes(b"")
    return team


def test_a_team_with_an_empty_journal_has_its_creation_journaled_by_teamd(
        ws: Workspace, workdir: Path, server: ScriptedServer) -> None:
    team = _created_unjournaled(ws, workdir)
    with running_teamd(ws, server.url):
        wait_until(lambda: any(e["event"] == "supervisor_started" for e in journal(ws, team)),
                   30, "teamd started")
    first, second = journal(ws, team)[:2]
    assert (first["event"], first.get("repaired")) == ("team_created", True)
    assert second["event"] == "supervisor_started"  # the line comes before teamd's own


def test_create_again_journals_only_a_creation_never_journaled(ws: Workspace,
                                                              workdir: Path) -> None:
    team = _created_unjournaled(ws, workdir)
    cli(ws, "create", team)  # finishes what the kill cut: exit 0
    assert [e.get("repaired") for e in journal(ws, team)] == [True]
    # a journal with lines but no `team_created` (rotated away): the team just exists
    ws.store.paths.events(team).write_text('{"ts": 1, "event": "supervisor_started"}\n')
    result = cli(ws, "create", team, ok=False)
    assert isinstance(result.exception, BadInput) and "already exists" in str(result.exception)
    assert [e["event"] for e in journal(ws, team)] == ["supervisor_started"]
