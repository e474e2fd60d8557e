"""`teamctl demo`: a whole team at work, start to finish, in a fresh workspace.

The seeds' example: a REST → GraphQL migration on a board of four chained tasks, worked
by `analyst`, `backend` and `frontend` under a real `teamd run`, each in its own git
worktree of a small repository (`app/`); it ends with the branches, each task's commit,
and the merges. With ANTHROPIC_API_KEY
set it uses Claude; without, the project's scripted model server (the same real SDK over
real HTTP, on loopback), and says so.

`--lead` tells the seeds' whole story with an LLM lead: the lead splits the migration
into the four chained tasks, spawns the three teammates with its `Task` tool (backend in
plan mode), rejects backend's first plan and approves the revised one, and shuts the team
down; the person watching is `user`, who writes to the lead and reads its answers.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from teamctl import output
from teamd import actions, board, events, files, inbox, pidfile, roster, settings, worktrees
from teamd.errors import TeamdError
from teamd.layout import LEAD, USER, Workspace
from teamd.proc import stop_subprocess
from teamd.watch import wait_for

TEAM = "rest-to-graphql"
TASKS = [("Analyze REST endpoints", "List every REST endpoint and what it returns."),
         ("Design GraphQL schema", "Types, queries and mutations covering the endpoints."),
         ("Implement resolvers", "Resolvers for the schema, backed by the existing services."),
         ("Update frontend", "Move the frontend's data fetching to GraphQL queries.")]
MEMBERS = [("analyst", "API analyst", "Analyse the REST endpoints."),
           ("backend", "backend engineer", "Handle the backend tasks."),
           ("frontend", "frontend engineer", "Handle the frontend migration.")]
WORKFLOW = (" Tasks come to you from the shared board when you are idle. For each: write "
            "short notes under notes/ with write_file, mark the task completed with "
            "TaskUpdate, and tell the lead with SendMessage. Keep each task brief.")


def scenario() -> dict[str, Any]:
    """What the scripted model does: take the auto-claimed task, write notes, finish it."""
    claimed = r"<auto-claimed>Task #(?P<tid>\d+): (?P<subject>[^\n<]+)"
    done = r"task-(?P<tid>\d+)\.md"
    finish = [
        {"type": "tool_use", "name": "TaskUpdate",
         "input": {"task_id": "{int:tid}", "status": "completed"}},
        {"type": "tool_use", "name": "SendMessage",
         "input": {"recipient": "lead", "content": "Task #{tid} is done: notes/task-{tid}.md",
                   "summary": "#{tid} done"}}]
    return {"rules": [
        {"name": "work", "regex": claimed, "reply": {"content": [
            {"type": "text", "text": "Taking task #{tid}: {subject}."},
            {"type": "tool_use", "name": "write_file",
             "input": {"path": "notes/task-{tid}.md",
                       "content": "# {subject}\n\nNotes by {agent}.\n"}}]}},
        {"name": "schema-ready", "agent": "backend", "tool_result": "write_file",
         "regex": done, "reply": {"content": [*finish, {
             "type": "tool_use", "name": "SendMessage",
             "input": {"recipient": "frontend",
                       "content": "Backend #{tid} is done; see notes/task-{tid}.md"}}]}},
        {"name": "finish", "tool_result": "write_file", "regex": done,
         "reply": {"content": finish}},
    ], "default": {"content": [{"type": "text", "text": "Done for now; waiting for work."}]}}


LEAD_PROMPT = (
    "Lead the migration of this app from REST to GraphQL, briefly.\n"
    "1. Put the work on the task board as four tasks, each blocked by the one before: "
    + ", ".join(f"'{subject}'" for subject, _ in TASKS) + ".\n"
    "2. Spawn three teammates with the Task tool in this team: analyst (API analyst), "
    "backend (backend engineer, plan_mode_required true) and frontend (frontend engineer)."
    + WORKFLOW + " Give task 1 to analyst, tasks 2 and 3 to backend and task 4 to frontend "
    "(TaskUpdate owner).\n"
    "3. Review backend's plan: reject the first one with concrete feedback, approve a "
    "revision that addresses it.\n"
    "4. When all four tasks are completed, shut each teammate down with SendMessage type "
    "shutdown_request, and tell the user (recipient `user`) that the migration is done.")
USER_NOTE = "Keep the REST endpoints up until the frontend has moved, please."


def lead_scenario() -> dict[str, Any]:
    """What the scripted models do in `demo --lead`: the lead staffs the team and plans
    the board in its first reply, reviews backend's plan (no, then yes), answers the
    person, and winds the team down when frontend reports the last task done."""
    plan_request = r'type="plan_approval_request" request_id="(?P<rid>[^"]+)"'
    staff: list[dict[str, Any]] = []
    for i, (subject, description) in enumerate(TASKS, start=1):
        staff.append({"type": "tool_use", "name": "TaskCreate", "input": {
            "subject": subject, "description": description,
            **({"blocked_by": [i - 1]} if i > 1 else {})}})
    # Each teammate's tasks are given to it right after it is spawned, before the task
    # ahead of them can be finished: no other teammate can claim them first.
    owners = {"analyst": [1], "backend": [2, 3], "frontend": [4]}
    for name, role, prompt in MEMBERS:
        staff.append({"type": "tool_use", "name": "Task", "input": {
            "name": name, "team_name": TEAM, "role": role, "prompt": prompt + WORKFLOW,
            **({"plan_mode_required": True} if name == "backend" else {})}})
        staff += [{"type": "tool_use", "name": "TaskUpdate",
                   "input": {"task_id": tid, "owner": name}} for tid in owners[name]]
    shutdowns = [{"type": "tool_use", "name": "SendMessage", "input": {
        "recipient": name, "type": "shutdown_request", "content": "The migration is done.",
        "reason": "all four tasks are completed"}} for name, _, _ in MEMBERS]
    rules: list[dict[str, Any]] = [
        {"name": "staff", "agent": LEAD, "nth": 1, "reply": {"content": [
            {"type": "text", "text": "Four chained tasks, three teammates."}, *staff]}},
        {"name": "wind-down", "agent": LEAD, "contains": f"Task #{len(TASKS)} is done",
         "times": 1, "reply": {"content": [*shutdowns, {
             "type": "tool_use", "name": "SendMessage", "input": {
                 "recipient": "user", "content": "The migration is done: all four tasks "
                 "are completed, and I asked analyst, backend and frontend to shut down."}}]}},
        {"name": "plan-reject", "agent": LEAD, "regex": plan_request, "times": 1,
         "reply": {"content": [{"type": "tool_use", "name": "SendMessage", "input": {
             "recipient": "backend", "type": "plan_approval_response", "request_id": "{rid}",
             "approve": False, "content": "Not yet.",
             "feedback": "Add a way back: keep the REST routes behind a flag until the "
                         "frontend has moved."}}]}},
        {"name": "plan-approve", "agent": LEAD, "regex": plan_request, "times": 1,
         "reply": {"content": [{"type": "tool_use", "name": "SendMessage", "input": {
             "recipient": "backend", "type": "plan_approval_response", "request_id": "{rid}",
             "approve": True, "content": "Approved.",
             "feedback": "Approved: go ahead with the schema and the resolvers."}}]}},
        {"name": "answer-user", "agent": LEAD, "regex": 'sender="user" type="message"',
         "times": 1, "reply": {"content": [{"type": "tool_use", "name": "SendMessage",
                                            "input": {"recipient": "user", "content":
                                                      "Understood: REST stays up until task "
                                                      "#4 is done."}}]}},
        {"name": "plan", "agent": "backend", "nth": 1, "reply": {"content": [
            {"type": "tool_use", "name": "SubmitPlan", "input": {
                "plan": "1. Derive the schema from the analyst's notes. 2. Write resolvers "
                        "over the existing services."}}]}},
        {"name": "revise", "agent": "backend", "contains": 'approve="false"', "times": 1,
         "reply": {"content": [{"type": "tool_use", "name": "SubmitPlan", "input": {
             "plan": "1. Derive the schema from the analyst's notes. 2. Write resolvers over "
                     "the existing services. 3. Keep the REST routes behind a flag until "
                     "the frontend has moved."}}]}},
    ]
    return {"rules": rules + scenario()["rules"], "default": scenario()["default"]}


def _pick_root(root: Path | None) -> Path:
    if root is not None:
        if (root / ".teams" / TEAM).exists():
            raise TeamdError(f"{root} already holds a {TEAM} team; pick another --root")
        if pidfile.running(Workspace.at(root)) is not None:
            raise TeamdError(f"a supervisor is already running for {root}; pick another "
                             "--root")
        return root
    base = Path.cwd() / "teamd-demo"
    n = 1
    while base.exists():
        n += 1
        base = Path.cwd() / f"teamd-demo-{n}"
    return base


def run(root: Path | None, timeout: float, lead: bool = False) -> None:
    """Run the demo in `root` (default: a new ./teamd-demo folder); `lead`: the LLM-lead
    story."""
    root = _pick_root(root)
    files.ensure_dir(root)
    ws = Workspace.at(root)
    env = dict(os.environ)
    server = None
    if env.get("ANTHROPIC_API_KEY"):
        print(f"Using Claude ({env.get('TEAMD_MODEL') or settings.Settings().model}) with your "
              "ANTHROPIC_API_KEY.")
    else:
        from teamd.scripted.server import ScriptedServer

        server = ScriptedServer(lead_scenario() if lead else scenario()).start()
        env.update(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="offline-demo")
        print(f"No ANTHROPIC_API_KEY: the teammates talk to the built-in scripted model "
              f"server at {server.url}\n(the real anthropic SDK over real HTTP, offline).")
    env.setdefault("TEAMD_IDLE_TIMEOUT", "300")
    print(f"Workspace: {root}\n")
    repo: Path | None = None
    if lead:
        # the lead works in a folder of its own and staffs the team itself (Task tool)
        actions.create_team(ws, TEAM, "Migrate the app from REST to GraphQL")
        work = files.ensure_dir(root / "work")
        actions.spawn(ws, TEAM, LEAD, LEAD_PROMPT, role="tech lead", cwd=str(work), lead=True)
    else:
        repo = make_repo(root / "app")
        actions.create_team(ws, TEAM, "Migrate the app from REST to GraphQL", repo=str(repo),
                            worktrees_on=True)
        previous: list[int] = []
        for subject, description in TASKS:
            previous = [board.create(ws, TEAM, subject, description, previous)["id"]]
        for name, role, prompt in MEMBERS:
            # each in its own worktree of app/, on branch teamd/rest-to-graphql/{name}
            actions.spawn(ws, TEAM, name, prompt + WORKFLOW, role=role)
    log = open(root / "teamd.log", "ab")  # noqa: SIM115 - closed below
    daemon = subprocess.Popen([sys.executable, "-m", "teamd", "run", "--root", str(root)],
                              env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    printer = EventPrinter(ws, lead)
    try:
        if lead:
            _lead_story(ws, daemon, printer, timeout)
        else:
            _watch(ws, daemon, printer, timeout)
            print("\nAll tasks completed; shutting the team down (the handshake).")
            for m in roster.load(ws, TEAM)["members"]:
                if m["desired"] == "running":
                    actions.shutdown(ws, TEAM, m["name"], reason="the migration is done")
        # gone, and their exits journalled: teamd writes `shutdown` once it reaped them
        gone = wait_for([ws.team_dir(TEAM)], lambda: all(
            m["status"] == "shutdown" and not roster.is_live(m)
            for m in roster.load(ws, TEAM)["members"]), 60)
        printer.flush()
        if not gone:
            raise TeamdError("members did not shut down within 60s")
    finally:
        stop_subprocess(daemon, 30)
        log.close()
        if server is not None:
            server.stop()
    printer.flush()  # the last exits, journalled as teamd reaped them
    if repo is not None:
        show_work(ws, repo)
    _summary(ws, root, lead)


def make_repo(path: Path) -> Path:
    """The small application the team works on: a git repository with one commit. The
    demo's own identity is set in it, for the merges the person makes at the end."""
    files.ensure_dir(path)
    worktrees.git(path, "init", "-q", "-b", "main")
    for key, value in (("user.name", "teamd demo"), ("user.email", "demo@teamd.invalid"),
                       ("commit.gpgsign", "false")):
        worktrees.git(path, "config", key, value)
    (path / "README.md").write_text("# The app\n\nA REST API, moving to GraphQL.\n")
    worktrees.git(path, "add", "-A")
    worktrees.git(path, "commit", "-q", "-m", "The app before the migration")
    return path


def show_work(ws: Workspace, repo: Path) -> None:
    """The ending: every teammate's branch, each task's commit, and the merges."""
    print("\nEach teammate worked on its own branch; each completed task is a commit:")
    print(worktrees.git(repo, "branch", "--list", "-v", "--no-abbrev", "teamd/*").stdout
          .rstrip())
    for task in board.list_tasks(ws, TEAM):
        for commit in task.get("commits") or []:
            print(f"  task #{task['id']} ({task['owner']}): {commit[:10]} "
                  f"{worktrees.task_message(task)}")
    print("\nReview one with `teamctl diff`, then merge (`teamctl merge TEAM NAME`):")
    for m in roster.load(ws, TEAM)["members"]:
        if not m.get("worktree"):
            continue
        done = worktrees.merge(ws, TEAM, m["name"])
        if done["commit"] is not None:
            print(f"  merged {done['branch']} into {done['into']}: {done['commit'][:10]}")
        else:
            print(f"  {done['branch']}: no commits of its own, nothing to merge")
    print(worktrees.git(repo, "log", "--oneline", "--graph", "-n", "12").stdout.rstrip())

class EventPrinter:
    """Prints the journal's new lines that tell the story, coloured per member."""

    SHOWN = ("message", "task_claimed", "task_completed", "status", "tool_call", "spawned",
             "exited")
    #: with an LLM lead the board and the plans are its doing: worth showing too
    SHOWN_LEAD = (*SHOWN, "member_added", "task_created", "task_updated", "request_opened",
                  "request_answered")

    def __init__(self, ws: Workspace, lead: bool = False) -> None:
        self.ws = ws
        self.seen = 0
        self.shown = self.SHOWN_LEAD if lead else self.SHOWN

    def flush(self) -> None:
        records = events.read(self.ws, TEAM)
        colors = {m["name"]: m["color"] for m in roster.load(self.ws, TEAM)["members"]}
        for rec in records[self.seen:]:
            if rec.get("event") in self.shown:
                who = rec.get("member") or "-"
                print(f"{output.when(rec.get('ts'))} {output.paint(f'{who:9}', colors.get(who))}"
                      f" {output.describe_event(rec)}", flush=True)
        self.seen = len(records)


def _watch(ws: Workspace, daemon: subprocess.Popen[bytes], printer: EventPrinter,
           timeout: float, done: Any = None) -> None:
    """Print the story until every task is completed (or `done()`, when given)."""
    def finished() -> bool:
        printer.flush()
        if daemon.poll() is not None:
            raise TeamdError(f"teamd exited with {daemon.returncode}; see "
                             f"{ws.root / 'teamd.log'}")
        if done is not None:
            return bool(done())
        return _all_completed(ws)

    if not wait_for([ws.team_dir(TEAM), ws.tasks_dir(TEAM)], finished, timeout):
        raise TeamdError(f"the team did not finish within {timeout:g}s")


def _all_completed(ws: Workspace, at_least: int = 1) -> bool:
    tasks = board.list_tasks(ws, TEAM)
    return len(tasks) >= at_least and all(t["status"] == "completed" for t in tasks)


def _teammates_gone(ws: Workspace) -> bool:
    members = [m for m in roster.load(ws, TEAM)["members"] if m.get("kind") != "lead"]
    return bool(members) and all(m["desired"] == "stopped" and not roster.is_live(m)
                                 for m in members)


def _lead_story(ws: Workspace, daemon: subprocess.Popen[bytes], printer: EventPrinter,
                timeout: float) -> None:
    """The LLM lead runs the show; the person (`user`) says one thing to it on the way,
    and stops the lead once it has shut its team down."""
    _watch(ws, daemon, printer, timeout, lambda: board.list_tasks(ws, TEAM))
    printer.flush()
    note = actions.send(ws, TEAM, LEAD, USER_NOTE)  # as the person: `user`
    print(f"\n(you, as {note['sender']}: teamctl send {TEAM} {LEAD} \"{USER_NOTE}\")\n",
          flush=True)
    _watch(ws, daemon, printer, timeout, lambda: _all_completed(ws, len(TASKS)))
    print("\nAll tasks completed; the lead shuts its team down.", flush=True)
    try:
        _watch(ws, daemon, printer, 120, lambda: _teammates_gone(ws))
    except TeamdError:
        print("(the lead left some teammates up: shutting them down as user)")
        for m in roster.load(ws, TEAM)["members"]:
            if m["name"] != LEAD and m["desired"] == "running":
                actions.shutdown(ws, TEAM, m["name"], reason="the migration is done")
    # an LLM lead takes no shutdown request: the person stops it (`teamctl stop --force`)
    actions.stop(ws, TEAM, LEAD)


def _summary(ws: Workspace, root: Path, lead: bool = False) -> None:
    rel = os.path.relpath(root)
    if lead:
        mail = inbox.peek(ws, TEAM, USER)
        if mail:
            print(f"\nThe lead wrote to you ({rel}/.teams/{TEAM}/user_inbox.jsonl; "
                  f"`teamctl --root {rel} inbox {TEAM}` reads and clears it):")
            for m in mail:
                print(f"  {m['sender']} → {m['recipient']}: {m['content']}")
    print(f"\nDone. Everything the team did is in plain files under {rel}:")
    print(f"  {rel}/.teams/{TEAM}/config.json        the roster")
    print(f"  {rel}/.teams/{TEAM}/events.jsonl       the journal of everything that happened")
    print(f"  {rel}/.teams/{TEAM}/sessions/*.jsonl   each teammate's conversation")
    print(f"  {rel}/.tasks/{TEAM}/*.json             the task board")
    print(f"  {rel}/app/                             the repository, every branch merged")
    print(f"  {rel}/.worktrees/{TEAM}/*/   each teammate's worktree")
    print("Try:")
    print(f"  jq -c 'select(.event==\"message\") | .message | {{sender, recipient, content}}' "
          f"{rel}/.teams/{TEAM}/events.jsonl")
    print(f"  jq '.members[] | {{name, status, usage}}' {rel}/.teams/{TEAM}/config.json")
    print(f"  teamctl --root {rel} task list {TEAM}")
    print(f"  teamctl --root {rel} diff {TEAM} backend --stat")
    if pidfile.running(ws) is not None:
        print("(the supervisor is still running)")
