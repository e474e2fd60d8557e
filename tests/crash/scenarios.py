"""The crash sweep's scenarios (issue 22): each a `Spec` — the model's script, the steps a
person takes (`teamctl` commands, each a process of its own), and the conditions it waits
for. Each must reach its end whatever process died at whatever write, once the supervisor
restarted what it should and a crashed command was run again.

Tokens the model must see once go in `World.sent`; replies a model sends once in
`World.replies`; a `bash` call appends its own marker to `ran.txt` (run at most once).
"""

from __future__ import annotations

from typing import Any

from teamd import board, requests, roster
from tests.crash.sweep import Spec, World
from tests.faults.faultkit import Sent
from tests.harness import lead_inbox, make_team, tool_use

#: a message's token as the fault suite's checks find it (`faultkit.TOKEN_RE`)
PING = "MSG00001x7f3a01"
IDLE = {"content": [{"type": "text", "text": "Waiting."}]}


def _status(w: World, name: str) -> str:
    return str(roster.get(roster.load(w.ws, w.team), name)["status"])


def _idle(w: World, name: str) -> None:
    w.wait(lambda: _status(w, name) == "idle", f"{name} idle")


# -- a message through send → drain → model call → reply -----------------------------------
def message_script() -> dict[str, Any]:
    return {"rules": [
        {"name": "pong", "agent": "alice", "contains": "PING", "reply": {"content": [
            tool_use("bash", command="echo RAN-PONG >> ran.txt"),
            tool_use("SendMessage", recipient="lead", content="PONG-7f3 from alice")]}},
    ], "default": IDLE}


def message(w: World) -> None:
    make_team(w.ws, w.workdir, "alice")
    w.start()
    _idle(w, "alice")
    out = w.teamctl("send", "send", w.team, "alice", "--id", "ping-1", f"{PING} PING please")
    assert "ping-1" in out
    w.sent.append(Sent("alice", "ping-1", PING))
    w.replies.append("PONG-7f3")
    w.wait(lambda: any("PONG-7f3" in m["content"] for m in lead_inbox(w.ws, w.team)),
           "alice's reply in the lead's inbox")
    _idle(w, "alice")


# -- a plan rejected, then approved --------------------------------------------------------
def plan_script() -> dict[str, Any]:
    return {"rules": [
        {"name": "plan-1", "agent": "alice", "contains": "PLAN-START", "reply": {"content": [
            tool_use("SubmitPlan", plan="PLAN-V1: edit the login page")]}},
        {"name": "plan-2", "agent": "alice", "contains": "add tests", "reply": {"content": [
            tool_use("SubmitPlan", plan="PLAN-V2: edit the login page, with tests")]}},
        {"name": "work", "agent": "alice", "contains": "Plan approved", "reply": {"content": [
            tool_use("bash", command="echo RAN-PLAN >> ran.txt")]}},
    ], "default": IDLE}


def _plan(w: World, text: str) -> str | None:
    for r in requests.list_requests(w.ws, w.team):
        if r["kind"] == "plan_approval" and text in str(r.get("plan")):
            return r["request_id"]
    return None


def plan(w: World) -> None:
    make_team(w.ws, w.workdir, "alice", prompt="PLAN-START", plan_mode=True)
    w.start()
    first = w.wait(lambda: _plan(w, "PLAN-V1"), "alice's first plan")
    w.teamctl("reject", "reject", w.team, first, "--feedback", "add tests")
    second = w.wait(lambda: _plan(w, "PLAN-V2"), "alice's second plan")
    w.teamctl("approve", "approve", w.team, second)
    ran = w.workdir / "ran.txt"
    w.wait(lambda: ran.exists() and "RAN-PLAN" in ran.read_text(), "alice at work")
    _idle(w, "alice")


# -- the shutdown handshake ----------------------------------------------------------------
def shutdown(w: World) -> None:
    make_team(w.ws, w.workdir, "alice")
    w.start()
    _idle(w, "alice")
    w.teamctl("shutdown", "shutdown", w.team, "alice", "--reason", "done for today")
    w.wait(lambda: _status(w, "alice") == "shutdown", "alice shut down")


def shutdown_offline(w: World) -> None:
    """No supervisor: the shutdown is answered on the member's behalf by `teamctl`."""
    make_team(w.ws, w.workdir, "alice")
    # a re-run after a crash past the roster's write finds it shut down already (exit 2)
    w.teamctl("shutdown", "shutdown", w.team, "alice", ok=(0, 2))
    assert _status(w, "alice") == "shutdown"


# -- a team deleted (and created again) ----------------------------------------------------
def delete(w: World) -> None:
    make_team(w.ws, w.workdir, "alice")
    board.create(w.ws, w.team, "An old task")
    w.teamctl("delete", "delete", w.team, ok=(0, 2))
    w.teamctl("create", "create", w.team)
    left = board.list_tasks(w.ws, w.team)
    assert not left, f"a deleted team's tasks came back: {[t['subject'] for t in left]}"


SPECS = {
    "message": Spec("message", message_script, message),
    "plan": Spec("plan", plan_script, plan),
    "shutdown": Spec("shutdown", lambda: {"rules": [], "default": IDLE}, shutdown),
    "shutdown-offline": Spec("shutdown-offline", lambda: {"rules": [], "default": IDLE},
                             shutdown_offline),
    "delete": Spec("delete", lambda: {"rules": [], "default": IDLE}, delete),
}
