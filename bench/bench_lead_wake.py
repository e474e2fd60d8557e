#!/usr/bin/env python3
"""What `lead_wake_on_idle = "quiet"` saves an LLM lead (issue 12's measurement).

The seeds' scenario (`teamctl demo`: the REST → GraphQL migration, four chained tasks worked
by analyst, backend and frontend) with an LLM lead, under a real `teamd run`, the real
`anthropic` SDK over real HTTP and the scripted model (the demo's own rules; the lead answers
"Done for now"). Each teammate tells the lead when it finishes a task (a message: it wakes
the lead at once either way) and goes idle when the chain has nothing for it (an idle
notification: with `each` it wakes the lead, with `quiet` only once no teammate works). A
run ends when every task is completed and the team has settled. Prints, per mode, the lead's
model calls and the input tokens they carried (input + cache read + cache write, as the
scripted server estimates them from the conversation), over a few runs.

    python -m bench.bench_lead_wake [--runs 3] [--keep]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from pathlib import Path

from teamctl import demo
from teamd import actions, board, events, files, inbox, prices, roster
from teamd.layout import LEAD, Workspace
from teamd.scripted import ScriptedServer
from tests.harness import running_teamd, wait_until

TEAM = demo.TEAM
LEAD_PROMPT = ("Lead the REST to GraphQL migration: the tasks are on the board and your "
               "teammates take them; follow their progress.")


def settled(ws: Workspace) -> bool:
    """Every task completed, everyone idle, and the lead has answered all its mail."""
    tasks = board.list_tasks(ws, TEAM)
    if not tasks or any(t["status"] != "completed" for t in tasks):
        return False
    config = roster.load(ws, TEAM)
    if any(m["status"] != "idle" for m in config["members"]):
        return False
    if inbox.peek(ws, TEAM, LEAD):
        return False
    records = ws.store.read_session(TEAM, LEAD)
    return bool(records) and records[-1]["type"] == "assistant"


def one_run(base: Path, mode: str, n: int) -> tuple[int, int]:
    """The lead's model calls and input tokens in one run of the scenario."""
    root = base / f"{mode}-{n}"
    files.ensure_dir(root)
    ws = Workspace.at(root)
    work = files.ensure_dir(root / "work")
    actions.create_team(ws, TEAM, "Migrate the app from REST to GraphQL")
    previous: list[int] = []
    for subject, description in demo.TASKS:
        previous = [board.create(ws, TEAM, subject, description, previous)["id"]]
    actions.spawn(ws, TEAM, LEAD, LEAD_PROMPT, lead=True, cwd=str(work))
    for name, role, prompt in demo.MEMBERS:
        actions.spawn(ws, TEAM, name, prompt + demo.WORKFLOW, role=role, cwd=str(work))
    with ScriptedServer(demo.scenario()) as server, \
            running_teamd(ws, server.url, lead_wake_on_idle=mode, idle_timeout=300):
        wait_until(lambda: settled(ws), 180, f"the {mode} run to settle", interval=0.05)
    calls = [e for e in events.read(ws, TEAM, LEAD)
             if e.get("event") == "model_call" and not e.get("error")]
    tokens = sum(prices.input_tokens(e) for e in calls)
    return len(calls), tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per mode")
    parser.add_argument("--keep", action="store_true", help="keep the workspaces")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-lead-wake-", dir=Path.cwd()))
    results: dict[str, list[tuple[int, int]]] = {}
    try:
        for mode in ("quiet", "each"):
            results[mode] = [one_run(base, mode, n) for n in range(args.runs)]
    finally:
        if args.keep:
            print(f"workspaces kept in {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    print(f"the seeds' scenario with an LLM lead: 4 chained tasks, 3 teammates, "
          f"{args.runs} run(s) per mode")
    print(f"{'lead_wake_on_idle':18} {'lead calls':>12} {'lead input tokens':>18}   runs")
    for mode, rows in results.items():
        calls = [c for c, _ in rows]
        tokens = [t for _, t in rows]
        print(f"{mode:18} {statistics.mean(calls):12.1f} {statistics.mean(tokens):18,.0f}   "
              f"{', '.join(f'{c} calls/{t:,} tok' for c, t in rows)}")
    quiet, each = (statistics.mean(t for _, t in results[m]) for m in ("quiet", "each"))
    if each:
        print(f"quiet saves {1 - quiet / each:.0%} of the lead's input tokens")


if __name__ == "__main__":
    main()
