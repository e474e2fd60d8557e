"""What a member writes of itself in the roster (CONTRACT §4 "who writes what", §12): its
status, `last_error`, `usage` and `current_task` — only while the roster's pid is its own —
and each call's cost, added to the team's spend in the same step.
"""

from __future__ import annotations

import copy
import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from teamd import board, budget, prices, roster, states
from teamd.errors import BadInput, TeamdError
from teamd.files import Json
from teamd.states import Status, Writer
from teamd.store.errors import StoreUnreachable

if TYPE_CHECKING:
    from teamd.agent.member import Member

log = logging.getLogger(__name__)

#: a write the store could not take (its connection cut: the write undone whole) is tried
#: again after these waits, doubling; given up (the error raised: the process ends and is
#: restarted) after STORE_GIVE_UP seconds
STORE_RETRY_FIRST, STORE_RETRY_MAX, STORE_GIVE_UP = 0.2, 5.0, 60.0


class Standing:
    """One member's live fields as it last wrote them. `error_of_last_run`: teamd's
    last_error (why it was in backoff) holds until this process is up."""

    def __init__(self, member: Member, entry: Mapping[str, Any]) -> None:
        self.m = member
        self.status: str | None = entry.get("status")
        self.error_of_last_run = entry.get("last_error") is not None
        self.unpriced_told = False  # last_error named the model with no price, once
        # what `current_task` need not read again: tasks seen let go, and how many of the
        # session's claims it has looked at
        self.tasks_let_go: set[int] = set()
        self.claims_seen = 0

    def set_status(self, status: Status) -> None:
        if status == self.status:
            return
        self.update(status=status)

    def add_usage(self, usage: Json, clear_error: bool, cost: float | None = None) -> None:
        """Count a call's tokens and its cost (the member's `usage` and the team's spend,
        in one step). A model with no price says so in `last_error`, once per process."""
        changes: dict[str, Any] = {"last_error": None} if clear_error else {}
        if cost is None and not self.unpriced_told:
            self.unpriced_told = True
            changes["last_error"] = (f"no price known for model {self.m.model_name}: its "
                                     "calls are not counted in cost (add it under [prices] "
                                     "in teamd.toml)")
            log.warning(changes["last_error"])
        self.update(usage_add={k: usage.get(k) for k in prices.TOKEN_KEYS},
                    cost_add=cost, **changes)

    def current_task(self) -> int | None:
        """`current_task`: the lowest in_progress task this member owns, read from the tasks
        it knows it holds (those its session records as claimed or handed to it), not from
        the whole board. A task it was seen to let go (done, released, taken by another) is
        not read again unless it is claimed again."""
        m = self.m
        fresh = m.session.claims[self.claims_seen:]
        self.claims_seen = len(m.session.claims)
        self.tasks_let_go.difference_update(fresh)
        held = []
        for task_id in sorted(m.session.claimed_ids - self.tasks_let_go):
            try:
                task = board.get(m.ws, m.team, task_id)
            except BadInput:  # gone (or the team is: the status write will say so)
                task = None
            except TeamdError as exc:  # a hand edit broke it: read it again next time
                log.warning("%s", exc)
                continue
            if task is not None and board.current_task([task], m.name) is not None:
                held.append(task_id)
            else:
                self.tasks_let_go.add(task_id)
        return min(held) if held else None

    def update_if_possible(self, **changes: Any) -> None:
        """`update`, when the disk lets it (it may be as full as the session's)."""
        try:
            self.update(**changes)
        except OSError as exc:
            log.warning("cannot update the roster either: %s", exc)

    def update(self, **changes: Any) -> None:
        """Write `status` (a `Status`), `last_error`, `usage_add` (tokens) and `cost_add`
        (dollars) into the member's live state, with `current_task` as it is now."""
        m = self.m
        usage_add = changes.pop("usage_add", None)
        cost_add = changes.pop("cost_add", None)
        current = self.current_task()
        charged = False
        #: the member's `usage` as a try left it: a try the store reported lost may have
        #: committed all the same (the connection cut after its COMMIT), and the next one
        #: then finds it so — counted and charged once, never twice
        landed: dict[str, Any] = {}

        def change(entry: Json) -> None:
            nonlocal charged
            if usage_add and "usage" in landed and entry.get("usage") == landed["usage"]:
                usage_add.clear()  # counted (and charged, in the same transaction) already
                charged = True
            elif cost_add:  # spent, whoever holds the roster entry now
                budget.charge(m.ws, m.team, cost_add)  # lock order: status → spend
                charged = True
            if entry.get("pid") != os.getpid():
                return  # not ours any more (CONTRACT §4): write nothing
            # leaving (it approved its shutdown: `stopping`), it writes no other status — a
            # Claude Code member's forwarder may still refuse a last call, from its thread
            if "status" in changes and entry.get("status") != Status.STOPPING:
                states.transition(entry, changes["status"], Writer.MEMBER)
            if self.error_of_last_run:
                entry["last_error"] = None  # up and running again: that trouble has cleared
            for key in ("last_error",):
                if key in changes:
                    entry[key] = changes[key]
            if usage_add:
                total = entry.setdefault("usage", {})
                for key, value in usage_add.items():
                    total[key] = int(total.get(key) or 0) + int(value or 0)
                if cost_add is not None:
                    total["cost_usd"] = prices.add(total.get("cost_usd"), cost_add)
                landed["usage"] = copy.deepcopy(total)
            entry["current_task"] = current

        def write() -> None:
            nonlocal charged
            charged = False  # a try the store undid charged nothing
            roster.update_status(m.ws, m.team, m.name, change)

        try:
            self._write(write)
            if cost_add and not charged:  # removed from the roster meanwhile: still spent
                self._write(lambda: budget.charge(m.ws, m.team, cost_add))
        except BadInput:
            raise  # the team is gone: nothing to work for
        except StoreUnreachable:
            raise  # given up (`_write`): the process ends, and its restart writes anew
        except TeamdError as exc:
            # config.json does not parse (a hand edit): it is not ours to repair, and the
            # work goes on; the status is written again once the file reads
            log.error("cannot record %s in the roster: %s", sorted(changes), exc)
            return
        self.error_of_last_run = False
        if "status" in changes:
            self.status = changes["status"]

    @staticmethod
    def _write(write: Callable[[], object]) -> None:
        """`write`, again while the store cannot be reached (a connection cut under it
        undoes it whole), for up to STORE_GIVE_UP seconds: a status, a usage or a cost left
        unwritten would stay wrong until the next change — an `active` member that sits
        idle, a call never charged to the budget."""
        delay, deadline = STORE_RETRY_FIRST, time.monotonic() + STORE_GIVE_UP
        while True:
            try:
                write()
                return
            except StoreUnreachable as exc:
                if time.monotonic() + delay > deadline:
                    raise
                log.warning("%s; trying again in %g s", exc, delay)
                time.sleep(delay)
                delay = min(STORE_RETRY_MAX, delay * 2)
