"""The tools as a registry (issue 9): one handler per tool name, one result type, and the
agent loop acting on what a result says — a task claimed, a shutdown approved — rather
than on the call's input. The loop tests run a real `teamd run` against the scripted
model server."""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from teamd import actions, board, files, requests
from teamd.agent.tool_handlers import HANDLERS, ToolResult
from teamd.agent.tool_specs import TOOL_SPECS
from teamd.agent.tools import Toolbox
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import journal, live_pid, member, running_teamd, wait_until

TEAM = "reg"
T = 20.0


# -- the registry --------------------------------------------------------------------------
def test_every_tool_has_exactly_one_handler_and_every_handler_a_tool() -> None:
    assert set(HANDLERS) == set(TOOL_SPECS)
    # no handler serves two names: each tool's behaviour has one home
    assert len({id(h) for h in HANDLERS.values()}) == len(HANDLERS)


@pytest.mark.parametrize("name", sorted(TOOL_SPECS))
def test_each_handler_takes_exactly_its_tools_inputs(name: str) -> None:
    schema = TOOL_SPECS[name]["input_schema"]
    params = list(inspect.signature(HANDLERS[name]).parameters.values())
    assert params[0].name == "box"  # the toolbox of the member calling
    named = {p.name: p for p in params[1:] if p.kind is not p.VAR_KEYWORD}
    takes_rest = any(p.kind is p.VAR_KEYWORD for p in params)
    assert set(named) <= set(schema["properties"]), name
    if not takes_rest:
        assert set(named) == set(schema["properties"]), name
    for required in schema["required"]:
        assert required in named, (name, required)
        assert named[required].default is inspect.Parameter.empty, (name, required)
    for optional in set(named) - set(schema["required"]):
        assert named[optional].default is not inspect.Parameter.empty, (name, optional)


def test_a_tool_result_is_one_frozen_type() -> None:
    result = ToolResult("done")
    assert (result.is_error, result.claimed, result.ends_process) == (False, None, False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.content = "changed"  # type: ignore[misc]


@pytest.fixture
def team(ws: Workspace, tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    actions.create_team(ws, TEAM)
    for name in ("alice", "bob"):
        actions.spawn(ws, TEAM, name, f"you are {name}", cwd=str(work))
    return work


def test_results_say_what_was_claimed_and_what_ends_the_process(ws: Workspace,
                                                                team: Path) -> None:
    alice = Toolbox(ws, TEAM, "alice", kind="teammate", cwd=team, bash_timeout=10,
                    plan_mode_required=False)
    board.create(ws, TEAM, "one")
    board.create(ws, TEAM, "two")
    started = alice.run("TaskUpdate", {"task_id": 1, "status": "in_progress"})
    assert (started.is_error, started.claimed, started.ends_process) == (False, 1, False)
    assert board.get(ws, TEAM, 1)["owner"] == "alice"
    # not started (blocked by nothing, but owned by bob): an error claims nothing
    board.claim(ws, TEAM, "bob", 2)
    refused = alice.run("TaskUpdate", {"task_id": 2, "status": "in_progress"})
    assert refused.is_error and refused.claimed is None
    assert alice.run("TaskUpdate", {"task_id": 1, "status": "completed"}).claimed is None
    rid = requests.open_request(ws, TEAM, "shutdown", "lead", "alice")["request_id"]
    bye = alice.run("SendMessage", {"recipient": "lead", "content": "bye",
                                    "type": "shutdown_response", "request_id": rid,
                                    "approve": True})
    assert not bye.is_error and bye.ends_process and bye.claimed is None
    again = alice.run("SendMessage", {"recipient": "lead", "content": "bye",
                                      "type": "shutdown_response", "request_id": rid,
                                      "approve": True})
    assert again.is_error and not again.ends_process  # answered already: nothing ends


def test_each_toolbox_owns_its_running_groups(ws: Workspace, team: Path) -> None:
    a = Toolbox(ws, TEAM, "alice", kind="teammate", cwd=team, bash_timeout=10,
                plan_mode_required=False)
    ws.settings_file.write_text('[hooks]\ntask_created = "echo $$ > hook.pid"\n')
    assert not a.run("TaskCreate", {"subject": "x"}).is_error
    pid = int((team / "hook.pid").read_text())
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert a.groups == set()  # the hook's group was held while it ran, then let go


# -- the loop honours what a result says ---------------------------------------------------
@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer({"rules": []}) as srv:
        yield srv


def tool_use(name: str, **inp: Any) -> dict[str, Any]:
    return {"type": "tool_use", "name": name, "input": inp}


def last_turn(r: dict[str, Any]) -> str:
    return json.dumps(r["body"]["messages"][-1])


def wait_status(ws: Workspace, name: str, want: str) -> None:
    wait_until(lambda: member(ws, TEAM, name)["status"] == want, T, f"{name} to be {want}")


def test_a_task_the_model_started_is_never_handed_to_it_again(
        ws: Workspace, team: Path, server: ScriptedServer) -> None:
    """TaskUpdate in_progress → `claimed` → recorded in the session: idle again, the member
    finds the task it owns already known and is not handed it as <auto-claimed>."""
    actions.remove_member(ws, TEAM, "bob")
    board.create(ws, TEAM, "the blocker")
    board.update(ws, TEAM, 1, status="in_progress", owner="bob")  # nobody alice can ask
    board.create(ws, TEAM, "the started one", blocked_by=[1])  # so idle alice claims nothing
    server.add_rule({"agent": "alice", "contains": "TAKE-41c7", "delay": 1.5,
                     "reply": {"content": [tool_use("TaskUpdate", task_id=2,
                                                    status="in_progress")]}})
    server.add_rule({"agent": "alice", "tool_result": "TaskUpdate",
                     "reply": {"content": "On it."}})
    with running_teamd(ws, server.url):
        wait_status(ws, "alice", "idle")
        actions.send(ws, TEAM, "alice", "TAKE-41c7 start task 2 yourself")
        wait_until(lambda: any("TAKE-41c7" in last_turn(r) for r in server.requests)
                   or None, T, "the call that will start task 2")
        # unblocked while alice is busy in that call: only the model can start it
        board.update(ws, TEAM, 1, status="completed")
        wait_until(lambda: any("started #2" in last_turn(r) for r in server.requests)
                   or None, T, "the TaskUpdate result to reach the model")
        wait_status(ws, "alice", "idle")
        assert board.get(ws, TEAM, 2)["owner"] == "alice"
        records = files.read_jsonl(ws.store.paths.session(TEAM, "alice")).records
        assert [r["claimed"] for r in records if r["type"] == "tool_result"
                and "claimed" in r] == [2]
    assert not any("<auto-claimed>Task #2" in last_turn(r) for r in server.requests)


def test_an_approved_shutdown_ends_the_process_after_the_turns_calls(
        ws: Workspace, team: Path, server: ScriptedServer) -> None:
    """SendMessage shutdown_response approve → `ends_process`: the turn's next call still
    runs, then the member exits 0 without another model call."""
    actions.remove_member(ws, TEAM, "bob")
    server.add_rule({"agent": "alice", "contains": "BUSY-83e0", "delay": 1.5,
                     "reply": {"content": [tool_use("TaskList")]}})
    server.add_rule({"agent": "alice",
                     "regex": r'type="shutdown_request" request_id="(?P<rid>shutdown-[0-9a-f]+)"',
                     "reply": {"content": [
                         tool_use("SendMessage", recipient="lead", content="bye",
                                  type="shutdown_response", request_id="{rid}", approve=True),
                         tool_use("bash", command="echo AFTER-83e0 | tee after.txt")]}})
    with running_teamd(ws, server.url):
        wait_status(ws, "alice", "idle")
        pid = live_pid(ws, TEAM, "alice")
        assert pid is not None
        actions.send(ws, TEAM, "alice", "BUSY-83e0 list the tasks")
        wait_until(lambda: any("BUSY-83e0" in last_turn(r) for r in server.requests)
                   or None, T, "the busy call")
        rid = actions.shutdown(ws, TEAM, "alice", reason="wrap up")["request"]["request_id"]
        wait_status(ws, "alice", "shutdown")
        wait_until(lambda: not psutil.pid_exists(pid), T, f"pid {pid} to be reaped")
        exits = wait_until(lambda: [(e["code"], e["signal"]) for e in journal(ws, TEAM)
                                    if e.get("event") == "exited" and e.get("member") == "alice"],
                           T, "the exit journaled (it follows the status)")
        assert exits == [(0, None)]
    assert requests.get(ws, TEAM, rid)["status"] == "approved"
    assert (team / "after.txt").read_text() == "AFTER-83e0\n"  # the turn's calls all ran
    # and no model call came after them: their results never reached the model
    assert not any("AFTER-83e0\\n[exit" in json.dumps(r["body"]["messages"])
                   for r in server.requests)
    assert member(ws, TEAM, "alice")["desired"] == "stopped"
