"""What the store contract tests share: a team made through the interface, and workers run
in forked processes (the promises about concurrency are kept across processes, not threads).

A worker is a plain function; it gets the store its parent had (a store survives a fork:
one that holds a connection opens its own in the child) and returns a picklable result,
put on a queue, so the test reads what every worker did without a file of its own.
"""

from __future__ import annotations

import multiprocessing
import queue
from collections.abc import Callable, Sequence
from typing import Any

from teamd import budget, roster
from teamd.store.api import Store

ctx = multiprocessing.get_context("fork")


def new_team(store: Store, team: str = "t") -> str:
    """Make `team` through the store, as `teamctl create` does."""
    assert store.create_team(team, roster.new_roster(team, ""), budget.new_spend())
    return team


def _run(target: Callable[..., Any], args: tuple[Any, ...], out: Any, index: int) -> None:
    try:
        out.put((index, "ok", target(*args)))
    except BaseException as exc:  # reported to the test, which fails naming it
        out.put((index, "error", f"{type(exc).__name__}: {exc}"))


def start(target: Callable[..., Any], argsets: Sequence[tuple[Any, ...]]
          ) -> tuple[list[Any], Any]:
    """Start one forked worker per tuple of `argsets`; (the processes, their results queue)."""
    out = ctx.Queue()
    procs = [ctx.Process(target=_run, args=(target, args, out, i))
             for i, args in enumerate(argsets)]
    for p in procs:
        p.start()
    return procs, out


def results(procs: list[Any], out: Any, timeout: float = 60) -> list[Any]:
    """Every worker's result, in the order started; fails if one raised or is stuck."""
    got: dict[int, Any] = {}
    try:
        while len(got) < len(procs):
            index, how, value = out.get(timeout=timeout)
            assert how == "ok", f"worker {index} failed: {value}"
            got[index] = value
    except queue.Empty:
        raise AssertionError(f"workers still running after {timeout}s: "
                             f"{sorted(set(range(len(procs))) - set(got))}") from None
    finally:
        for p in procs:
            p.join(5)
            if p.exitcode is None:
                p.kill()
                p.join(5)
    return [got[i] for i in range(len(procs))]


def run(target: Callable[..., Any], argsets: Sequence[tuple[Any, ...]],
        timeout: float = 60) -> list[Any]:
    """Run the workers at once and wait for all: their results, in order."""
    return results(*start(target, argsets), timeout=timeout)


def race(target: Callable[..., Any], argsets: Sequence[tuple[Any, ...]],
         timeout: float = 60) -> list[Any]:
    """`run`, with every worker let go at the same moment: each gets a last argument, an
    event to wait on (`go.wait(30)`) before it does what races."""
    go = ctx.Event()
    procs, out = start(target, [(*args, go) for args in argsets])
    go.set()
    return results(procs, out, timeout=timeout)
