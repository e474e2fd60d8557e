"""500 tasks to 10 idle teammates: teamd's assignment, end to end, and double claims.

Ours: 10 real teammates forked by `teamd run`, idle; 500 tasks added to the board (through
`teamd.board.create`, as `teamctl task add` does); teamd claims each for the teammate idle
longest and sends it `task_assigned`; the scripted model completes it with one `TaskUpdate`
and ends its turn, so the teammate is idle again for the next one. Figure: tasks completed
per second, from the first task added to the last completed (a turn is two model calls);
a double claim is a task with more than one `task_claimed` in the journal.
Baseline: 10 seed-design processes (scan-then-write, no re-check) claiming the same number
of tasks from a fresh board as fast as they can: claims only, no model turn, so it is a
ceiling for the design's claim rate and the row shows its double claims beside ours.

    python -m bench.bench_assign [--quick]
"""

from __future__ import annotations

import sys
import time
from collections import Counter

from bench import bench_claims
from bench.common import Context, Row, figure, row
from bench.lab import TEAM, Lab
from bench.scale import sub
from teamd import actions, board
from teamd.layout import Workspace
from tests.harness import wait_until

NAME = "assign"
TITLE = "500 tasks to 10 idle teammates: tasks/s end to end, double claims"
LIMIT = (240.0, 45.0)
MEMBERS = 10
#: the model completes the task it was handed, then ends its turn
FINISH = {"name": "finish", "regex": r"<auto-claimed>Task #(?P<tid>\d+)", "reply": {
    "content": [{"type": "tool_use", "name": "TaskUpdate",
                 "input": {"task_id": "{int:tid}", "status": "completed"}}]}}


def all_completed(ws: Workspace, ids: list[int]) -> bool:
    return all(board.get(ws, TEAM, i)["status"] == "completed" for i in ids[-MEMBERS:]) and \
        all(t["status"] == "completed" for t in board.list_tasks(ws, TEAM))


def ours(ctx: Context, tasks: int) -> tuple[float, int, int]:
    """(tasks completed per second, tasks completed, double claims) of one run."""
    with Lab(ctx) as lab:
        lab.server.add_rule(FINISH, first=True)
        names = [f"m{i:02d}" for i in range(MEMBERS)]
        for name in names:
            lab.spawn(name, f"You are {name}. Wait for tasks.")
        lab.wait_idle(names, 60)
        start = time.monotonic()
        ids = [int(board.create(lab.ws, TEAM, f"task {i}")["id"]) for i in range(tasks)]
        wait_until(lambda: all_completed(lab.ws, ids), max(10.0, ctx.left() - 20),
                   f"{tasks} tasks completed", interval=0.05)
        elapsed = time.monotonic() - start
        journal = lab.ws.store.read_journal(TEAM)
    claims = Counter(r["task_id"] for r in journal if r.get("event") == "task_claimed")
    return tasks / elapsed, tasks, sum(1 for n in claims.values() if n > 1)


def run(ctx: Context) -> list[Row]:
    tasks = ctx.n(500, 30)
    rounds = ctx.n(3, 1)
    rates: dict[str, list[float]] = {"ours": [], "seed": []}
    counts: dict[str, Counter[str]] = {"ours": Counter(), "seed": Counter()}
    seed_ws = Workspace.at(ctx.workdir / "seed-board")
    actions.create_team(seed_ws, TEAM)
    for i in range(tasks):
        board.create(seed_ws, TEAM, f"task {i}")
    fresh = bench_claims.files_reset(seed_ws)
    for r in range(rounds):
        rate, done, doubles = ours(sub(ctx, f"ours-{r}"), tasks)
        rates["ours"].append(rate)
        counts["ours"].update(completed=done, double_claims=doubles)
        seed_rate, claimed, seed_doubles = bench_claims.one_round("seed", seed_ws, fresh,
                                                                  racers=MEMBERS)
        rates["seed"].append(seed_rate)
        counts["seed"].update(claimed=claimed, double_claims=seed_doubles)
        ctx.progress(f"round {r + 1}: teamd {rate:.0f} tasks/s ({doubles} double claims); "
                     f"scan-then-write {seed_rate:.0f} claims/s ({seed_doubles} double)")
    return [row(
        "assign", f"{tasks} tasks to {MEMBERS} idle teammates",
        f"Ours: teamd assigns each task to the teammate idle longest and the scripted model "
        f"completes it in one turn (two model calls): tasks completed per second, from the "
        f"first added to the last completed. Baseline: {MEMBERS} scan-then-write processes "
        f"claiming the same {tasks} tasks with no model turn (claims/s). {rounds} rounds; "
        "double claims = tasks claimed more than once.",
        figure("teamd assignment (end to end)", "tasks/s", rates["ours"],
               counts=dict(counts["ours"])),
        figure("scan-then-write (claims only)", "claims/s", rates["seed"],
               counts=dict(counts["seed"])),
        better="higher", compare=False,
        note="different work: ours includes every model turn; compare the double claims")]


if __name__ == "__main__":
    from bench.suite import standalone

    sys.exit(standalone(sys.modules[__name__]))
