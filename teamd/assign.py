"""Assignment (CONTRACT §5): which task goes to which teammate, decided by teamd alone.

`BoardIndex` is the supervisor's picture of one team's board: per task its status, owner,
blockers and dependents, loaded once, then kept up to date from the task files inotify names
(`note`), so a change costs in proportion to the tasks it touches, never to the size of the
board; rebuilt whole only when the kernel's event queue overflowed. `Assigner` remembers
what it saw of the members (since when each is idle or asleep, who was just given work) and
`choose`s (task, member) pairs: a pending task given an owner goes to that owner once
unblocked; the claimable task with the lowest id goes to the teammate idle longest, then,
when no teammate is idle, to one sleeper per task. Nothing here writes a file: the supervisor
claims (`board.claim`) and sends `task_assigned`.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import cast

from teamd import board, inbox, requests
from teamd.errors import BadInput
from teamd.files import Json
from teamd.layout import LEAD, SUPERVISOR, Workspace
from teamd.policy import AWAITING_WORK
from teamd.store.changes import Change, Kind
from teamd.wake import SETTLE

log = logging.getLogger(__name__)

#: a member given a task counts as busy until it has been active again; if it took the
#: message in and is still idle this long after, it found nothing new in it (its
#: conversation knew the task) and is free again
TAKEN_GRACE = 1.0
#: statuses of a member that may be handed work now or soon
OWNER_STATUSES = ("starting", "active", "idle", "waiting", "paused", "sleeping")


@dataclass
class Entry:
    status: str
    owner: str | None
    blocked_by: tuple[int, ...]
    blocks: tuple[int, ...]
    claimed_at: float | None = None


def entry_of(task: Json) -> Entry:
    return Entry(status=str(task["status"]), owner=task.get("owner"),
                 blocked_by=tuple(int(b) for b in task.get("blocked_by") or ()),
                 blocks=tuple(int(d) for d in task.get("blocks") or ()),
                 claimed_at=task.get("claimed_at"))


class BoardIndex:
    """One team's board as teamd needs it; updated one task at a time."""

    def __init__(self) -> None:
        self.entries: dict[int, Entry] = {}
        self.ready: set[int] = set()  # claimable: pending, no owner, unblocked
        self.owned_ready: set[int] = set()  # pending, given an owner, unblocked
        self.working: dict[int, tuple[str, float | None]] = {}  # in progress: owner, claimed_at
        self.top = 0  # the highest id known (or handed out by the board)
        self._heap: list[int] = []  # ready ids, lowest first; stale ones dropped lazily
        self._in_heap: set[int] = set()

    # -- loading ---------------------------------------------------------------------------
    @classmethod
    def load(cls, ws: Workspace, team: str) -> BoardIndex:
        """Read the whole board once (at start, and after an overflow)."""
        index = cls()
        tasks = cast(dict[int, Json], board.read_all(ws, team))
        index.fill(tasks.values())
        index.note_top(ws.store.top_task_id(team))
        return index

    def fill(self, tasks: Iterable[Json]) -> None:
        for task in tasks:
            self.entries[int(task["id"])] = entry_of(task)
        self.top = max([self.top, *self.entries])
        for task_id in self.entries:
            self._judge(task_id)

    def refresh(self, ws: Workspace, team: str, task_id: int) -> None:
        """Re-read one task's file (inotify named it) and what depends on it."""
        self.note(task_id, cast(Json | None, board.read(ws, team, task_id)))

    def refresh_new(self, ws: Workspace, team: str) -> None:
        """The board handed out new ids: read those above the highest known (their own
        changes normally bring them; this is the cheap safety net)."""
        hwm = ws.store.top_task_id(team)
        for task_id in range(self.top + 1, hwm + 1):
            if task_id not in self.entries:
                self.refresh(ws, team, task_id)
        self.note_top(hwm)

    def note_top(self, hwm: int) -> None:
        self.top = max(self.top, hwm)

    # -- changes ---------------------------------------------------------------------------
    def note(self, task_id: int, task: Json | None) -> None:
        """The task is now `task` (None: gone). Its readiness and that of every task it
        blocks (before and after) are judged again: nothing else can have changed."""
        old = self.entries.pop(task_id, None)
        touched = {task_id, *(old.blocks if old else ())}
        if task is not None:
            try:
                new = entry_of(task)
            except (KeyError, TypeError, ValueError):
                new = None
            if new is not None:
                self.entries[task_id] = new
                touched.update(new.blocks)
                self.top = max(self.top, task_id)
        for tid in touched:
            self._judge(tid)

    def _judge(self, task_id: int) -> None:
        entry = self.entries.get(task_id)
        unblocked = entry is not None and entry.status == "pending" and all(
            (b := self.entries.get(blocker)) is not None and b.status == "completed"
            for blocker in entry.blocked_by)
        self.ready.discard(task_id)
        self.owned_ready.discard(task_id)
        self.working.pop(task_id, None)
        if entry is not None and entry.status == "in_progress" and entry.owner is not None:
            self.working[task_id] = (entry.owner, entry.claimed_at)
        if not unblocked or entry is None:
            return
        if entry.owner is None:
            self.ready.add(task_id)
            if task_id not in self._in_heap:
                self._in_heap.add(task_id)
                heapq.heappush(self._heap, task_id)
        else:
            self.owned_ready.add(task_id)

    # -- questions -------------------------------------------------------------------------
    def lowest_ready(self, count: int) -> list[int]:
        """The `count` claimable tasks with the lowest ids, lowest first."""
        found: list[int] = []
        while self._heap and len(found) < count:
            task_id = heapq.heappop(self._heap)
            self._in_heap.discard(task_id)
            if task_id in self.ready:
                found.append(task_id)
        for task_id in found:  # still claimable until claimed: back on the heap
            self._in_heap.add(task_id)
            heapq.heappush(self._heap, task_id)
        return found

    def in_progress(self) -> list[tuple[int, str, float | None]]:
        """(id, owner, claimed_at) of every in-progress task with an owner."""
        return sorted((tid, *w) for tid, w in self.working.items())


# -- members ---------------------------------------------------------------------------------
def takes_work(member: Json) -> bool:
    """A teammate that may be handed tasks: never the lead (kind or name)."""
    return bool(member.get("kind", "teammate") == "teammate" and member["name"] != LEAD)


def plan_pending(ws: Workspace, team: str, member: Json) -> bool:
    """A plan of this plan-mode member awaits the lead (CONTRACT §6): it gets no task.
    So does one whose latest plan was rejected: it is revising it, and a task sent now
    would meet the rejection in the same turn. Only a plan-mode member's check reads
    `requests/`."""
    if not member.get("plan_mode_required"):
        return False
    plans = requests.plans_of(requests.list_requests(ws, team), member["name"],
                              member.get("joined_at"))
    if not plans:
        return False
    latest = max(plans, key=lambda r: r.get("created_at") or 0)
    return latest["status"] in ("pending", "rejected")


@dataclass
class Given:
    """A member just sent a task: busy, for assignment, until it has been active again."""

    at: float
    marker: tuple[object, str]  # its pid and usage then (`marker`)
    taken_at: float | None = None  # when teamd first saw its inbox empty


@dataclass
class Assigner:
    """One team's assignment state in teamd's memory (rebuilt at a supervisor start: the
    board is re-read, and what was told is told again — the teammate ignores a task its
    conversation knows)."""

    index: BoardIndex
    #: name → (status, since): when teamd first saw the member in its current status
    seen: dict[str, tuple[str, float]] = field(default_factory=dict)
    #: members sent a task, busy until seen at work: another status, a new process, a model
    #: call made; or, should none of that follow, TAKEN_GRACE after it took the message in
    #: (its conversation knew the task: it ignored it and stays idle, free for the next)
    given: dict[str, Given] = field(default_factory=dict)
    #: (task, owner, claimed_at) already sent as task_assigned by this supervisor
    told: set[tuple[int, str, float | None]] = field(default_factory=set)

    def observe(self, members: list[Json], now: float,
                has_mail: Callable[[str], bool] = bool) -> float | None:
        """Take note of the members' statuses (every reconcile); `has_mail(name)`: its
        inbox holds something (asked only of members just given a task). Returns when a
        member given a task stops counting as busy, if nothing else happens before."""
        names = set()
        due: float | None = None
        for m in members:
            name, status = m["name"], m["status"]
            names.add(name)
            if self.seen.get(name, ("", 0.0))[0] != status:
                self.seen[name] = (status, now)
            given = self.given.get(name)
            if given is None:
                continue
            if status not in AWAITING_WORK or given.marker != marker(m):
                del self.given[name]
                continue
            if given.taken_at is None and not has_mail(name):
                given.taken_at = now
            if given.taken_at is not None:
                if now - given.taken_at >= TAKEN_GRACE:
                    del self.given[name]
                    continue
                end = given.taken_at + TAKEN_GRACE
                due = end if due is None else min(due, end)
        for gone in set(self.seen) - names:
            self.seen.pop(gone, None)
            self.given.pop(gone, None)
        return due

    def choose(self, members: list[Json], live: set[str], plan_pending: Callable[[str], bool],
               has_mail: Callable[[str], bool] = lambda name: False
               ) -> list[tuple[int, str]]:
        """(task, member) pairs to claim and send, in that order (CONTRACT §5): each
        unblocked task given an owner to that owner; the claimable ones, lowest id first,
        to the idle teammates, longest idle first; what is left, one per task, to the
        sleepers, longest asleep first. A member gets one task at a time, and none while
        mail waits for it (`has_mail`): each comes as a turn of its own, after the mail.
        `live`: members with a process; `plan_pending(name)`: a plan of its awaits the lead."""
        if not self.index.ready and not self.index.owned_ready:
            return []
        order = {m["name"]: i for i, m in enumerate(members)}
        owners = {m["name"]: m for m in members if takes_work(m)
                  and m["desired"] == "running" and m["status"] in OWNER_STATUSES}
        pairs: list[tuple[int, str]] = []
        busy: set[str] = set(self.given) | {
            m["name"] for m in members if m["status"] in AWAITING_WORK and has_mail(m["name"])}
        # an owner is sent its task when it is idle, or asleep (then woken for it), as any
        # other task; one at a time, each as a turn of its own
        waiting = {name for name, m in owners.items() if (m["status"] == "idle") == (
            name in live) and m["status"] in AWAITING_WORK}
        for task_id in sorted(self.index.owned_ready):
            owner = self.index.entries[task_id].owner
            if owner is not None and owner in waiting and owner not in busy \
                    and not plan_pending(owner):
                pairs.append((task_id, owner))
                busy.add(owner)
        if not self.index.ready:
            return pairs

        def since(m: Json) -> tuple[float, int]:
            return (self.seen.get(m["name"], ("", 0.0))[1], order[m["name"]])

        # CONTRACT §6: a member whose plan is pending claims nothing
        free = [m for m in owners.values() if m["name"] not in busy
                and not (m["status"] in AWAITING_WORK and plan_pending(m["name"]))]
        idle = sorted((m for m in free if m["status"] == "idle" and m["name"] in live), key=since)
        starting = [m for m in free if m["status"] == "starting" and m["name"] in live]
        asleep = sorted((m for m in free if m["status"] == "sleeping"
                         and m["name"] not in live), key=since)
        # a teammate starting (a sleeper woken for mail, a new one) will be idle soon: no
        # sleeper is woken for a task it can take
        tasks = self.index.lowest_ready(len(idle) + len(starting) + len(asleep))
        takers = [*idle, *([None] * len(starting)), *asleep]
        pairs += [(task_id, m["name"]) for task_id, m in zip(tasks, takers, strict=False)
                  if m is not None]
        return pairs

    def untold(self, members: list[Json]) -> list[tuple[int, str, float | None]]:
        """In-progress tasks owned by an idle or sleeping teammate that this supervisor has
        not sent, one per teammate: claimed by an earlier supervisor just before it died,
        or handed over directly (`task update --owner … --status in_progress`). Sent
        again; the teammate ignores a task its conversation knows."""
        waiting = {m["name"] for m in members if takes_work(m) and m["desired"] == "running"
                   and m["status"] in AWAITING_WORK and m["name"] not in self.given}
        working = self.index.in_progress()
        # what is no longer in progress need not be remembered as told
        self.told.intersection_update(working)
        found: list[tuple[int, str, float | None]] = []
        for tid, owner, at in working:  # the lowest id first
            if owner in waiting and (tid, owner, at) not in self.told:
                waiting.discard(owner)
                found.append((tid, owner, at))
        return found

    def gave(self, member: Json, task: Json, now: float | None = None) -> None:
        """`task` was sent to `member`."""
        self.told.add((int(task["id"]), member["name"], task.get("claimed_at")))
        self.given[member["name"]] = Given(time.time() if now is None else now,
                                           marker(member))


def marker(member: Json) -> tuple[object, str]:
    """What changes once a member has taken up work: its process (a sleeper forked) and its
    usage (a model call made)."""
    return (member.get("pid"), repr(sorted((member.get("usage") or {}).items())))


# -- carrying it out: the supervisor's calls -------------------------------------------------
class Boards:
    """Every team's `Assigner`, kept by the supervisor: fed the task files inotify names
    (`note`), asked to hand out work at each reconcile (`hand_out`)."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.teams: dict[str, Assigner] = {}

    def forget(self, team: str) -> None:
        """The team came or went: a board of that name is read afresh when next needed."""
        self.teams.pop(team, None)

    def reload_all(self) -> None:
        """inotify's queue overflowed: changes were lost, so every board is read again."""
        for team, assigner in self.teams.items():
            assigner.index = BoardIndex.load(self.ws, team)

    def settling(self, team: str, members: list[Json], now: float) -> tuple[set[str], float]:
        """Teammates idle for less than SETTLE (as teamd saw them: one that turned idle
        since the last look counts from now), and in how many seconds the last settles."""
        assigner = self.teams.get(team)
        seen = assigner.seen if assigner is not None else {}
        names: set[str] = set()
        until = 0.0
        for m in members:
            if not takes_work(m) or m["status"] != "idle":
                continue
            status, since = seen.get(m["name"], ("", now))
            if status != "idle":
                since = now
            if now - since < SETTLE:
                names.add(m["name"])
                until = max(until, since + SETTLE - now)
        return names, until

    def is_given(self, team: str, name: str) -> bool:
        """`name` was just sent a task and has not been seen at work since."""
        assigner = self.teams.get(team)
        return assigner is not None and name in assigner.given

    def note(self, change: Change) -> None:
        """A task or the board's ids changed (the supervisor's feed): that task alone, or
        the new ids, are read again."""
        assigner = self.teams.get(change.team)
        if assigner is None:
            return  # read whole when first needed
        if change.task_id is not None:
            assigner.index.refresh(self.ws, change.team, change.task_id)
        elif change.kind is Kind.TASK_IDS:
            assigner.index.refresh_new(self.ws, change.team)

    def hand_out(self, team: str, members: list[Json], live: set[str], woken: set[str],
                 reload: bool = False) -> tuple[set[str], float | None]:
        """CONTRACT §5 "Assignment": claim (`board.claim`, re-checked under the board lock)
        and then send `task_assigned` for each pair `Assigner.choose` makes; first send
        again what `Assigner.untold` finds. `woken`: sleepers mail wakes (they take that
        first); `reload`:
        no events name the task files (teamd without inotify), so the board is read whole.
        Returns the members sent a task (a sleeper among them is to be woken), and when to
        look again if nothing happens before (`Assigner.observe`)."""
        assigner = self.teams.get(team)
        if assigner is None:
            assigner = self.teams[team] = Assigner(BoardIndex.load(self.ws, team))
        elif reload:
            assigner.index = BoardIndex.load(self.ws, team)
        now = time.time()
        due = assigner.observe(members, now, lambda n: self.ws.store.has_mail(team, n))
        by_name = {m["name"]: m for m in members}
        sent: set[str] = set()
        for task_id, name, claimed_at in assigner.untold(members):
            # one already waiting in its inbox (a sleeper's) is not sent twice
            if not any(m["type"] == "task_assigned" and m.get("task_id") == task_id
                       for m in inbox.peek(self.ws, team, name)):
                task = cast(Json | None, board.read(self.ws, team, task_id))
                if task is not None:
                    self.send(team, name, task)
                    assigner.gave(by_name[name], task, now)
                    sent.add(name)
            assigner.told.add((task_id, name, claimed_at))
        pairs = assigner.choose(members, live,
                                lambda n: plan_pending(self.ws, team, by_name[n]),
                                lambda n: n in woken or self.ws.store.has_mail(team, n))
        for task_id, name in pairs:
            try:
                claimed = board.claim(self.ws, team, name, task_id=task_id)
            except BadInput:
                claimed = None
            if claimed is None:  # not claimable after all: the index was behind
                assigner.index.refresh(self.ws, team, task_id)
                continue
            assigner.index.note(task_id, claimed)
            self.send(team, name, claimed)  # after the claim: a crash between is `untold`
            assigner.gave(by_name[name], claimed, now)
            sent.add(name)
        return sent, due

    def send(self, team: str, name: str, task: Json) -> None:
        msg = inbox.make("task_assigned", SUPERVISOR, name, str(task["subject"]),
                         task_id=int(task["id"]))
        inbox.deliver(self.ws, team, [msg])
        log.info("%s/%s: assigned task #%s", team, name, task["id"])
