"""The model's tools (CONTRACT.md §8) on a real workspace, real files and real processes."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from teamd import actions, board, events, files, requests, roster
from teamd.agent.tools import TOOL_SPECS, Toolbox, ToolResult, specs_for, tool_names
from teamd.layout import Workspace
from tests.harness import wait_until

TEAM = "proj"

CONTRACT_INPUTS = {
    "bash": ({"command"}, {"timeout"}),
    "read_file": ({"path"}, {"limit"}),
    "write_file": ({"path", "content"}, set()),
    "edit_file": ({"path", "old_text", "new_text"}, set()),
    "TaskCreate": ({"subject"}, {"description", "blocked_by"}),
    "TaskGet": ({"task_id"}, set()),
    "TaskUpdate": ({"task_id"}, {"status", "owner", "add_blocked_by", "add_blocks"}),
    "TaskList": (set(), set()),
    "SendMessage": ({"recipient", "content"},
                    {"type", "request_id", "approve", "reason", "feedback", "summary"}),
    "SubmitPlan": ({"plan"}, set()),
    "TeamCreate": ({"name"}, {"description"}),
    "TeamDelete": ({"name"}, set()),
    "Task": ({"name", "prompt", "team_name"}, {"role", "plan_mode_required", "worktree",
                                                "effort", "runtime", "host"}),
}
LEAD_ONLY = {"TeamCreate", "TeamDelete", "Task"}
# CONTRACT.md §8's table, row by row: (tool, given to the lead, given to a teammate)
CONTRACT_TABLE = [
    ("bash", True, True), ("read_file", True, True), ("write_file", True, True),
    ("edit_file", True, True), ("TaskCreate", True, True), ("TaskGet", True, True),
    ("TaskUpdate", True, True), ("TaskList", True, True), ("SendMessage", True, True),
    ("SubmitPlan", False, True), ("TeamCreate", True, False), ("TeamDelete", True, False),
    ("Task", True, False),
]


@pytest.fixture
def team(ws: Workspace, workdir: Path) -> str:
    actions.create_team(ws, TEAM)
    for name in ("alice", "bob"):
        actions.spawn(ws, TEAM, name, f"you are {name}", cwd=str(workdir))
    return TEAM


def box(ws: Workspace, workdir: Path, member: str = "alice", *, kind: str = "teammate",
        plan: bool = False, bash_timeout: float = 10) -> Toolbox:
    return Toolbox(ws, TEAM, member, kind=kind, cwd=workdir, bash_timeout=bash_timeout,
                   plan_mode_required=plan)


def ok(result: ToolResult) -> str:
    assert not result.is_error, result.content
    return result.content


def err(result: ToolResult, *needles: str, one_line: bool = True) -> str:
    assert result.is_error, result.content
    assert "\n" not in result.content or not one_line
    for needle in needles:
        assert needle in result.content, result.content
    return result.content


# -- specs -------------------------------------------------------------------------------
def test_specs_match_the_contract() -> None:
    assert set(TOOL_SPECS) == set(CONTRACT_INPUTS)
    for name, (required, optional) in CONTRACT_INPUTS.items():
        spec = TOOL_SPECS[name]
        assert spec["name"] == name
        assert len(spec["description"]) > 40
        schema = spec["input_schema"]
        assert schema["type"] == "object"
        assert set(schema["properties"]) == required | optional, name
        assert set(schema["required"]) == required, name
    types = TOOL_SPECS["SendMessage"]["input_schema"]["properties"]["type"]["description"]
    for t in ("message", "broadcast", "shutdown_response", "shutdown_request",
              "plan_approval_response"):
        assert t in types
    assert "shutdown_response" in TOOL_SPECS["SendMessage"]["description"]


def test_tool_sets_per_kind() -> None:
    teammate, lead = tool_names("teammate"), tool_names("lead")
    assert set(teammate) == set(CONTRACT_INPUTS) - LEAD_ONLY
    assert set(lead) == (set(teammate) - {"SubmitPlan"}) | LEAD_ONLY
    assert [s["name"] for s in specs_for("lead")] == lead
    # exactly the contract's tools per kind, in one fixed order (the cached prompt prefix)
    assert teammate == [name for name, _, mate in CONTRACT_TABLE if mate]
    assert lead == [name for name, is_lead, _ in CONTRACT_TABLE if is_lead]
    assert [s["name"] for s in specs_for("teammate")] == teammate
    with pytest.raises(ValueError):
        tool_names("boss")


def test_unknown_tool_and_bad_input_are_error_results(ws: Workspace, team: str,
                                                      workdir: Path) -> None:
    tb = box(ws, workdir)
    err(tb.run("rm_everything", {}), "unknown tool")
    err(tb.run("Task", {"name": "x", "prompt": "p", "team_name": TEAM}), "not available")
    err(tb.run("read_file", {}), "needs 'path'")
    err(tb.run("read_file", {"path": 3}), "must be string")
    err(tb.run("read_file", {"path": "a", "limt": 3}), "no input 'limt'")
    err(tb.run("TaskGet", {"task_id": "1"}), "must be integer")
    err(tb.run("TaskGet", {"task_id": True}), "must be integer")
    err(tb.run("TaskGet", {"task_id": 99}), "unknown task #99")
    err(tb.run("TaskUpdate", {"task_id": 1, "status": "done"}), "must be one of")
    err(tb.run("bash", {"command": "true", "timeout": -1}), "more than 0")
    err(tb.run("bash", "echo hi"), "JSON object")  # type: ignore[arg-type]
    err(tb.run("write_file", {"path": "a\x00b", "content": ""}), "NUL")


def test_unexpected_exceptions_become_error_results(ws: Workspace, team: str, workdir: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_: Any, **__: Any) -> Any:
        raise RuntimeError("disk on fire\nsecond line")

    monkeypatch.setattr(board, "list_tasks", boom)
    err(box(ws, workdir).run("TaskList", {}), "TaskList failed: RuntimeError: disk on fire")


def test_tool_calls_are_journalled(ws: Workspace, team: str, workdir: Path) -> None:
    tb = box(ws, workdir)
    ok(tb.run("write_file", {"path": "big.txt", "content": "x" * 5000}))
    err(tb.run("read_file", {"path": "missing.txt"}), "does not exist")
    calls = [e for e in events.read(ws, TEAM) if e["event"] == "tool_call"]
    assert [(c["tool"], c["ok"], c["member"]) for c in calls] == [
        ("write_file", True, "alice"), ("read_file", False, "alice")]
    assert len(calls[0]["input"]["content"]) < 300
    assert all(isinstance(c["ms"], int) for c in calls)
    # a failed call says why (CONTRACT §7); a good one carries no error
    assert "error" not in calls[0]
    assert "does not exist" in calls[1]["error"] and "\n" not in calls[1]["error"]


# -- file tools --------------------------------------------------------------------------
def test_read_write_edit(ws: Workspace, team: str, workdir: Path) -> None:
    tb = box(ws, workdir)
    assert "wrote 12 bytes to src/a.txt (created)" in ok(
        tb.run("write_file", {"path": "src/a.txt", "content": "one\ntwo\nthr\n"}))
    assert (workdir / "src/a.txt").read_text() == "one\ntwo\nthr\n"
    assert ok(tb.run("read_file", {"path": "src/a.txt"})) == "one\ntwo\nthr\n"
    assert ok(tb.run("read_file", {"path": str(workdir / "src/a.txt"), "limit": 2})) \
        .startswith("one\ntwo\n[stopped at the limit of 2 lines")
    ok(tb.run("edit_file", {"path": "src/a.txt", "old_text": "two", "new_text": "2"}))
    assert (workdir / "src/a.txt").read_text() == "one\n2\nthr\n"
    (workdir / "run.sh").write_text("echo a\necho a\n")
    os.chmod(workdir / "run.sh", 0o755)
    err(tb.run("edit_file", {"path": "run.sh", "old_text": "zzz", "new_text": "y"}),
        "not found")
    err(tb.run("edit_file", {"path": "run.sh", "old_text": "echo a", "new_text": "y"}),
        "appears 2 times", "more context")
    ok(tb.run("edit_file", {"path": "run.sh", "old_text": "echo a\necho a",
                            "new_text": "echo b"}))
    assert (workdir / "run.sh").stat().st_mode & 0o777 == 0o755  # mode kept on replace
    assert "wrote 0 bytes" in ok(tb.run("write_file", {"path": "e", "content": ""}))
    assert "is empty" in ok(tb.run("read_file", {"path": "e"}))
    err(tb.run("read_file", {"path": "src"}), "is a directory")
    assert sorted(p.name for p in workdir.iterdir()) == ["e", "run.sh", "src"]  # no temps


def test_read_file_is_capped(ws: Workspace, team: str, workdir: Path) -> None:
    (workdir / "huge.txt").write_text("0123456789\n" * 20_000)
    out = ok(box(ws, workdir).run("read_file", {"path": "huge.txt"}))
    assert len(out) < 50_500 and "[truncated at 50000 characters" in out


def test_escapes_are_refused(ws: Workspace, team: str, workdir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (workdir / "link.txt").symlink_to(outside / "secret.txt")
    (workdir / "linkdir").symlink_to(outside)
    (workdir / "inner").mkdir()
    (workdir / "inner" / "ok.txt").write_text("fine")
    (workdir / "goodlink").symlink_to(workdir / "inner")
    tb = box(ws, workdir)
    for path in ("../outside/secret.txt", str(outside / "secret.txt"), "link.txt",
                 "linkdir/secret.txt", "inner/../../outside/secret.txt", "/etc/passwd"):
        err(tb.run("read_file", {"path": path}), "outside the working directory")
    for path in ("../outside/new.txt", str(outside / "new.txt"), "linkdir/new.txt",
                 "linkdir/sub/new.txt", "link.txt"):
        err(tb.run("write_file", {"path": path, "content": "pwned"}), "outside")
        err(tb.run("edit_file", {"path": path, "old_text": "secret", "new_text": "x"}),
            "outside")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "secret"
    # symlinks that stay inside are fine
    assert ok(tb.run("read_file", {"path": "goodlink/ok.txt"})) == "fine"
    ok(tb.run("write_file", {"path": "goodlink/new.txt", "content": "x"}))
    assert (workdir / "inner" / "new.txt").read_text() == "x"


# -- bash --------------------------------------------------------------------------------
def test_bash_output_exit_code_and_cwd(ws: Workspace, team: str, workdir: Path) -> None:
    tb = box(ws, workdir)
    out = ok(tb.run("bash", {"command": "pwd; echo err >&2; exit 3"}))
    assert out == f"{os.path.realpath(workdir)}\nerr\n[exit code 3]"
    assert ok(tb.run("bash", {"command": "true"})) == "(no output)\n[exit code 0]"
    assert ok(tb.run("bash", {"command": "read x; echo got=$x"})).startswith("got=\n")


def test_bash_truncates_keeping_head_and_tail(ws: Workspace, team: str,
                                              workdir: Path) -> None:
    out = ok(box(ws, workdir).run("bash", {"command": "echo START; seq 1 100000; echo END"}))
    assert len(out) < 31_000
    assert out.startswith("START\n") and out.endswith("END\n[exit code 0]")
    assert "characters omitted" in out


def test_bash_timeout_kills_the_whole_group(ws: Workspace, team: str, workdir: Path) -> None:
    tb = box(ws, workdir, bash_timeout=0.5)
    started = time.monotonic()
    out = err(tb.run("bash", {"command": "sleep 100 & echo $! > bg.pid; echo started; "
                                         "sleep 100", "timeout": 30}),
              "timed out after 0.5 s", "started", one_line=False)
    assert time.monotonic() - started < 5, out
    pid = int((workdir / "bg.pid").read_text())

    def gone() -> bool:
        try:
            return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    wait_until(gone, 5.0, f"grandchild {pid} to be gone after the timeout")


def test_bash_background_jobs_do_not_outlive_the_call(ws: Workspace, team: str,
                                                      workdir: Path) -> None:
    started = time.monotonic()
    ok(box(ws, workdir).run("bash", {"command": "sleep 100 & echo $! > bg.pid; echo done"}))
    assert time.monotonic() - started < 3  # the open pipe did not keep us waiting
    pid = int((workdir / "bg.pid").read_text())
    wait_until(lambda: not psutil.pid_exists(pid)
               or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, 5.0,
               f"background job {pid} to be gone")


def test_running_groups_are_exposed_for_the_sigterm_handler(ws: Workspace, team: str,
                                                             workdir: Path) -> None:
    results: list[ToolResult] = []
    tb, other = box(ws, workdir), box(ws, workdir, "bob")
    worker = threading.Thread(target=lambda: results.append(
        tb.run("bash", {"command": "echo go; touch started; sleep 30"})))
    worker.start()
    wait_until(lambda: (workdir / "started").exists(), 5.0, "the command to start")
    assert len(tb.groups) == 1
    assert not other.groups  # each toolbox owns its own: no state shared between them
    tb.kill_running()
    worker.join(timeout=5)
    assert not worker.is_alive()
    assert results[0].content == "go\n[killed by signal 9]"
    assert not tb.groups


@pytest.mark.parametrize("command", [
    "rm -rf /", "rm -fr /", "rm  -r  -f   /", "sudo rm -rf /*", "rm -rf ~", "rm -rf ~/",
    "cd x && rm -rf $HOME", "rm -rf --no-preserve-root /", "mkfs.ext4 /dev/sda1",
    "dd if=/dev/zero of=/dev/sda bs=1M", ":(){ :|:& };:", "shutdown -h now",
    "sudo reboot", "echo bye; halt", "systemctl poweroff", "rm -rf build /",
])
def test_bash_refuses_the_destructive(ws: Workspace, team: str, workdir: Path,
                                      command: str) -> None:
    err(box(ws, workdir).run("bash", {"command": command}), "refused")


@pytest.mark.parametrize("command", [
    "rm -rf ./build", "rm -rf /tmp/nothing-here-xyz", "echo shutdown", "grep -r reboot . || true",
    "rm -rf ~/nothing-here-xyz-teamd", "dd if=/dev/zero of=out.bin bs=1 count=1",
])
def test_bash_allows_the_harmless(ws: Workspace, team: str, workdir: Path,
                                  command: str) -> None:
    ok(box(ws, workdir).run("bash", {"command": command}))


def test_bash_never_sees_the_api_key(ws: Workspace, team: str, workdir: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "fake-test-secret-123456")
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "tok-secret-654321")
    monkeypatch.setenv("NOTIFY_SOCKET", "/run/x")
    monkeypatch.setenv("WATCHDOG_USEC", "1000")
    # nor the store's connection, its password, teamd's crash points, the key's descriptor
    dropped = {"PGPASSWORD": "pg-secret-1", "PGHOST": "db", "TEAMD_STORE": "postgresql://s",
               "TEAMD_CRASH_AFTER_CLAIM": "1", "TEAMD_KEY_FD": "5"}
    for key, value in dropped.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("TEAMD_KEPT", "kept")
    tb = box(ws, workdir)
    out = ok(tb.run("bash", {"command": "echo k=$ANTHROPIC_API_KEY t=$ANTHROPIC_AUTH_TOKEN "
                                        "n=$NOTIFY_SOCKET w=$WATCHDOG_USEC; env"}))
    assert out.startswith("k= t= n= w=\n")
    assert "secret" not in out and "TEAMD_KEPT=kept" in out
    for key in dropped:
        assert f"{key}=" not in out
    # even if the key reaches a file, a tool result never shows it
    (workdir / ".env").write_text("KEY=fake-test-secret-123456\n")
    out = ok(tb.run("read_file", {"path": ".env"}))
    assert "fake-test-secret-123456" not in out and "redacted" in out
    assert "fake-test-secret" not in ws.store.paths.events(TEAM).read_text()


def test_no_rule_opens_teamds_own_files_or_another_members_worktree(
        ws: Workspace, team: str) -> None:
    """CONTRACT §11 "What no rule can open": a member working at the root (an LLM lead in the
    repository that holds it) may read teamd's files, never write them."""
    ws.settings_file.write_text('[permissions]\nask = ["write_file", "edit_file"]\n')
    before = {p: p.read_bytes() for p in ws.root.rglob("*") if p.is_file()}
    (ws.root / "link").symlink_to(ws.store.paths.teams_dir)
    tb = box(ws, ws.root)
    own = [("write_file", {"path": "teamd.toml", "content": "x"}),
           ("edit_file", {"path": "teamd.toml", "old_text": "ask", "new_text": "allow"}),
           ("write_file", {"path": f".teams/{TEAM}/config.json", "content": "{}"}),
           ("write_file", {"path": f".teams/{TEAM}/permissions.json", "content": "{}"}),
           ("write_file", {"path": f".tasks/{TEAM}/1.json", "content": "{}"}),
           ("write_file", {"path": "link/teamd.json", "content": "{}"}),
           ("write_file", {"path": str(ws.root / ".teams" / "new.txt"), "content": "x"})]
    for tool, args in own:  # refused before the rules: no ask is opened
        result = tb.run(tool, args)
        assert result.is_error and result.content.startswith("refused: teamd's own files"), \
            (tool, args, result.content)
    for path in (f".worktrees/{TEAM}/bob/a.txt", ".worktrees/other/alice/a.txt",
                 ".worktrees/stray.txt"):
        result = tb.run("write_file", {"path": path, "content": "x"})
        assert result.is_error, path
        assert result.content.startswith("refused: another member's worktree"), path
    assert {p: p.read_bytes() for p in ws.root.rglob("*")
            if p.is_file() and "/events" not in str(p)} == \
        {p: b for p, b in before.items() if "/events" not in str(p)}
    assert not ws.store.paths.requests_dir(TEAM).exists() or not any(
        ws.store.paths.requests_dir(TEAM).iterdir()
    )
    assert "alice" in ok(tb.run("read_file", {"path": f".teams/{TEAM}/config.json"}))
    # one's own worktree is one's own (the rules still apply to it)
    ws.settings_file.write_text("")
    ok(tb.run("write_file", {"path": f".worktrees/{TEAM}/alice/a.txt", "content": "mine"}))
    assert (ws.root / ".worktrees" / TEAM / "alice" / "a.txt").read_text() == "mine"


def test_no_file_tool_reads_the_api_key_file(ws: Workspace, team: str, workdir: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The key file (`api_key_file`) is out of reach of every file tool, reading included,
    by any path to it; a systemd credential's whole folder too."""
    secrets = workdir / "secrets"
    secrets.mkdir()
    (secrets / "key").write_text("sk-never-shown\n")
    (workdir / "alias").symlink_to(secrets)
    ws.settings_file.write_text(f'api_key_file = "{secrets / "key"}"\n')
    tb = box(ws, workdir)
    for tool, args in (("read_file", {"path": "secrets/key"}),
                       ("read_file", {"path": "alias/key"}),
                       ("read_file", {"path": str(secrets / "key")}),
                       ("write_file", {"path": "secrets/key", "content": "x"})):
        err(tb.run(tool, args), "refused: the API key file")
    assert (secrets / "key").read_text() == "sk-never-shown\n"
    (workdir / "notes.txt").write_text("fine")
    assert ok(tb.run("read_file", {"path": "notes.txt"})).endswith("fine")
    # a systemd credential: its folder is what no tool reads
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(secrets))
    ws.settings_file.write_text('api_key_file = "anthropic"\n')
    (secrets / "other").write_text("x")
    err(tb.run("read_file", {"path": "secrets/other"}), "refused: the API key file")


# -- plan mode ---------------------------------------------------------------------------
def test_plan_gate_closed_until_approved(ws: Workspace, team: str, workdir: Path) -> None:
    tb = box(ws, workdir, plan=True)
    err(tb.run("write_file", {"path": "a", "content": "x"}), "plan mode", "SubmitPlan")
    err(tb.run("bash", {"command": "touch b"}), "plan mode")
    (workdir / "c").write_text("c")
    err(tb.run("edit_file", {"path": "c", "old_text": "c", "new_text": "d"}), "plan mode")
    assert ok(tb.run("read_file", {"path": "c"})) == "c"
    assert sorted(p.name for p in workdir.iterdir()) == ["c"]

    out = ok(tb.run("SubmitPlan", {"plan": "1. write a"}))
    rid = next(r["request_id"] for r in requests.list_requests(ws, TEAM))
    assert rid in out and "wait" in out.lower()
    lead_inbox = files.read_jsonl(ws.store.paths.inbox(TEAM, "lead")).records
    assert [(m["type"], m["sender"], m["request_id"], m["plan"]) for m in lead_inbox] == [
        ("plan_approval_request", "alice", rid, "1. write a")]
    err(tb.run("write_file", {"path": "a", "content": "x"}), "plan mode")  # still pending

    actions.answer_request(ws, TEAM, rid, approve=True, only="plan_approval")
    ok(tb.run("write_file", {"path": "a", "content": "x"}))
    # a fresh toolbox (a restarted process) finds the gate open too: it lives in requests/
    ok(box(ws, workdir, plan=True).run("bash", {"command": "touch b"}))


def test_lead_answers_a_plan_through_sendmessage(ws: Workspace, team: str,
                                                 workdir: Path) -> None:
    alice = box(ws, workdir, plan=True)
    lead = box(ws, workdir, "lead", kind="lead")
    ok(alice.run("SubmitPlan", {"plan": "do it"}))
    rid = requests.list_requests(ws, TEAM)[0]["request_id"]
    err(lead.run("SendMessage", {"recipient": "alice", "content": "", "request_id": rid,
                                 "type": "plan_approval_response", "approve": False}),
        "feedback")
    ok(lead.run("SendMessage", {"recipient": "alice", "content": "", "request_id": rid,
                                "type": "plan_approval_response", "approve": False,
                                "feedback": "add tests"}))
    msgs = files.read_jsonl(ws.store.paths.inbox(TEAM, "alice")).records
    assert [(m["type"], m["approve"], m["feedback"]) for m in msgs] == [
        ("plan_approval_response", False, "add tests")]
    err(alice.run("write_file", {"path": "a", "content": "x"}), "plan mode")
    err(lead.run("SendMessage", {"recipient": "alice", "content": "ok", "request_id": rid,
                                 "type": "plan_approval_response", "approve": True}),
        "already rejected")
    ok(alice.run("SubmitPlan", {"plan": "do it, with tests"}))
    rid2 = requests.list_requests(ws, TEAM, pending_only=True)[0]["request_id"]
    ok(lead.run("SendMessage", {"recipient": "alice", "content": "go", "request_id": rid2,
                                "type": "plan_approval_response", "approve": True}))
    ok(alice.run("write_file", {"path": "a", "content": "x"}))


# -- messages ----------------------------------------------------------------------------
def test_sendmessage_types_per_kind(ws: Workspace, team: str, workdir: Path) -> None:
    alice = box(ws, workdir)
    out = ok(alice.run("SendMessage", {"recipient": "bob", "content": "hi", "summary": "s"}))
    assert "sent to bob" in out
    [msg] = files.read_jsonl(ws.store.paths.inbox(TEAM, "bob")).records
    assert (msg["type"], msg["sender"], msg["content"], msg["summary"]) == (
        "message", "alice", "hi", "s")
    ok(alice.run("SendMessage", {"recipient": "lead", "content": "done"}))
    assert "2 inbox" in ok(alice.run("SendMessage", {"recipient": "*", "content": "all",
                                                     "type": "broadcast"}))
    assert [m["type"] for m in files.read_jsonl(ws.store.paths.inbox(TEAM, "lead")).records] == [
        "message", "broadcast"]
    for t in ("shutdown_request", "plan_approval_response", "plan_approval_request",
              "idle_notification"):
        err(alice.run("SendMessage", {"recipient": "bob", "content": "x", "type": t}),
            "cannot send")
    err(alice.run("SendMessage", {"recipient": "alice", "content": "me"}), "oneself")
    err(alice.run("SendMessage", {"recipient": "carol", "content": "x"}), "unknown")
    err(alice.run("SendMessage", {"recipient": "bob", "content": "x", "approve": True}),
        "only apply")
    err(alice.run("SendMessage", {"recipient": "lead", "content": "x",
                                  "type": "shutdown_response"}), "request_id")
    lead = box(ws, workdir, "lead", kind="lead")
    out = ok(lead.run("SendMessage", {"recipient": "bob", "content": "stop",
                                      "type": "shutdown_request"}))
    assert "on its behalf" in out  # bob has no live process: answered for him
    member = roster.get(roster.load(ws, TEAM), "bob")
    assert (member["desired"], member["status"]) == ("stopped", "shutdown")


def test_shutdown_response_sets_the_hook(ws: Workspace, team: str, workdir: Path) -> None:
    record = requests.open_request(ws, TEAM, "shutdown", "lead", "alice", reason="done")
    rid = record["request_id"]
    alice = box(ws, workdir)
    err(alice.run("SendMessage", {"recipient": "lead", "content": "", "approve": False,
                                  "type": "shutdown_response", "request_id": rid}), "reason")
    assert requests.get(ws, TEAM, rid)["status"] == "pending"
    approved = alice.run("SendMessage", {"recipient": "lead", "content": "bye",
                                         "type": "shutdown_response", "request_id": rid,
                                         "approve": True})
    assert "approved" in ok(approved)
    assert approved.ends_process  # the loop leaves after this turn
    assert requests.get(ws, TEAM, rid)["status"] == "approved"
    [msg] = files.read_jsonl(ws.store.paths.inbox(TEAM, "lead")).records
    assert (msg["type"], msg["request_id"], msg["approve"]) == ("shutdown_response", rid, True)
    err(alice.run("SendMessage", {"recipient": "lead", "content": "bye",
                                  "type": "shutdown_response", "request_id": rid,
                                  "approve": True}), "already approved")
    # the roster write and the exit are the loop's, not the tool's
    assert roster.get(roster.load(ws, TEAM), "alice")["desired"] == "running"


def test_rejected_shutdown_does_not_set_the_hook(ws: Workspace, team: str,
                                                 workdir: Path) -> None:
    rid = requests.open_request(ws, TEAM, "shutdown", "lead", "alice")["request_id"]
    alice = box(ws, workdir)
    refused = alice.run("SendMessage", {"recipient": "lead", "content": "mid-migration",
                                        "type": "shutdown_response", "request_id": rid,
                                        "approve": False})
    ok(refused)
    assert not refused.ends_process
    assert requests.get(ws, TEAM, rid)["answer_reason"] == "mid-migration"


# -- task board --------------------------------------------------------------------------
def test_task_tools(ws: Workspace, team: str, workdir: Path) -> None:
    alice, bob = box(ws, workdir), box(ws, workdir, "bob")
    assert "#1 [pending]" in ok(alice.run("TaskCreate", {"subject": "schema"}))
    ok(alice.run("TaskCreate", {"subject": "resolvers", "description": "d",
                                "blocked_by": [1]}))
    err(alice.run("TaskCreate", {"subject": "x", "blocked_by": [9]}), "unknown task #9")
    task = board.get(ws, TEAM, 2)
    assert (task["created_by"], task["blocked_by"]) == ("alice", [1])
    got = ok(alice.run("TaskGet", {"task_id": 2}))
    assert '"subject": "resolvers"' in got and '"blocked_by": [1]' in got

    err(bob.run("TaskUpdate", {"task_id": 2, "status": "in_progress"}), "blocked by #1")
    assert "started #1 [in_progress] owner=bob" in ok(
        bob.run("TaskUpdate", {"task_id": 1, "status": "in_progress"}))
    err(alice.run("TaskUpdate", {"task_id": 1, "status": "in_progress", "owner": "alice"}),
        "belongs to bob")
    # a teammate touches only its own tasks or unowned ones (CONTRACT §8)
    err(alice.run("TaskUpdate", {"task_id": 1, "status": "completed"}), "belongs to bob")
    err(alice.run("TaskUpdate", {"task_id": 1, "owner": None}), "belongs to bob")
    assert (board.get(ws, TEAM, 1)["status"], board.get(ws, TEAM, 1)["owner"]) == \
        ("in_progress", "bob")
    err(alice.run("TaskUpdate", {"task_id": 2, "owner": "carol"}), "unknown member")
    ok(alice.run("TaskUpdate", {"task_id": 2, "owner": "alice"}))
    ok(alice.run("TaskUpdate", {"task_id": 2, "owner": None}))
    assert board.get(ws, TEAM, 2)["owner"] is None
    ok(bob.run("TaskUpdate", {"task_id": 1, "status": "completed"}))
    assert board.get(ws, TEAM, 1)["completed_at"] is not None
    ok(alice.run("TaskCreate", {"subject": "docs"}))
    ok(alice.run("TaskUpdate", {"task_id": 3, "add_blocked_by": [2]}))
    err(alice.run("TaskUpdate", {"task_id": 2, "add_blocked_by": [3]}), "cycle")
    assert board.get(ws, TEAM, 2)["blocks"] == [3]
    assert ok(alice.run("TaskList", {})).splitlines() == [
        "#1 [completed] owner=bob blocked_by=-: schema",
        "#2 [pending] owner=- blocked_by=#1: resolvers",
        "#3 [pending] owner=- blocked_by=#2: docs"]


def test_a_teammate_cannot_update_a_task_another_member_owns(ws: Workspace,
                                                              tmp_path: Path) -> None:
    """CONTRACT §8: bob completing alice's task is an error result, refused before the
    task_completed hook runs and before bob's worktree work is committed under it."""
    from tests.gitrepo import git, head, make_repo

    repo = make_repo(tmp_path / "repo")
    ran = tmp_path / "hook-ran"
    ws.settings_file.write_text(f'[hooks]\ntask_completed = "touch {ran}"\n')
    actions.create_team(ws, TEAM, worktrees_on=True, repo=str(repo))
    for name in ("alice", "bob"):
        actions.spawn(ws, TEAM, name, f"you are {name}")
    bob_cwd = Path(roster.get(roster.load(ws, TEAM), "bob")["cwd"])
    (bob_cwd / "bobs-work.txt").write_text("bob was here\n")
    task = board.create(ws, TEAM, "alice's job")
    assert board.claim(ws, TEAM, "alice", task["id"]) is not None
    before = board.get(ws, TEAM, task["id"])
    bob = Toolbox(ws, TEAM, "bob", kind="teammate", cwd=bob_cwd, bash_timeout=10,
                  plan_mode_required=False)
    tip = head(bob_cwd)
    for change in ({"status": "completed"}, {"status": "pending"}, {"owner": None},
                   {"add_blocks": []}):
        err(bob.run("TaskUpdate", {"task_id": task["id"], **change}),
            f"task #{task['id']} belongs to alice")
    assert board.get(ws, TEAM, task["id"]) == before
    assert not ran.exists()  # no hook ran
    assert head(bob_cwd) == tip == git(repo, "rev-parse", f"teamd/{TEAM}/bob").strip()
    assert "bobs-work.txt" in git(bob_cwd, "status", "--porcelain")
    # its own task and an unowned one stay open to it; the lead may change any
    mine = board.create(ws, TEAM, "bob's job")
    ok(bob.run("TaskUpdate", {"task_id": mine["id"], "status": "in_progress"}))
    lead = box(ws, tmp_path, "lead", kind="lead")
    ok(lead.run("TaskUpdate", {"task_id": task["id"], "owner": "bob"}))
    assert board.get(ws, TEAM, task["id"])["owner"] == "bob"


# -- team tools (lead) -------------------------------------------------------------------
def test_task_spawns_a_member(ws: Workspace, team: str, workdir: Path) -> None:
    lead = box(ws, workdir, "lead", kind="lead")
    out = ok(lead.run("Task", {"name": "carol", "prompt": "write docs", "team_name": TEAM,
                               "role": "writer", "plan_mode_required": True}))
    assert "carol@proj" in out
    carol = roster.get(roster.load(ws, TEAM), "carol")
    assert (carol["role"], carol["plan_mode_required"], carol["desired"], carol["cwd"]) == (
        "writer", True, "running", str(workdir.resolve()))
    err(lead.run("Task", {"name": "carol", "prompt": "again", "team_name": TEAM}),
        "already in team")
    err(lead.run("Task", {"name": "Bad Name", "prompt": "p", "team_name": TEAM}), "invalid")
    err(lead.run("Task", {"name": "dave", "prompt": "p", "team_name": "nope"}), "unknown team")
    err(lead.run("SubmitPlan", {"plan": "x"}), "not available to a lead")


def test_team_create_and_delete(ws: Workspace, team: str, workdir: Path) -> None:
    lead = box(ws, workdir, "lead", kind="lead")
    ok(lead.run("TeamCreate", {"name": "other", "description": "side project"}))
    assert roster.load(ws, "other")["description"] == "side project"
    err(lead.run("TeamCreate", {"name": "other"}), "already exists")
    ok(lead.run("Task", {"name": "eve", "prompt": "p", "team_name": "other"}))
    assert "deleted team other" in ok(lead.run("TeamDelete", {"name": "other"}))
    assert not ws.store.team_exists("other") and not ws.store.paths.tasks_dir("other").exists()
    err(lead.run("TeamDelete", {"name": "other"}), "unknown team")
    assert ws.store.team_exists(TEAM)


def make_live(ws: Workspace, team: str, name: str) -> None:
    """Point `name`'s roster entry at this test process, so it counts as live."""
    me = psutil.Process()

    def change(config: dict[str, Any]) -> None:
        member = roster.get(config, name)
        member.update(pid=me.pid, pid_create_time=me.create_time(), status="idle")

    roster.update(ws, team, change)


def test_shutdown_request_to_a_live_member(ws: Workspace, team: str, workdir: Path) -> None:
    make_live(ws, TEAM, "bob")
    lead = box(ws, workdir, "lead", kind="lead")
    out = ok(lead.run("SendMessage", {"recipient": "bob", "content": "wrap up",
                                      "type": "shutdown_request"}))
    [msg] = files.read_jsonl(ws.store.paths.inbox(TEAM, "bob")).records
    assert (msg["type"], msg["reason"]) == ("shutdown_request", "wrap up")
    assert msg["request_id"] in out
    err(lead.run("SendMessage", {"recipient": "lead", "content": "x",
                                 "type": "shutdown_request"}), "not shut down")


def test_team_delete_asks_live_members(ws: Workspace, team: str, workdir: Path) -> None:
    make_live(ws, TEAM, "bob")
    lead = box(ws, workdir, "lead", kind="lead")
    out = ok(lead.run("TeamDelete", {"name": TEAM}))
    assert "asked bob" in out and ws.store.team_exists(TEAM)
    assert roster.load(ws, TEAM)["state"] == "deleting"
    assert [m["type"] for m in files.read_jsonl(ws.store.paths.inbox(TEAM, "bob")).records] == [
        "shutdown_request"]
    err(lead.run("TaskCreate", {"subject": "more"}), "being deleted")
    # the winding-down still lands: bob answers
    rid = requests.list_requests(ws, TEAM)[0]["request_id"]
    bob = box(ws, workdir, "bob")
    assert bob.run("SendMessage", {"recipient": "lead", "content": "bye", "approve": True,
                                   "type": "shutdown_response",
                                   "request_id": rid}).ends_process


def test_team_delete_of_own_team_leaves_no_ghost_folder(ws: Workspace, team: str,
                                                        workdir: Path) -> None:
    lead = box(ws, workdir, "lead", kind="lead")
    assert "deleted team proj" in ok(lead.run("TeamDelete", {"name": TEAM}))
    assert not ws.store.paths.team_dir(TEAM).exists()
    err(lead.run("TaskList", {}), "unknown team")
    assert not ws.store.paths.team_dir(TEAM).exists()
