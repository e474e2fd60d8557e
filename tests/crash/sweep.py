"""The crash sweep's engine (CONTRACT §17): run a scenario once with a crash log to count the
durable writes of each process that writes (`teamd`, a teammate, the LLM lead, each `teamctl`
command), then once per point — just before write N, just after it — with that process set
to kill itself there; let the supervisor restart what it should and run a crashed `teamd` or
`teamctl` again, as systemd or a person would; then check the invariants (`invariants.py`).

A scenario (`scenarios.py`) is a function of a `World`: it runs its `teamctl` steps through
`World.teamctl` (a crashed step is run again), waits with `World.wait` (a crashed `teamd`
is started again), and returns what the invariants need. The engine is shared by the test
(`test_sweep.py`, a sample of points by default; every point with `-m crash_full` or
`TEAMD_CRASH_SWEEP=full`) and the benchmark (`python -m bench --only crash`).

A run's records live in the store its `SweepStore` gives (CONTRACT §15): the files under
the run's root (`FILES`), or a fresh PostgreSQL database per run
(`SweepStore.on_postgres`), which `teamd`, its members and every `teamctl` step are told
(`--store`), so the same scenarios and invariants hold the PostgreSQL store to the same
promises.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teamd import crashpoints
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests import harness, postgres
from tests.faults.faultkit import Sent
from tests.harness import Teamd

T = 60.0  #: generous: two cores shared by many test runs
TEAMCTL = "teamctl"


@dataclass(frozen=True)
class Point:
    """Where one run crashes: the process (`teamd`, a member's name, or `teamctl:STEP`),
    its durable write `n`, and whether just `after` it (else just before)."""

    who: str
    n: int
    after: bool

    def __str__(self) -> str:
        return f"{self.who}@{'after:' if self.after else ''}{self.n}"


@dataclass(frozen=True)
class SweepStore:
    """Where each run of a sweep keeps its records: the files under its root (no
    `cluster`), or a fresh database of `cluster` per run (a copy of the template that
    holds the schema), dropped once the run is over."""

    name: str = "files"
    cluster: postgres.Cluster | None = None

    @classmethod
    def on_postgres(cls, cluster: postgres.Cluster) -> SweepStore:
        return cls("postgres", cluster)

    @contextmanager
    def fresh(self) -> Iterator[str | None]:
        """A run's store: None for the files, else a new database's URL."""
        if self.cluster is None:
            yield None
            return
        url = self.cluster.database()
        try:
            yield url
        finally:
            self.cluster.drop(url)


FILES = SweepStore()


@dataclass
class Outcome:
    """What one run of a scenario did: the point aimed at, whether it fired there, the
    invariants checked and the violations found (empty: none)."""

    point: Point | None
    fired: bool
    checks: int
    violations: list[str]
    seconds: float


class World:
    """One run's workspace, model server, crash log and supervisor."""

    def __init__(self, root: Path, script: dict[str, Any], point: Point | None,
                 settings: dict[str, Any] | None = None, store: str | None = None) -> None:
        self.root = root
        (root / "ws").mkdir(parents=True, exist_ok=True)
        # `teamd run --store` (the harness passes it) tells its members; teamctl `--store`
        self.ws = Workspace.at(root / "ws", store=store)
        self.workdir = root / "work"
        self.workdir.mkdir(exist_ok=True)
        self.log = root / "crash.jsonl"
        self.point = point
        self.server = ScriptedServer(script, log_path=root / "requests.jsonl").start()
        self.settings = {"backoff_initial": 0.05, "backoff_max": 0.2, "idle_timeout": 600,
                         "stop_timeout": 5, **(settings or {})}
        self.daemon: Teamd | None = None
        self.daemons = 0
        self.steps: dict[int, str] = {}  # teamctl pid → its step's name
        self.team = harness.TEAM
        self.sent: list[Sent] = []  # messages to be shown to a model exactly once
        self.replies: list[str] = []  # tokens a model sends once, to reach the journal once
        self.found: list[str] = []  # violations a scenario found itself (its own invariant)

    # -- the crash variables -------------------------------------------------------------
    def crash_env(self, who: str) -> dict[str, str]:
        """The variables a process started as `who` gets: always the log; the crash only
        for the process the point names."""
        env = {crashpoints.LOG: str(self.log)}
        p = self.point
        if p is not None and (p.who == who or (who == "teamd" and not p.who.startswith(
                f"{TEAMCTL}:"))):
            env[crashpoints.AT] = f"{'after:' if p.after else ''}{p.n}"
            # teamd hands the variables to the members it forks; WHO aims them
            env[crashpoints.WHO] = TEAMCTL if p.who.startswith(f"{TEAMCTL}:") else p.who
        return env

    def fired(self) -> bool:
        return crashpoints.fired(self.log)

    # -- teamd ---------------------------------------------------------------------------
    def start(self) -> None:
        """Start `teamd` (again, after a crash: the log's `fired` line disarms it)."""
        env = harness.teamd_env(self.server.url, **self.settings)
        env.update(self.crash_env("teamd"))
        for _ in range(3):
            self.daemons += 1
            try:
                self.daemon = Teamd(self.ws, env, self.root / f"teamd-{self.daemons}.log")
                return
            except AssertionError:
                if not self.fired():
                    raise  # it died of something else: the run fails
        raise AssertionError("teamd would not start after its crash")

    def revive(self) -> None:
        """A `teamd` killed by its crash point is started again, as systemd would."""
        if self.daemon is not None and self.daemon.proc.poll() is not None:
            self.daemon.log.close()
            self.start()

    def stop(self) -> None:
        """Stop `teamd`; one killed by its crash point on the way out is started again
        and stopped (as systemd would start it again), so its start puts right what the
        crash left."""
        if self.daemon is not None:
            self.daemon.stop()
            killed = self.daemon.proc.returncode == -signal.SIGKILL
            self.daemon = None
            if killed and self.fired():
                self.start()
                pid = self.daemon.pid if self.daemon is not None else None
                if self.ws.store.team_exists(self.team):  # its start has run (and mended)
                    harness.wait_until(lambda: any(
                        e["event"] == "supervisor_started" and e.get("pid") == pid
                        for e in harness.journal(self.ws, self.team)), T, "teamd started")
                self.stop()
        harness.reap_leftovers(self.ws)

    # -- teamctl -------------------------------------------------------------------------
    def teamctl(self, step: str, *args: str, ok: tuple[int, ...] = (0,),
                again: tuple[int, ...] = ()) -> str:
        """`teamctl --root WS ARGS` as its own process, named `step` for the points; one
        killed by its crash point is run again (as a person would), once, which may also
        exit with a code of `again` (2: what it asked is done already)."""
        env = dict(os.environ)
        env.update(self.crash_env(f"{TEAMCTL}:{step}"))
        store = ["--store", self.ws.store_url] if self.ws.store_url else []
        cmd = [sys.executable, "-c", "from teamctl.cli import main; main()",
               "--root", str(self.ws.root), *store, *args]
        for attempt in range(2):
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, cwd=self.root)
            self.steps[proc.pid] = step
            out, err = proc.communicate(timeout=T)
            if proc.returncode == -signal.SIGKILL and self.fired() and attempt == 0:
                continue
            if proc.returncode not in (ok if attempt == 0 else (*ok, *again)):
                raise AssertionError(f"teamctl {' '.join(args)} exited {proc.returncode}: "
                                     f"{err.decode(errors='replace').strip()}")
            return out.decode()
        raise AssertionError("unreachable")

    # -- waiting -------------------------------------------------------------------------
    def wait(self, check: Callable[[], Any], what: str, timeout: float = T) -> Any:
        """`check()`'s first truthy value, reviving a crashed `teamd` meanwhile."""
        def step() -> Any:
            self.revive()
            return check()
        return harness.wait_until(step, timeout, what, interval=0.02)

    # -- the log -------------------------------------------------------------------------
    def writes(self) -> list[dict[str, Any]]:
        try:
            lines = self.log.read_bytes().splitlines()
        except FileNotFoundError:
            return []
        return [r for r in (json.loads(line) for line in lines) if "n" in r]

    def close(self) -> None:
        try:
            self.stop()
        finally:
            self.server.stop()


Scenario = Callable[[World], None]


@dataclass
class Spec:
    """A scenario: its name, its model script, its body, its settings, and the process
    kinds it sweeps (None: every process kind that wrote in the counting run)."""

    name: str
    script: Callable[[], dict[str, Any]]
    body: Scenario
    settings: dict[str, Any] = field(default_factory=dict)
    kinds: tuple[str, ...] | None = None


@contextmanager
def world(root: Path, spec: Spec, point: Point | None, store: SweepStore = FILES
          ) -> Iterator[World]:
    with store.fresh() as url:
        w = World(root, spec.script(), point, spec.settings, url)
        try:
            yield w
        finally:
            w.close()


#: each scenario's writes in its last counting run on each store, as (process, log line),
#: by `counted`: `aim` reads them instead of counting again
COUNTED: dict[str, list[tuple[str, dict[str, Any]]]] = {}


def counted(name: str, store: SweepStore = FILES) -> str:
    """The key of scenario `name`'s counting run on `store` in COUNTED."""
    return name if store.cluster is None else f"{name}@{store.name}"


def _writes_by_process(w: World) -> list[tuple[str, dict[str, Any]]]:
    """The log's writes, each with its process (`teamctl:STEP` for a command)."""
    out = []
    for rec in w.writes():
        who = rec.get("who") or "?"
        if who == TEAMCTL:
            who = f"{TEAMCTL}:{w.steps.get(rec['pid'], '?')}"
        out.append((who, rec))
    return out


def run_once(root: Path, spec: Spec, point: Point | None, store: SweepStore = FILES
             ) -> tuple[Outcome, dict[str, int]]:
    """Run `spec` once on `store`, crashing at `point` (None: the counting run); its
    outcome and, per process, how many durable writes it made (`teamctl:STEP` for a
    command)."""
    from tests.crash import invariants

    start = time.monotonic()
    with world(root, spec, point, store) as w:
        spec.body(w)
        violations = invariants.check(w)
        writes = _writes_by_process(w)
        counts: dict[str, int] = {}
        for who, rec in writes:
            counts[who] = max(counts.get(who, 0), int(rec["n"]))
        if point is None:
            COUNTED[counted(spec.name, store)] = writes
        outcome = Outcome(point, w.fired(), invariants.COUNT, violations,
                          time.monotonic() - start)
    return outcome, counts


def aim(tmp: Path, spec: Spec, who: str, path_end: str, after: bool, nth: int = 1, *,
        fresh: bool = False, store: SweepStore = FILES) -> Point:
    """The point of `who`'s `nth` durable write to a path ending in `path_end` (-1: its
    last), in the scenario's last counting run on `store` (`fresh`, or none yet: a new
    one). A write's number may shift between runs; what it writes does not: the caller
    checks where its crash fired."""
    key = counted(spec.name, store)
    if fresh or key not in COUNTED:
        run_once(tmp, spec, None, store)
    hits = [rec for w, rec in COUNTED[key] if w == who and rec["path"].endswith(path_end)]
    assert len(hits) >= abs(nth), f"{who} made {len(hits)} write(s) to *{path_end}"
    return Point(who, int(hits[nth - 1 if nth > 0 else nth]["n"]), after)


def points_of(counts: dict[str, int], kinds: tuple[str, ...] | None) -> list[Point]:
    """Every point of the counting run: before and after each write of each process."""
    return [Point(who, n, after) for who, total in sorted(counts.items())
            if who != "?" and (kinds is None or who.split(":")[0] in kinds or who in kinds)
            for n in range(1, total + 1) for after in (False, True)]


def sample(points: list[Point], k: int, seed: str) -> list[Point]:
    """`k` points spread over the processes that write (one each in turn), each chosen at
    random among that process's points — the same way each time for the same scenario."""
    if len(points) <= k:
        return points
    rng = random.Random(seed)
    by_who: dict[str, list[Point]] = {}
    for p in points:
        by_who.setdefault(p.who, []).append(p)
    whos = sorted(by_who)
    rng.shuffle(whos)
    chosen: list[Point] = []
    turn = 0
    while len(chosen) < k:  # k < len(points): some process always has a point left
        pool = [p for p in by_who[whos[turn % len(whos)]] if p not in chosen]
        if pool:
            chosen.append(rng.choice(pool))
        turn += 1
    return chosen


@dataclass
class Report:
    """A scenario's sweep: its writes per process, the points tried, and what each found."""

    name: str
    counts: dict[str, int]
    outcomes: list[Outcome]
    seconds: float
    planned: int = 0  # the points there were to try

    @property
    def writes(self) -> int:
        return sum(self.counts.values())

    @property
    def fired(self) -> int:
        return sum(o.fired for o in self.outcomes if o.point is not None)

    @property
    def checks(self) -> int:
        return sum(o.checks for o in self.outcomes)

    @property
    def violations(self) -> list[str]:
        return [f"{o.point}: {v}" for o in self.outcomes for v in o.violations]


def sweep(tmp: Path, spec: Spec, limit: int | None,
          stop: Callable[[], bool] = lambda: False, store: SweepStore = FILES) -> Report:
    """The counting run, then a run per point (`limit`: a sample of that many), until
    `stop()` says the time is up (the report says how many points were tried), each on
    `store`."""
    start = time.monotonic()
    first, counts = run_once(tmp / "count", spec, None, store)
    points = points_of(counts, spec.kinds)
    if limit is not None:
        points = sample(points, limit, spec.name)
    outcomes = [first]
    for i, p in enumerate(points):
        if stop():
            break
        outcome, _ = run_once(tmp / f"p{i:03d}", spec, p, store)
        outcomes.append(outcome)
    name = spec.name if store.cluster is None else f"{spec.name} on {store.name}"
    return Report(name, counts, outcomes, time.monotonic() - start, len(points))
