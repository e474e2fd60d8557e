"""The crash sweep's scenarios (issue 22): each a `Spec` — the model's script, the steps a
person takes (`teamctl` commands, each a process of its own), and the conditions it waits
for. Each must reach its end whatever process died at whatever write, once the supervisor
restarted what it should and a crashed command was run again.

Tokens the model must see once go in `World.sent`; replies a model sends once in
`World.replies`; a `bash` call appends its own marker to `ran.txt` (run at most once).
A tool call cut off by a crash is answered `interrupted by a restart; not re-run` on
resume (CONTRACT §6): the scripted model, like a real one, then calls again — with a
marker of its own, so the invariant still sees each call run at most once.

A scenario reads the records through the store seam (`w.ws`'s store), never a file of the
files store, so each runs on PostgreSQL as on files.
"""

from __future__ import annotations

from typing import Any

from teamd import actions, board, inbox, requests, roster
from tests.crash.sweep import Spec, World
from tests.faults.faultkit import Sent
from tests.gitrepo import commits, make_repo
from tests.harness import journal, make_team, tool_use

#: the result a tool call gets when a crash cut it off (CONTRACT §6, Resume)
CUT = "interrupted by a restart"
#: a message's token as the fault suite's checks find it (`faultkit.TOKEN_RE`)
PING = "MSG00001x7f3a01"
IDLE = {"content": [{"type": "text", "text": "Waiting."}]}


def _status(w: World, name: str) -> str:
    return str(roster.get(roster.load(w.ws, w.team), name)["status"])


def _idle(w: World, name: str) -> None:
    w.wait(lambda: _status(w, name) == "idle", f"{name} idle")


# -- a message through send → drain → model call → reply -----------------------------------
def pong(agent: str, to: str) -> dict[str, Any]:
    """`agent` answers the PING with a bash call, then a reply to `to`."""
    def bash(mark: str) -> dict[str, Any]:
        return {"content": [tool_use("bash", command=f"echo {mark} >> ran.txt; echo BASH-OK")]}
    return {"rules": [
        {"name": "again", "agent": agent, "contains": CUT, "reply": bash("RAN-PONG-2")},
        {"name": "pong", "agent": agent, "contains": "PING", "reply": bash("RAN-PONG")},
        {"name": "reply", "agent": agent, "contains": "BASH-OK", "reply": {"content": [
            tool_use("SendMessage", recipient=to, content=f"PONG-7f3 from {agent}")]}},
    ], "default": IDLE}


def round_trip(w: World, name: str, person: str) -> None:
    """The person sends `name` the PING with --id; its reply lands in the person's inbox."""
    out = w.teamctl("send", "send", w.team, name, "--id", "ping-1", f"{PING} PING please")
    assert "ping-1" in out
    w.sent.append(Sent(name, "ping-1", PING))
    w.replies.append("PONG-7f3")
    w.wait(lambda: any("PONG-7f3" in m["content"] for m in inbox.peek(w.ws, w.team, person)),
           f"{name}'s reply in {person}'s inbox")
    _idle(w, name)


def message(w: World) -> None:
    make_team(w.ws, w.workdir, "alice")
    w.start()
    _idle(w, "alice")
    round_trip(w, "alice", "lead")


def lead_message(w: World) -> None:
    """The same round trip with the LLM lead: the person is `user`."""
    make_team(w.ws, w.workdir)
    actions.spawn(w.ws, w.team, "lead", "Lead the team.", cwd=str(w.workdir), lead=True)
    w.start()
    _idle(w, "lead")
    round_trip(w, "lead", "user")


# -- a plan rejected, then approved --------------------------------------------------------
def plan_script() -> dict[str, Any]:
    v1 = {"content": [tool_use("SubmitPlan", plan="PLAN-V1: edit the login page")]}
    v2 = {"content": [tool_use("SubmitPlan", plan="PLAN-V2: edit the login page, with tests")]}
    def work(mark: str) -> dict[str, Any]:
        return {"content": [tool_use("bash", command=f"echo {mark} >> ran.txt")]}
    return {"rules": [
        {"name": "work-again", "agent": "alice", "contains": CUT,
         "any_contains": "Plan approved", "reply": work("RAN-PLAN-2")},
        {"name": "plan-2-again", "agent": "alice", "contains": CUT,
         "any_contains": "add tests", "reply": v2},
        {"name": "plan-1-again", "agent": "alice", "contains": CUT, "reply": v1},
        {"name": "plan-1", "agent": "alice", "contains": "PLAN-START", "reply": v1},
        {"name": "plan-2", "agent": "alice", "contains": "add tests", "reply": v2},
        {"name": "work", "agent": "alice", "contains": "Plan approved", "reply": work("RAN-PLAN")},
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
    w.wait(lambda: _status(w, "alice") == "idle" and "RAN-PLAN" in ran.read_text(),
           "alice done")
    _idle(w, "alice")


# -- a permission asked, approved and run --------------------------------------------------
def permission_script() -> dict[str, Any]:
    def ask(mark: str) -> dict[str, Any]:
        return {"content": [tool_use("bash", command=f"echo {mark} >> ran.txt")]}
    return {"rules": [
        {"name": "again", "agent": "alice", "contains": CUT, "reply": ask("ASKED-2")},
        {"name": "ask", "agent": "alice", "contains": "PERM-START", "reply": ask("ASKED-1")},
    ], "default": IDLE}


def permission(w: World) -> None:
    w.ws.settings_file.write_text('[permissions]\nask = ["bash(echo ASKED*)"]\n')
    make_team(w.ws, w.workdir, "alice", prompt="PERM-START")
    w.start()
    ran = w.workdir / "ran.txt"

    def next_step() -> str | None:
        asks = [r for r in requests.list_requests(w.ws, w.team, pending_only=True)
                if r["kind"] == "permission"]
        if asks:
            return str(asks[0]["request_id"])
        done = ran.exists() and "ASKED" in ran.read_text() and _status(w, "alice") == "idle"
        return "done" if done else None

    for i in range(1, 4):  # asked again only after a call cut off by a crash
        step = w.wait(next_step, "a permission request, or alice done")
        if step == "done":
            return
        w.teamctl(f"approve-{i}", "approve", w.team, step)
    raise AssertionError("more than 3 permission requests")


# -- the shutdown handshake ----------------------------------------------------------------
def shutdown(w: World) -> None:
    make_team(w.ws, w.workdir, "alice")
    w.start()
    _idle(w, "alice")
    w.teamctl("shutdown", "shutdown", w.team, "alice", "--reason", "done for today",
              again=(2,))
    w.wait(lambda: _status(w, "alice") == "shutdown", "alice shut down")


def shutdown_offline(w: World) -> None:
    """No supervisor: the shutdown is answered on the member's behalf by `teamctl`."""
    make_team(w.ws, w.workdir, "alice")
    # a re-run after a crash past the roster's write finds it shut down already (exit 2)
    w.teamctl("shutdown", "shutdown", w.team, "alice", again=(2,))
    assert _status(w, "alice") == "shutdown"


# -- a task created, assigned, completed with its hook and its worktree commit ------------
CLAIMED = r"<auto-claimed>Task #(?P<tid>\d+)"


def work(tid: str) -> dict[str, Any]:
    """Write task `tid`'s file and complete the task, in one turn."""
    return {"content": [
        tool_use("write_file", path="work.txt", content="written for the task\n"),
        tool_use("TaskUpdate", task_id=f"{{int:{tid}}}" if tid == "tid" else int(tid),
                 status="completed")]}


def task_script() -> dict[str, Any]:
    return {"rules": [{"name": "work", "agent": "alice", "regex": CLAIMED,
                       "reply": work("tid")}], "default": IDLE}


def task(w: World) -> None:
    repo = make_repo(w.root / "repo")
    hooks = w.root / "hooks.txt"
    w.ws.settings_file.write_text(
        f'[hooks]\ntask_completed = "echo HOOK-$TEAMD_TASK_ID >> {hooks}"\n')
    actions.create_team(w.ws, w.team, repo=str(repo), worktrees_on=True)
    actions.spawn(w.ws, w.team, "alice", "Do the tasks you are given.")
    w.start()
    _idle(w, "alice")
    # run again after a kill, `task add` may add a second task (ids are never reused)
    w.teamctl("task-add", "task", "add", w.team, "Write the work file", "--owner", "alice")
    tid = max(t["id"] for t in board.list_tasks(w.ws, w.team))
    # the same work again after a cut-off call: nothing new to commit (the commit made
    # before the kill is found by its message, CONTRACT §13)
    w.server.add_rule({"name": "again", "agent": "alice", "contains": CUT,
                       "reply": work(str(tid))}, first=True)
    w.wait(lambda: all(t["status"] == "completed" for t in board.list_tasks(w.ws, w.team)),
           "every task completed")
    _idle(w, "alice")
    record = roster.get(roster.load(w.ws, w.team), "alice")["worktree"]
    made = commits(repo, record["base"], record["branch"])
    for t in board.list_tasks(w.ws, w.team):
        mine = [c["id"] for c in made if c["subject"].startswith(f"Task #{t['id']}:")]
        if len(mine) > 1 or t["commits"] != mine:
            w.found.append(f"task {t['id']} lists {t['commits']}, its commits are {mine}")


# -- a team deleted (and created again) ----------------------------------------------------
def delete(w: World) -> None:
    make_team(w.ws, w.workdir, "alice")
    board.create(w.ws, w.team, "An old task")
    w.teamctl("delete", "delete", w.team, again=(2,))
    w.teamctl("create", "create", w.team, again=(2,))
    left = board.list_tasks(w.ws, w.team)
    assert not left, f"a deleted team's tasks came back: {[t['subject'] for t in left]}"
    created = [e for e in journal(w.ws, w.team) if e["event"] == "team_created"]
    if len(created) != 1:
        w.found.append(f"the team created again has {len(created)} team_created line(s)")


# -- a compaction: a big context, then a message that wakes a compacted member --------------
#: 100 uncached + 30,000 read + 30,000 written: over a threshold of 50,000 (CONTRACT §6)
BIG_CONTEXT = {"input_tokens": 100, "cache_read_input_tokens": 30000,
               "cache_creation_input_tokens": 30000}
BIG = "MSG00002x7f3a02"
AFTER = "MSG00003x7f3a03"


def compaction_script() -> dict[str, Any]:
    return {"rules": [
        {"name": "summary", "agent": "alice", "contains": "Your context is nearly full",
         "reply": {"content": "SUMMARY-7f3: the lead asked for big things."}},
        {"name": "big", "agent": "alice", "contains": "BIG-CTX",
         "reply": {"content": "Noted.", "usage": BIG_CONTEXT}},
        {"name": "after", "agent": "alice", "contains": "AFTER-CTX", "reply": {"content": [
            tool_use("SendMessage", recipient="lead", content="POST-COMPACT-7f3")]}},
    ], "default": IDLE}


def _compacted(w: World, name: str) -> bool:
    return any(e["event"] == "compacted" and e.get("member") == name
               for e in journal(w.ws, w.team))


def compaction(w: World) -> None:
    make_team(w.ws, w.workdir, "alice")
    w.start()
    _idle(w, "alice")
    w.teamctl("send-big", "send", w.team, "alice", "--id", "big-1", f"{BIG} BIG-CTX remember")
    w.sent.append(Sent("alice", "big-1", BIG))
    w.wait(lambda: any(BIG in str(r.get("body")) for r in w.server.requests
                       if r["agent"] == "alice"), "the big context asked")
    _idle(w, "alice")
    w.teamctl("send-after", "send", w.team, "alice", "--id", "after-1",
              f"{AFTER} AFTER-CTX what next?")
    w.sent.append(Sent("alice", "after-1", AFTER))
    w.replies.append("POST-COMPACT-7f3")
    w.wait(lambda: any("POST-COMPACT-7f3" in m["content"]
                       for m in inbox.peek(w.ws, w.team, "lead")), "alice's reply after compacting")
    _idle(w, "alice")
    if not _compacted(w, "alice"):
        w.found.append("alice answered without compacting (or its `compacted` line lost)")


# -- a budget reached, then raised ---------------------------------------------------------
#: 30,000 input tokens: $0.06 at Sonnet 5.5's $2 per million, over a budget of $0.05
COSTLY = {"input_tokens": 30_000, "output_tokens": 0, "cache_read_input_tokens": 0,
          "cache_creation_input_tokens": 0}


def budget_script() -> dict[str, Any]:
    def step(mark: str) -> dict[str, Any]:
        return {"content": [tool_use("bash", command=f"echo {mark} >> ran.txt; echo STEP-OK")],
                "usage": COSTLY}
    return {"rules": [
        {"name": "again", "agent": "alice", "contains": CUT, "reply": step("RAN-STEP-2")},
        {"name": "step", "agent": "alice", "contains": "BUDGET-START",
         "reply": step("RAN-STEP")},
        {"name": "done", "agent": "alice", "contains": "STEP-OK",
         "reply": {"content": "Done."}},
    ], "default": IDLE}


def budget(w: World) -> None:
    make_team(w.ws, w.workdir, "alice", prompt="BUDGET-START", budget_usd=0.05)
    w.start()
    w.wait(lambda: _status(w, "alice") == "paused", "alice paused at her budget")
    w.teamctl("budget", "budget", w.team, "1", "--member", "alice")
    w.wait(lambda: any(r["agent"] == "alice" and "STEP-OK" in str(r.get("body"))
                       for r in w.server.requests), "alice on after the budget was raised")
    _idle(w, "alice")
    notes = [m for m in inbox.peek(w.ws, w.team, "lead") if m.get("type") == "budget_reached"]
    if len(notes) != 1:
        w.found.append(f"the lead told {len(notes)} times that alice's budget was reached")


# -- a member removed (the handshake, then out of the roster) ------------------------------
def remove(w: World) -> None:
    make_team(w.ws, w.workdir, "alice")
    board.create(w.ws, w.team, "Alice's task", owner="alice")
    w.start()
    # settled before the removal: she has taken her task and answered the note about it
    # (else whether `remove` or her own exit hands it back, its writes, depends on timing)
    w.wait(lambda: board.get(w.ws, w.team, 1)["status"] == "in_progress"
           and sum(r["agent"] == "alice" for r in w.server.requests) >= 2
           and _status(w, "alice") == "idle", "alice idle with her task taken")
    # a re-run after a crash past the roster's write finds no alice (exit 2)
    w.teamctl("remove", "remove", w.team, "alice", again=(2,))
    if roster.find(roster.load(w.ws, w.team), "alice") is not None:
        w.found.append("alice still in the roster")
    owned = [t["id"] for t in board.list_tasks(w.ws, w.team) if t.get("owner") == "alice"]
    if owned:
        w.found.append(f"tasks {owned} still owned by alice, removed")
    if w.ws.store.read_session(w.team, "alice"):
        w.found.append("alice's session not set aside")
    removed = [e for e in journal(w.ws, w.team)
               if e["event"] == "member_removed" and e.get("member") == "alice"]
    if len(removed) != 1:
        w.found.append(f"{len(removed)} member_removed line(s) for alice")


SPECS = {
    "message": Spec("message", lambda: pong("alice", "lead"), message),
    "lead-message": Spec("lead-message", lambda: pong("lead", "user"), lead_message),
    "plan": Spec("plan", plan_script, plan),
    "shutdown": Spec("shutdown", lambda: {"rules": [], "default": IDLE}, shutdown),
    "shutdown-offline": Spec("shutdown-offline", lambda: {"rules": [], "default": IDLE},
                             shutdown_offline),
    "task": Spec("task", task_script, task),
    "permission": Spec("permission", permission_script, permission),
    "delete": Spec("delete", lambda: {"rules": [], "default": IDLE}, delete),
    "compaction": Spec("compaction", compaction_script, compaction,
                       {"compact_threshold": 50000}),
    "budget": Spec("budget", budget_script, budget),
    "remove": Spec("remove", lambda: {"rules": [], "default": IDLE}, remove),
}
