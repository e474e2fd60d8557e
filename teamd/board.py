"""The shared task board's rules (CONTRACT.md section 5): tasks, their dependencies, who
may claim what.

Every change is one unit of the board (`Store.board_unit`), ids come from the store
(`next_task_id`: never handed out twice nor reused), tasks are read and written one at a
time through it (the files: `.tasks/{team}/{id}.json`). `blocked_by` is the authoritative
side of a dependency; `blocks` is kept in step.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, cast

from teamd import events, roster
from teamd.errors import BadInput
from teamd.files import Json
from teamd.layout import Workspace
from teamd.records import Task
from teamd.store.errors import BadRecord

log = logging.getLogger(__name__)

STATUSES = ("pending", "in_progress", "completed")
UNSET: Any = object()  # "leave the owner alone", distinct from None ("no owner")


class NotHolder(BadInput):
    """`update(holder=…)` found the task owned by someone else (CONTRACT §8)."""

    def __init__(self, task_id: int, owner: str) -> None:
        super().__init__(f"task #{task_id} belongs to {owner}")
        self.owner = owner


@contextmanager
def locked(ws: Workspace, team: str) -> Iterator[None]:
    """The board's unit of work; BadInput naming the teams there when there is no board."""
    if not ws.store.board_exists(team):
        raise roster.unknown_team(ws, team)
    with ws.store.board_unit(team):
        yield


def read(ws: Workspace, team: str, task_id: int) -> Task | None:
    """The one reader of a task: task `task_id`, or None when it is missing or not a task
    (a hand edit, said in the log: tasks are written whole, so it is never a torn write)."""
    try:
        return cast(Task | None, ws.store.read_task(team, task_id))
    except BadRecord as exc:
        log.error("%s: skipped, not a task (%s)", exc.where, exc.why)
        return None


class _Board(Mapping[int, Task]):
    """The board as a mapping id → task that reads each task file only when first asked
    for it, so a change reads the tasks it touches, not the whole board (CONTRACT §5).
    Iterating it lists the ids and reads every task one by one: readers that want all
    use `read_all` (one read of the whole board)."""

    def __init__(self, ws: Workspace, team: str) -> None:
        self._ws, self._team = ws, team
        self._seen: dict[int, Task | None] = {}

    def _get(self, task_id: int) -> Task | None:
        if task_id not in self._seen:
            self._seen[task_id] = read(self._ws, self._team, task_id)
        return self._seen[task_id]

    def put(self, task: Task) -> None:
        """A task made in this change, not on disk yet."""
        self._seen[int(task["id"])] = task

    def __getitem__(self, task_id: int) -> Task:
        task = self._get(task_id)
        if task is None:
            raise KeyError(task_id)
        return task

    def __contains__(self, task_id: object) -> bool:
        return isinstance(task_id, int) and self._get(task_id) is not None

    def __iter__(self) -> Iterator[int]:
        return (tid for tid in self._ws.store.task_ids(self._team) if tid in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def read_all(ws: Workspace, team: str) -> dict[int, Task]:
    """Every readable task, in id order, read at once (a bad one is reported and skipped)."""
    return {int(task["id"]): cast(Task, task) for task in ws.store.read_tasks(team)}


def list_tasks(ws: Workspace, team: str) -> list[Json]:
    """Every task, in id order. (Typed `Json`, not `Task`, while the teammate's loop and
    the supervisor read it as such.)"""
    if not ws.store.board_exists(team):
        raise roster.unknown_team(ws, team)
    return cast(list[Json], list(read_all(ws, team).values()))


def get(ws: Workspace, team: str, task_id: int) -> Json:
    """Task `task_id`. (Typed `Json`, not `Task`, while the teammate's loop reads it as
    such.)"""
    task = ws.store.read_task(team, task_id)
    if task is None:
        if not ws.store.board_exists(team):
            raise roster.unknown_team(ws, team)
        raise BadInput(f"unknown task #{task_id} in team {team!r}")
    return task


def _save(ws: Workspace, team: str, task: Task) -> None:
    task["updated_at"] = time.time()
    ws.store.write_task(team, cast(Json, task))


def _depends_on(tasks: Mapping[int, Task], start: int, target: int) -> bool:
    """Does `start` (transitively) wait on `target` through blocked_by?"""
    stack, seen = [start], set()
    while stack:
        tid = stack.pop()
        if tid == target:
            return True
        if tid in seen or tid not in tasks:
            continue
        seen.add(tid)
        stack.extend(int(b) for b in tasks[tid]["blocked_by"])
    return False


def _check_edges(tasks: Mapping[int, Task], task_id: int, blockers: Iterable[int],
                 dependents: Iterable[int]) -> list[tuple[int, int]]:
    """Validate new edges (waiter, blocker) and return them; refuse a cycle or a missing task."""
    edges = [(task_id, int(b)) for b in blockers] + [(int(d), task_id) for d in dependents]
    for waiter, blocker in edges:
        for tid in (waiter, blocker):
            if tid not in tasks:
                raise BadInput(f"unknown task #{tid}")
        if waiter == blocker:
            raise BadInput(f"task #{waiter} cannot be blocked by itself")
        if _depends_on(tasks, blocker, waiter):
            raise BadInput(f"task #{waiter} blocked by #{blocker} would make a cycle")
    return edges


def _link(tasks: Mapping[int, Task], edges: list[tuple[int, int]]) -> set[int]:
    changed = set()
    for waiter, blocker in edges:
        if blocker not in tasks[waiter]["blocked_by"]:
            tasks[waiter]["blocked_by"] = sorted([*tasks[waiter]["blocked_by"], blocker])
            changed.add(waiter)
        if waiter not in tasks[blocker]["blocks"]:
            tasks[blocker]["blocks"] = sorted([*tasks[blocker]["blocks"], waiter])
            changed.add(blocker)
    return changed


def create(ws: Workspace, team: str, subject: str, description: str = "",
           blocked_by: Iterable[int] = (), created_by: str = "lead",
           owner: str | None = None) -> Task:
    subject = subject.strip() if isinstance(subject, str) else ""
    if not subject:
        raise BadInput("a task needs a subject")
    blockers = sorted({int(b) for b in blocked_by})
    # Refuse bad input before the lock, which would create the board's lock file;
    # re-checked under the lock below.
    if not ws.store.board_exists(team):
        raise roster.unknown_team(ws, team)
    for b in blockers:
        if read(ws, team, b) is None:
            raise BadInput(f"unknown task #{b} in --blocked-by")
    with locked(ws, team):
        tasks = _Board(ws, team)
        for b in blockers:
            if b not in tasks:
                raise BadInput(f"unknown task #{b} in --blocked-by")
        now = time.time()
        task_id = ws.store.next_task_id(team)
        task: Task = {"schema": 1, "id": task_id, "subject": subject,
                      "description": description, "status": "pending", "owner": owner,
                      "blocked_by": [], "blocks": [], "created_by": created_by,
                      "created_at": now, "updated_at": now, "claimed_at": None,
                      "completed_at": None, "commits": []}
        tasks.put(task)
        # No cycle check to walk: the new id was never handed out, so no task can wait on
        # it; the blockers were found above. Only they are read, however long their chains.
        changed = _link(tasks, [(task_id, b) for b in blockers])
        _save(ws, team, task)
        for tid in changed - {task_id}:
            _save(ws, team, tasks[tid])
        given = {"owner": owner} if owner is not None else {}
        events.emit(ws, team, "task_created", member=created_by, task_id=task_id,
                    subject=subject, blocked_by=task["blocked_by"], **given)
    return task


def update(ws: Workspace, team: str, task_id: int, *, status: str | None = None,
           owner: Any = UNSET, add_blocked_by: Iterable[int] = (),
           add_blocks: Iterable[int] = (), actor: str = "lead",
           add_commits: Iterable[str] = (), holder: str | None = None) -> Task:
    """Change a task. `owner=None` clears the owner; leaving it out leaves it alone.
    `add_commits` appends commit ids (a worktree member's work for it) not listed yet.
    `holder` (a teammate changing a task): NotHolder, nothing changed, unless the task is
    unowned or owned by `holder`, checked under the board lock."""
    if status is not None and status not in STATUSES:
        raise BadInput(f"unknown task status {status!r}; one of: {', '.join(STATUSES)}")
    add_blocked_by, add_blocks = [int(b) for b in add_blocked_by], [int(d) for d in add_blocks]
    # Refuse bad input before the lock, which would create the board's lock file;
    # re-checked under the lock below.
    get(ws, team, task_id)
    if add_blocked_by or add_blocks:
        _check_edges(_Board(ws, team), task_id, add_blocked_by, add_blocks)
    with locked(ws, team):
        tasks = _Board(ws, team)
        if task_id not in tasks:
            raise BadInput(f"unknown task #{task_id} in team {team!r}")
        task = tasks[task_id]
        if holder is not None and task["owner"] not in (None, holder):
            raise NotHolder(task_id, task["owner"])
        edges = _check_edges(tasks, task_id, add_blocked_by, add_blocks)
        changes: dict[str, Any] = {}
        now = time.time()
        if owner is not UNSET and owner != task["owner"]:
            task["owner"] = changes["owner"] = owner
        if status is not None and status != task["status"]:
            task["status"] = changes["status"] = status
            if status == "in_progress" and task["claimed_at"] is None:
                task["claimed_at"] = now
            task["completed_at"] = now if status == "completed" else None
        new_commits = [c for c in add_commits if c not in (task.get("commits") or [])]
        if new_commits:
            task["commits"] = changes["commits"] = [*(task.get("commits") or []), *new_commits]
        changed = _link(tasks, edges)
        if edges:
            changes["blocked_by"] = task["blocked_by"]
            changes["blocks"] = task["blocks"]
        if changes or changed:
            _save(ws, team, task)
            for tid in changed - {task_id}:
                _save(ws, team, tasks[tid])
            name = "task_completed" if changes.get("status") == "completed" else "task_updated"
            events.emit(ws, team, name, member=actor, task_id=task_id, **changes)
    return task


def _open_to(task: Mapping[str, Any], member: str | None) -> bool:
    """Pending, and either unowned or (for `member`) already given to it."""
    return task["status"] == "pending" and task["owner"] in (None, member)


def is_claimable(tasks: Mapping[int, Mapping[str, Any]], task: Mapping[str, Any],
                 member: str | None = None) -> bool:
    """Pending, unblocked, and either unowned or (for `member`) already given to it."""
    if not _open_to(task, member):
        return False
    return all(_status(tasks, b) == "completed" for b in task["blocked_by"])


def _status(tasks: Mapping[int, Mapping[str, Any]], task_id: int) -> Any:
    """The status of task `task_id`, None when there is no such task."""
    task = tasks.get(int(task_id))
    return None if task is None else task.get("status")


def claim(ws: Workspace, team: str, member: str, task_id: int) -> Json | None:
    """Claim task `task_id` for `member`, re-checked under the board lock: no two owners,
    ever. None when it is not claimable. (Typed `Json`, not `Task`, while the teammate's
    loop reads it as such.)

    A task already taken (not pending, or another's) is refused on a look without a
    unit: a "no" is a read like any other, true when it was made, and racers that lost do
    not queue only to learn it. The claim itself is the store's `claim_unit`, which reads
    the task inside it: a claim that finds another claim of the task under way has lost
    (CONTRACT §15, SKIP LOCKED). Blockers cannot move meanwhile: only a board unit
    completes a task."""
    seen = read(ws, team, task_id)
    if seen is None:
        if not ws.store.board_exists(team):
            raise roster.unknown_team(ws, team)
        raise BadInput(f"unknown task #{task_id} in team {team!r}")
    if not _open_to(seen, member):
        return None
    try:
        with ws.store.claim_unit(team, task_id) as found:
            if found is None:
                return None  # another claim of it is being made: this one lost
            task = cast(Task, found)
            tasks = _Board(ws, team)  # its blockers, read only if it has any
            tasks.put(task)
            if not is_claimable(tasks, task, member):
                return None
            task.update({"owner": member, "status": "in_progress", "claimed_at": time.time()})
            _save(ws, team, task)
            events.emit(ws, team, "task_claimed", member=member, task_id=task["id"],
                        owner=member, status="in_progress")
            return cast(Json, task)
    except BadRecord as exc:
        log.error("%s: skipped, not a task (%s)", exc.where, exc.why)
        return None


def release(ws: Workspace, team: str, member: str) -> list[int]:
    """A member left for good: its unfinished tasks go back to pending with no owner."""
    if not ws.store.board_exists(team):
        return []
    released = []
    with locked(ws, team):
        for tid, task in read_all(ws, team).items():
            if task["owner"] == member and task["status"] != "completed":
                task.update({"owner": None, "status": "pending"})
                _save(ws, team, task)
                released.append(tid)
                events.emit(ws, team, "task_released", member=member, task_id=tid,
                            owner=None, status="pending")
    return released


def current_task(tasks: Iterable[Mapping[str, Any]], member: str) -> int | None:
    """The lowest in_progress task id `member` owns."""
    ids = [int(t["id"]) for t in tasks if t["owner"] == member and t["status"] == "in_progress"]
    return min(ids) if ids else None
