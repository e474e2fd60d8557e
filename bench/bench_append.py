#!/usr/bin/env python3
"""Inbox appends per second with 16 writer processes, and what the reader got.

16 writer processes append messages to one inbox as fast as they can for a few seconds
while the inbox's owner drains it every 5 ms, as a busy teammate would. Messages are mostly
small, one in five 4 KiB and one in twenty 64 KiB (the contract allows 256 KiB). Afterwards
every message a writer wrote is looked for in what the reader took: lost (never taken),
duplicated (taken twice), torn (a line that was not a whole message).

Ours: `teamd.files.append_jsonl` (flock, one write, fsync when durable) and
`teamd.inbox.drain` (read, hand over, truncate, under the same lock).
Baseline: the seeds' `O_CREAT|O_EXCL` lock file, 50 tries 50 ms apart, then a write without
the lock; read = read all then clear, unlocked (bench/baselines/seed_inbox.py). Its reader
skips a line it cannot parse (the seeds' would raise) and carries on.

    python -m bench.bench_append [--quick]
"""

from __future__ import annotations

import json
import multiprocessing
import multiprocessing.synchronize
import sys
import time
from collections import Counter
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from bench.baselines import seed_inbox
from bench.common import Context, Row, figure, row
from teamd import files, inbox
from teamd.files import Json

NAME = "append"
TITLE = "inbox appends/s, 16 writers, fsync on and off (flock vs O_EXCL lock file)"
LIMIT = (150.0, 30.0)
WRITERS = 16
READ_EVERY = 0.005
MP = multiprocessing.get_context("fork")


def message(writer: int, seq: int) -> Json:
    size = 65536 if seq % 20 == 0 else 4096 if seq % 5 == 0 else 120
    return {"id": f"{writer}-{seq}", "type": "message", "sender": f"w{writer}",
            "recipient": "reader", "content": "x" * size, "timestamp": time.time()}


def writer(kind: str, path: Path, wid: int, fsync: bool, seconds: float,
           go: multiprocessing.synchronize.Event, out: Connection) -> None:
    go.wait()
    end = time.monotonic() + seconds
    seq = 0
    while time.monotonic() < end:
        msg = message(wid, seq)
        if kind == "ours":
            files.append_jsonl(path, [msg], durable=fsync)
        else:
            seed_inbox.write_to_inbox(path, msg, fsync=fsync)
        seq += 1
    out.send(seq)
    out.close()


def read_seed(path: Path) -> tuple[list[str], int]:
    """The seeds' read_inbox, counting what it cannot parse instead of raising on it."""
    if not path.exists():
        return [], 0
    ids, torn = [], 0
    for line in path.read_text().strip().splitlines():
        if not line:
            continue
        try:
            ids.append(str(json.loads(line)["id"]))
        except (ValueError, KeyError, TypeError):
            torn += 1
    path.write_text("")  # drain
    return ids, torn


def reader(kind: str, path: Path, stop: multiprocessing.synchronize.Event,
           out: Connection) -> None:
    got: list[str] = []
    torn = 0

    def take() -> None:
        nonlocal torn
        if kind == "ours":
            inbox_ids: list[str] = []
            files.drain_lines(path, lambda batch: inbox_ids.extend(str(m["id"]) for m in batch),
                              inbox.judge())
            got.extend(inbox_ids)
        else:
            ids, bad = read_seed(path)
            got.extend(ids)
            torn += bad

    while not stop.is_set():
        take()
        time.sleep(READ_EVERY)
    take()  # the writers are done: what is left
    if kind == "ours":  # the drain moved any torn or bad line aside rather than handing it
        torn += len(files.read_jsonl(files.rejected_path(path)).records)
    out.send((got, torn))
    out.close()


def one_round(kind: str, folder: Path, fsync: bool, seconds: float) -> tuple[float, Counter[str]]:
    """(appends per second, counts) of one round of WRITERS writers and one reader."""
    path = folder / "reader_inbox.jsonl"
    for old in folder.iterdir():
        old.unlink()
    path.touch()
    go, stop = MP.Event(), MP.Event()
    pipes = [MP.Pipe(duplex=False) for _ in range(WRITERS + 1)]
    procs = [MP.Process(target=writer, args=(kind, path, w, fsync, seconds, go, pipes[w][1]))
             for w in range(WRITERS)]
    procs.append(MP.Process(target=reader, args=(kind, path, stop, pipes[WRITERS][1])))
    for p in procs:
        p.start()
    time.sleep(0.2)  # all of them started and waiting
    start = time.monotonic()
    go.set()
    written = [pipes[w][0].recv() for w in range(WRITERS)]
    elapsed = time.monotonic() - start
    stop.set()
    got, torn = pipes[WRITERS][0].recv()
    for p in procs:
        p.join(30)
    expected = {f"{w}-{s}" for w in range(WRITERS) for s in range(written[w])}
    seen = Counter(got)
    counts: Counter[str] = Counter(
        lost=len(expected - set(seen)), duplicated=sum(n - 1 for n in seen.values() if n > 1),
        torn=torn, written=sum(written))
    return sum(written) / elapsed, counts


def tally(result: tuple[list[float], Counter[str]], label: str) -> dict[str, Any]:
    rates, total = result
    return figure(label, "appends/s", rates,
                  counts={k: total[k] for k in ("lost", "duplicated", "torn", "written")})


def run(ctx: Context) -> list[Row]:
    rounds = ctx.n(3, 1)
    seconds = ctx.seconds(3.0, 0.3)
    folder = ctx.workdir / "inbox"
    files.ensure_dir(folder)
    rows = []
    for fsync in (True, False):
        results: dict[str, tuple[list[float], Counter[str]]] = {}
        for r in range(rounds):
            for kind in ("ours", "seed"):  # interleaved: both see the same machine
                rate, counts = one_round(kind, folder, fsync, seconds)
                rates, total = results.setdefault(kind, ([], Counter()))
                rates.append(rate)
                total.update(counts)
                ctx.progress(f"fsync {'on' if fsync else 'off'}, round {r + 1}: {kind} "
                             f"{rate:.0f}/s, {dict(counts)}")

        on = "on" if fsync else "off"
        rows.append(row(
            f"append_fsync_{on}", f"inbox appends/s, {WRITERS} writer processes, fsync {on}",
            f"{WRITERS} processes append for {seconds:g} s while the owner drains every "
            f"{READ_EVERY * 1000:g} ms; {rounds} rounds each, interleaved; lost, duplicated "
            "and torn counted over all rounds against every message written.",
            tally(results["ours"], "flock + one write"),
            tally(results["seed"], "O_EXCL lock file, fall-through"),
            better="higher"))
    return rows


if __name__ == "__main__":
    from bench.suite import standalone

    sys.exit(standalone(sys.modules[__name__]))
