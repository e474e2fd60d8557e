#!/usr/bin/env python3
"""Task claims per second with 32 racing processes, and how many tasks got two owners.

A board of pending, unblocked tasks; 32 processes race to claim until nothing is left,
each noting the ids it was told it got. Claims per second = tasks claimed / time until the
last racer is done; a double claim is a task that more than one racer was told is theirs.

Ours: `teamd.board.claim` of each task in turn, lowest id first (the board lock, the re-check
under it, an atomic fsynced write) — every racer on the same task at once. Spread: the same
claims, each racer beginning at its own share of the ids and going round.
Baseline: the seeds' scan-then-write (bench/baselines/seed_board.py): scan the board, take
the first unclaimed task, update it under a lock without looking again. Same board files,
reset between rounds; rounds interleaved so both see the same machine.

On PostgreSQL (CONTRACT §15): the same `board.claim` by the same 32 racers against a
PostgreSQL store (a private cluster from the installed binaries, tests/postgres.py),
beside the files store's figure of the same run; the board reset between rounds through
the store. Where no PostgreSQL is installed that row says so instead of a figure.

("500 tasks to 10 idle members", teamd's own assignment, is bench/bench_assign.py.)

    python -m bench.bench_claims [--quick]
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.synchronize
import sys
import time
from collections import Counter
from collections.abc import Callable
from multiprocessing.connection import Connection

from bench.baselines import seed_board
from bench.common import Context, Row, figure, not_measured, row
from teamd import actions, board
from teamd.layout import Workspace
from teamd.records import Task

NAME = "claims"
TITLE = "task claims/s, 32 racers; double claims (board.claim vs scan-then-write)"
LIMIT = (150.0, 30.0)
RACERS = 32
TEAM = "bench"
MP = multiprocessing.get_context("fork")


def open_ids(ws: Workspace) -> list[int]:
    """The ids of the tasks still pending, lowest first (one read of the whole board)."""
    return [int(t["id"]) for t in board.list_tasks(ws, TEAM) if t["status"] == "pending"]


def racer(kind: str, ws: Workspace, index: int, racers: int,
          go: multiprocessing.synchronize.Barrier, out: Connection) -> None:
    """`ours`: every task in turn, lowest id first (all racers on the same task at once).
    `spread`: its own share of the ids first, then the board read again and what is still
    open tried in turn (racers meet only where one has finished its share)."""
    name = f"r{index:02d}"
    ids = open_ids(ws) if kind != "seed" else []  # the board as it is when the race starts
    go.wait()  # every racer ready (its connection open, the board read): all go at once
    got: list[int] = []
    if kind == "spread":
        share = ids[index * len(ids) // racers:(index + 1) * len(ids) // racers]
        got = [i for i in share if board.claim(ws, TEAM, name, i) is not None]
        ids = open_ids(ws)
    if kind in ("ours", "spread"):  # each task in turn: claimed, or someone's already
        got += [i for i in ids if board.claim(ws, TEAM, name, i) is not None]
    while kind == "seed":
        found = seed_board.claim(ws.store.paths.tasks_dir(TEAM), name)
        if found is None:
            break
        got.append(found)
    out.send(got)
    out.close()


def one_round(kind: str, ws: Workspace, reset: Callable[[], None],
              racers: int = RACERS) -> tuple[float, int, int]:
    """(claims per second, tasks claimed, double claims) of one race on a board `reset`
    makes fresh."""
    reset()
    go = MP.Barrier(racers + 1)
    pipes = [MP.Pipe(duplex=False) for _ in range(racers)]
    procs = [MP.Process(target=racer, args=(kind, ws, i, racers, go, pipes[i][1]))
             for i in range(racers)]
    for p in procs:
        p.start()
    go.wait(60)  # all started, the board read: the race is on
    start = time.monotonic()
    claims = [pipes[i][0].recv() for i in range(racers)]
    elapsed = time.monotonic() - start
    for p in procs:
        p.join(30)
    owners = Counter(t for got in claims for t in set(got))
    return len(owners) / elapsed, len(owners), sum(1 for n in owners.values() if n > 1)


def files_reset(ws: Workspace) -> Callable[[], None]:
    """Put the board's files back as they are now (the seeds' claim reads the files)."""
    fresh = {p: p.read_bytes() for p in ws.store.paths.tasks_dir(TEAM).glob("*.json")}

    def reset() -> None:
        for path, data in fresh.items():
            path.write_bytes(data)
    return reset


def store_reset(ws: Workspace) -> Callable[[], None]:
    """Put the board's tasks back as they are now, through the store."""
    fresh: list[Task] = list(board.list_tasks(ws, TEAM))

    def reset() -> None:
        with ws.store.board_unit(TEAM):
            for task in fresh:
                ws.store.write_task(TEAM, dict(task))
    return reset


def make_board(ws: Workspace, tasks: int) -> None:
    actions.create_team(ws, TEAM)
    for i in range(tasks):
        board.create(ws, TEAM, f"task {i}")


def race(ctx: Context, kinds: dict[str, tuple[Workspace, Callable[[], None]]], rounds: int
         ) -> tuple[dict[str, list[float]], dict[str, Counter[str]]]:
    rates: dict[str, list[float]] = {k: [] for k in kinds}
    counts: dict[str, Counter[str]] = {k: Counter() for k in kinds}
    for r in range(rounds):
        for kind, (ws, reset) in kinds.items():
            rate, claimed, doubles = one_round(kind.split("-")[0], ws, reset)
            rates[kind].append(rate)
            counts[kind].update(claimed=claimed, double_claims=doubles)
            ctx.progress(f"round {r + 1}: {kind} {rate:.0f} claims/s, {claimed} tasks, "
                         f"{doubles} double claims")
    return rates, counts


def postgres_cluster() -> tuple[object | None, str]:
    """A private PostgreSQL cluster (tests/postgres.py), or None and why there is none."""
    try:
        from tests.postgres import Cluster
        return Cluster.start(durable=True), ""
    except BaseException as exc:  # pytest's skip (no PostgreSQL) is a BaseException
        if isinstance(exc, KeyboardInterrupt):
            raise
        return None, " ".join(str(exc).split())[:200]


def run(ctx: Context) -> list[Row]:
    tasks = ctx.n(200, 20)
    rounds = ctx.n(3, 1)
    ws = Workspace.at(ctx.workdir / "ws")
    make_board(ws, tasks)
    kinds = {"ours": (ws, files_reset(ws)), "seed": (ws, files_reset(ws)),
             "spread": (ws, files_reset(ws))}
    cluster, why = postgres_cluster()
    try:
        if cluster is not None:
            from teamd.store.postgres import install_schema
            url = cluster.database()  # type: ignore[attr-defined]
            install_schema(url)
            pg = Workspace.at(ctx.workdir / "pg", store=url)
            make_board(pg, tasks)
            kinds["ours-postgres"] = (pg, store_reset(pg))
            kinds["spread-postgres"] = (pg, store_reset(pg))
        rates, counts = race(ctx, kinds, rounds)
    finally:
        if cluster is not None:
            cluster.stop()  # type: ignore[attr-defined]
    files_figure = figure("board.claim", "claims/s", rates["ours"], counts=dict(counts["ours"]))
    rows = [row(
        "claims", f"task claims/s, {RACERS} racing processes, {tasks} tasks",
        f"{RACERS} processes claim until the board is empty; {rounds} rounds each, "
        "interleaved, on a reset board; claimed = distinct tasks over all rounds, "
        "double claims = tasks more than one racer was told it owns.",
        files_figure,
        figure("scan-then-write", "claims/s", rates["seed"], counts=dict(counts["seed"])),
        better="higher")]
    pg_title = f"task claims/s on PostgreSQL, {RACERS} racing processes, {tasks} tasks"
    if "ours-postgres" not in rates:
        rows.append(not_measured("claims_postgres", pg_title, why, note="no PostgreSQL"))
        return rows
    rows.append(row(
        "claims_postgres", pg_title,
        "The same race with board.claim on the PostgreSQL store (a private cluster on a Unix "
        "socket, every commit fsynced) beside the files store's figure of this run; "
        f"{rounds} rounds each, interleaved. Every racer tries every task, lowest id first, "
        "so all of them are on the same task at once: one wins, the others lose after a "
        "look and a SKIP LOCKED, a few round trips each.",
        figure("board.claim, PostgreSQL", "claims/s", rates["ours-postgres"],
               counts=dict(counts["ours-postgres"])),
        figure("board.claim, files", "claims/s", rates["ours"], counts=dict(counts["ours"])),
        better="higher"))
    rows.append(row(
        "claims_postgres_spread",
        f"task claims/s on PostgreSQL, {RACERS} racers each from its own share, {tasks} tasks",
        "The same board.claim, each racer beginning at its own share of the ids and going "
        "round (they meet where one has finished its share), on PostgreSQL beside files; "
        f"{rounds} rounds each, interleaved with the rest.",
        figure("board.claim spread, PostgreSQL", "claims/s", rates["spread-postgres"],
               counts=dict(counts["spread-postgres"])),
        figure("board.claim spread, files", "claims/s", rates["spread"],
               counts=dict(counts["spread"])),
        better="higher"))
    return rows


if __name__ == "__main__":
    from bench.suite import standalone

    sys.exit(standalone(sys.modules[__name__]))
