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
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from teamctl import demo_claude_code, output
from teamd import (
    actions,
    board,
    events,
    files,
    gitcmd,
    inbox,
    pidfile,
    roster,
    runtimes,
    settings,
    worktrees,
)
from teamd.errors import BadInput, TeamdError
from teamd.layout import LEAD, USER, Workspace
from teamd.proc import stop_subprocess

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
        if Workspace.at(root).store.team_exists(TEAM):
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


def run(given: str | None, timeout: float, lead: bool = False,
        runtime: str = runtimes.TEAMD) -> None:
    """Run the demo in the root the person `given` (default: a new ./teamd-demo folder);
    `lead`: the LLM-lead story; `runtime`: the teammates' (`teamctl.demo_claude_code`).
    Paths are printed in the form given: absolute for an absolute root, else relative to
    the current directory, so each works when pasted."""
    root = _pick_root(Path(given).expanduser().absolute() if given else None)
    claude_code = runtime == runtimes.CLAUDE_CODE
    if claude_code:
        if lead:
            raise BadInput("--runtime claude-code runs the demo without --lead")
        demo_claude_code.check(root)
    files.ensure_dir(root)
    ws = Workspace.at(root)
    shown = Shown(root, absolute=given is not None and Path(given).expanduser().is_absolute())
    env = dict(os.environ)
    server = None
    if env.get("ANTHROPIC_API_KEY"):
        print(f"Using Claude ({env.get('TEAMD_MODEL') or settings.Settings().model}) with your "
              "ANTHROPIC_API_KEY.")
    else:
        from teamd.scripted.server import ScriptedServer

        server = ScriptedServer(lead_scenario() if lead else demo_claude_code.scenario(
            ws, TEAM) if claude_code else scenario()).start()
        env.update(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="offline-demo")
        how = ("Claude Code, through each teammate's forwarder" if claude_code
               else "the real anthropic SDK")
        print(f"No ANTHROPIC_API_KEY: the teammates talk to the built-in scripted model "
              f"server at {server.url}\n({how} over real HTTP, offline).")
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
            actions.spawn(ws, TEAM, name, prompt + WORKFLOW, role=role, runtime=runtime)
    # the supervisor's own output, private like everything the product writes (0600)
    log = os.fdopen(os.open(root / "teamd.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                            files.FILE_MODE), "ab")
    daemon = subprocess.Popen([sys.executable, "-m", "teamd", "run", "--root", str(root)],
                              env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    printer = EventPrinter(ws, lead)
    try:
        if lead:
            _lead_story(ws, daemon, printer, timeout, shown)
        else:
            _watch(ws, daemon, printer, timeout)
            print("\nAll tasks completed; shutting the team down (the handshake).")
            for m in roster.load(ws, TEAM)["members"]:
                if m["desired"] == "running":
                    actions.shutdown(ws, TEAM, m["name"], reason="the migration is done")
        # gone, and their exits journalled: teamd writes `shutdown` once it reaped them
        gone = ws.store.wait_for([TEAM], lambda: all(
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
    _summary(ws, shown, lead)


def make_repo(path: Path) -> Path:
    """The small application the team works on: a git repository with one commit. The
    demo's own identity is set in it, for the merges the person makes at the end."""
    files.ensure_dir(path)
    gitcmd.git(path, "init", "-q", "-b", "main")
    for key, value in (("user.name", "teamd demo"), ("user.email", "demo@teamd.invalid"),
                       ("commit.gpgsign", "false")):
        gitcmd.git(path, "config", key, value)
    (path / "README.md").write_text("# The app\n\nA REST API, moving to GraphQL.\n")
    gitcmd.git(path, "add", "-A")
    gitcmd.git(path, "commit", "-q", "-m", "The app before the migration")
    return path


def show_work(ws: Workspace, repo: Path) -> None:
    """The ending: every teammate's branch, each task's commit, and the merges."""
    print("\nEach teammate worked on its own branch; each completed task is a commit:")
    print(gitcmd.git(repo, "branch", "--list", "-v", "--no-abbrev", "teamd/*").stdout
          .rstrip())
    for task in board.list_tasks(ws, TEAM):
        for commit in task.get("commits") or []:
            print(f"  task #{task['id']} ({task['owner']}): {commit[:10]} "
                  f"{worktrees.task_message(task)}")
    print("\nEach branch merged into main, as teamctl merge does it:")
    for m in roster.load(ws, TEAM)["members"]:
        if not m.get("worktree"):
            continue
        done = worktrees.merge(ws, TEAM, m["name"])
        if done["commit"] is not None:
            print(f"  merged {done['branch']} into {done['into']}: {done['commit'][:10]}")
        else:
            print(f"  {done['branch']}: no commits of its own, nothing to merge")
    print(gitcmd.git(repo, "log", "--oneline", "--graph", "-n", "12").stdout.rstrip())

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

    if not ws.store.wait_for([TEAM], finished, timeout):
        raise TeamdError(f"the team did not finish within {timeout:g}s")


def _all_completed(ws: Workspace, at_least: int = 1) -> bool:
    tasks = board.list_tasks(ws, TEAM)
    return len(tasks) >= at_least and all(t["status"] == "completed" for t in tasks)


def _teammates_gone(ws: Workspace) -> bool:
    members = [m for m in roster.load(ws, TEAM)["members"] if m.get("kind") != "lead"]
    return bool(members) and all(m["desired"] == "stopped" and not roster.is_live(m)
                                 for m in members)


def _lead_story(ws: Workspace, daemon: subprocess.Popen[bytes], printer: EventPrinter,
                timeout: float, shown: Shown) -> None:
    """The LLM lead runs the show; the person (`user`) says one thing to it on the way,
    and stops the lead once it has shut its team down."""
    _watch(ws, daemon, printer, timeout, lambda: board.list_tasks(ws, TEAM))
    printer.flush()
    note = actions.send(ws, TEAM, LEAD, USER_NOTE)  # as the person: `user`
    said = shown.teamctl("send", TEAM, LEAD, USER_NOTE)
    print(f"\n(you, as {note['sender']}: `{said}`)\n", flush=True)
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


class Shown:
    """How the demo names a path or a command for the person to paste: the root in the
    form they gave it (absolute, or relative to the current directory), arguments quoted
    for the shell, and teamctl as they can run it."""

    def __init__(self, root: Path, absolute: bool) -> None:
        self.root = root
        self.base = str(root) if absolute else os.path.relpath(root)

    def path(self, *parts: str) -> str:
        return os.path.join(self.base, *parts)

    def arg(self, *parts: str) -> str:
        """A path as one shell word (a trailing `*.json` left outside the quotes)."""
        *head, last = parts
        if "*" in last:
            return shlex.quote(self.path(*head)) + "/" + last
        return shlex.quote(self.path(*parts))

    def teamctl(self, *args: str) -> str:
        return " ".join([_teamctl(), "--root", shlex.quote(self.base),
                         *map(shlex.quote, args)])


def _teamctl() -> str:
    """teamctl as the person's shell runs it: `teamctl` when that is what PATH finds, else
    the path this process was started by (`.venv/bin/teamctl`), else the module."""
    me = Path(sys.argv[0])
    if me.name != "teamctl":
        return f"{shlex.quote(sys.executable)} -m teamctl.cli"
    found = shutil.which("teamctl")
    if found is not None and Path(found).resolve() == me.resolve():
        return "teamctl"
    return shlex.quote(str(me))


def _summary(ws: Workspace, shown: Shown, lead: bool = False) -> None:
    """Where the work is and what to try: only paths that exist, and commands that run
    as printed."""
    team_dir = f".teams/{TEAM}"
    if lead:
        mail = inbox.peek(ws, TEAM, USER)
        if mail:
            print(f"\nThe lead wrote to you ({shown.path(team_dir, 'user_inbox.jsonl')}; "
                  f"`{shown.teamctl('inbox', TEAM)}` reads and clears it):")
            for m in mail:
                print(f"  {m['sender']} → {m['recipient']}: {m['content']}")
    places = [((team_dir, "config.json"), "the roster: who is in the team, what each should be"),
              ((team_dir, "members/"), "what each member is now: status, pid, usage"),
              ((team_dir, "events.jsonl"), "the journal of everything that happened"),
              ((team_dir, "sessions/"), "each member's conversation"),
              ((f".tasks/{TEAM}/",), "the task board, a file per task"),
              (("app/",), "the repository, every branch merged"),
              ((f".worktrees/{TEAM}/",), "each teammate's worktree"),
              (("work/notes/",), "the notes the teammates wrote (the lead's folder)"),
              (("teamd.log",), "the supervisor's own log")]
    places = [(p, what) for p, what in places if (shown.root / Path(*p)).exists()]
    width = max(len(shown.path(*p)) for p, _ in places) + 2
    print(f"\nDone. Everything the team did is in plain files under {shown.base}:")
    for parts, what in places:
        print(f"  {shown.path(*parts):{width}}{what}")
    print("Try:")
    print("  jq -c 'select(.event==\"message\") | .message | {sender, recipient, content}' "
          + shown.arg(team_dir, "events.jsonl"))
    print("  jq -s 'map({name, status, usage})' " + shown.arg(team_dir, "members", "*.json"))
    print("  " + shown.teamctl("task", "list", TEAM))
    print("  " + shown.teamctl("logs", TEAM, "backend", "-n", "5"))
    if (shown.root / "app").is_dir():
        print("  " + shown.teamctl("diff", TEAM, "backend", "--stat"))
        print(f"  git -C {shown.arg('app')} log --oneline --graph -n 8")
    if pidfile.running(ws) is not None:
        print("(the supervisor is still running)")
