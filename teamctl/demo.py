"""`teamctl demo`: a whole team at work, start to finish, in a fresh workspace.

The seeds' example: a REST → GraphQL migration on a board of four chained tasks, worked
by `analyst`, `backend` and `frontend` under a real `teamd run`, each in its own git
worktree of a small repository (`app/`); it ends with the branches, each task's commit,
and the merges. With ANTHROPIC_API_KEY
set it uses Claude; without, the project's scripted model server (the same real SDK over
real HTTP, on loopback), and says so.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from teamctl import output
from teamd import actions, board, events, files, pidfile, roster, settings, worktrees
from teamd.errors import TeamdError
from teamd.layout import Workspace
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


def _pick_root(root: Path | None) -> Path:
    if root is not None:
        if (root / ".teams" / TEAM).exists():
            raise TeamdError(f"{root} already holds a {TEAM} team; pick another --root")
        return root
    base = Path.cwd() / "teamd-demo"
    n = 1
    while base.exists():
        n += 1
        base = Path.cwd() / f"teamd-demo-{n}"
    return base


def run(root: Path | None, timeout: float) -> None:
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

        server = ScriptedServer(scenario()).start()
        env.update(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="offline-demo")
        print(f"No ANTHROPIC_API_KEY: the teammates talk to the built-in scripted model "
              f"server at {server.url}\n(the real anthropic SDK over real HTTP, offline).")
    env.setdefault("TEAMD_IDLE_TIMEOUT", "300")
    print(f"Workspace: {root}\n")
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
    try:
        printer = EventPrinter(ws)
        _watch(ws, daemon, printer, timeout)
        print("\nAll tasks completed; shutting the team down (the handshake).")
        for m in roster.load(ws, TEAM)["members"]:
            if m["desired"] == "running":
                actions.shutdown(ws, TEAM, m["name"], reason="the migration is done")
        gone = wait_for([ws.team_dir(TEAM)],
                        lambda: not actions.live_members(roster.load(ws, TEAM)), 60)
        printer.flush()
        if not gone:
            raise TeamdError("members did not shut down within 60s")
    finally:
        if daemon.poll() is None:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(30)
            except subprocess.TimeoutExpired:
                daemon.kill()
        log.close()
        if server is not None:
            server.stop()
    show_work(ws, repo)
    _summary(ws, root)


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
    worktrees.git(path, *worktrees.NO_HOOKS, "commit", "-q", "-m", "The app before the migration")
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

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.seen = 0

    def flush(self) -> None:
        records = events.read(self.ws, TEAM)
        colors = {m["name"]: m["color"] for m in roster.load(self.ws, TEAM)["members"]}
        for rec in records[self.seen:]:
            if rec.get("event") in self.SHOWN:
                who = rec.get("member") or "-"
                print(f"{output.when(rec.get('ts'))} {output.paint(f'{who:9}', colors.get(who))}"
                      f" {output.describe_event(rec)}", flush=True)
        self.seen = len(records)


def _watch(ws: Workspace, daemon: subprocess.Popen[bytes], printer: EventPrinter,
           timeout: float) -> None:
    def finished() -> bool:
        printer.flush()
        if daemon.poll() is not None:
            raise TeamdError(f"teamd exited with {daemon.returncode}; see "
                             f"{ws.root / 'teamd.log'}")
        tasks = board.list_tasks(ws, TEAM)
        return bool(tasks) and all(t["status"] == "completed" for t in tasks)

    if not wait_for([ws.team_dir(TEAM), ws.tasks_dir(TEAM)], finished, timeout):
        raise TeamdError(f"the team did not finish within {timeout:g}s")


def _summary(ws: Workspace, root: Path) -> None:
    rel = os.path.relpath(root)
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
