"""A member's intake: its inbox taken into its session exactly once (CONTRACT §3, §5, §6).

Every message is recorded in the session and fsynced before the inbox is cut, so a crash at
any moment loses nothing and shows nothing twice; a batch holds at most
`inbox.BATCH_MESSAGES` messages or `inbox.MAX_CONTENT` of content since the agent last
answered; a `task_assigned` comes as a turn of its own (<auto-claimed>); while the session
cannot be written nothing is taken, and the member says why. Whatever the runtime, this is
how its input arrives.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from teamd import board, inbox
from teamd.errors import TeamdError
from teamd.files import Json

if TYPE_CHECKING:
    from teamd.agent.member import Member

log = logging.getLogger(__name__)

#: back-off while the session cannot be written (a full disk): no model call meanwhile
SESSION_RETRY_FIRST, SESSION_RETRY_MAX = 1.0, 30.0


class Intake:
    """One member's inbox → session. `floor`: session records before this count toward no
    batch (a refused call opens a new one)."""

    def __init__(self, member: Member) -> None:
        self.m = member
        self.floor = 0

    def take(self, hide: tuple[str, ...] = (), tasks: bool = False) -> list[Json]:
        """Drain the inbox into the session (recorded and fsynced before the cut): at most
        BATCH_MESSAGES messages or MAX_CONTENT of content since the model last answered,
        a shutdown_request always. Messages of a type in `hide` are recorded as taken but
        never shown to the model: the harness answers them itself. A `task_assigned`
        reaches the model as <auto-claimed>Task #N: subject …</auto-claimed>, recorded with
        the task as claimed before the message is recorded as taken (a crash between the
        two leaves the message in the inbox, whose task the session then knows: nothing is
        shown twice); one for a task the session knows is taken and not returned. A task
        comes as a turn of its own, taken only while idle (`tasks`): never in a batch with
        other messages, nor in the middle of work; it waits in the inbox meanwhile. While
        the session cannot be written nothing is taken: it waits (see `session_stuck`) and
        tries again."""
        m = self.m
        if not self.has_mail():
            # A line landing right after this is taken at the next check, as if it had
            # landed after the drain.
            return []
        self.wait_for_sender()
        fresh: list[Json] = []

        def consume(batch: list[Json]) -> None:
            new: list[Json] = []
            taken: set[str] = set()
            for msg in batch:  # de-duplicated on the id, within the batch too
                mid = str(msg.get("id"))
                if mid not in m.session.known_ids and mid not in taken:
                    taken.add(mid)
                    new.append(msg)
            # no waiting here: the inbox lock is held (senders would wait on us)
            stale: list[Json] = []
            for msg in new:
                if msg.get("type") != "task_assigned":
                    continue
                task = self.assigned_task(msg)
                if task is None:
                    stale.append(msg)
                    continue
                m.session.append({"type": "user", "claimed": int(task["id"]), "content": [
                    {"type": "text", "text": auto_claimed(task)}]}, wait=False)
            shown = [msg for msg in new if msg.get("type") not in (*hide, "task_assigned")]
            hidden = [msg for msg in new if msg.get("type") in (*hide, "task_assigned")]
            if hidden:
                m.session.append({"type": "inbox", "messages": hidden, "hidden": True},
                                 wait=False)
            if shown:
                m.session.append({"type": "inbox", "messages": shown}, wait=False)
            fresh.extend(msg for msg in new if not any(msg is s for s in stale))

        count, content = self.batch_so_far()
        attempt = 0
        while True:
            def hold(msg: Json, batch: dict[str, bool] = {"task": False,  # noqa: B006
                                                          "other": False}) -> bool:
                """A task alone, first in a batch and while idle; others without one
                (`batch`: a fresh dict each try, bound as the function is made)."""
                if msg["type"] == "task_assigned":
                    if not tasks or batch["task"] or batch["other"]:
                        return True
                    batch["task"] = True
                    return False
                if batch["task"]:
                    return True
                batch["other"] = True
                return False

            try:
                inbox.take(m.ws, m.team, m.name, consume,
                           max_messages=max(0, inbox.BATCH_MESSAGES - count),
                           max_content=max(0, inbox.MAX_CONTENT - content), hold=hold)
                break
            except OSError as exc:  # the inbox is as it was, or what was taken is recorded
                self.session_stuck(exc, attempt)
                attempt += 1
        if attempt:
            self.session_stuck(None, attempt)
        return fresh

    def batch_so_far(self) -> tuple[int, int]:
        """Messages (and bytes of their content) taken in since the model last answered:
        they count toward the one call's batch limit."""
        count = content = 0
        records = self.m.session.records
        # a refused call (api_refused) opens a new batch: the member waits for its next
        # message, which must not find the batch still full of what the model never read
        for record in reversed(records[self.floor:]):
            if record["type"] == "assistant":
                break
            if record["type"] == "inbox":
                count += len(record["messages"])
                content += sum(len(str(msg.get("content", "")).encode("utf-8", "replace"))
                               for msg in record["messages"])
        return count, content

    def assigned_task(self, msg: Json) -> Json | None:
        """The task a `task_assigned` hands over, read from its own file alone; None when
        there is nothing new to tell the model: its conversation was handed this claim
        already (teamd re-sends after a restart: a claim and its message are two writes;
        a task the model started itself), or the task is no longer this member's to do.
        A task claimed for it again later (released, then assigned anew) is news."""
        m = self.m
        try:
            task_id = int(msg["task_id"])
            task = board.get(m.ws, m.team, task_id)
        except (TypeError, ValueError, TeamdError):
            return None
        if task.get("owner") != m.name or task.get("status") != "in_progress":
            return None
        known_at = m.session.claimed_at(task_id)
        if known_at is not None and known_at >= float(task.get("claimed_at") or 0):
            return None
        return task

    def session_stuck(self, exc: OSError | None, attempt: int) -> None:
        """The session (or the inbox beside it) cannot be written: say why, wait, and let
        the caller try again; None once it went through. No model call is made meanwhile
        (CONTRACT §3): the call that would follow waits on this record."""
        m = self.m
        if exc is None:
            log.info("the session is written again after %d failed attempt(s)", attempt)
            m.standing.update_if_possible(last_error=None)
            return
        delay = min(SESSION_RETRY_MAX, SESSION_RETRY_FIRST * 2 ** min(attempt, 10))
        where = exc.filename or m.session.where
        line = (f"cannot record to {where}: {exc.strerror or exc}; no model call until it "
                f"can, retrying in {delay:g} s")
        log.warning(line)
        m.standing.update_if_possible(last_error=line)
        m.waits.pause(delay)

    def has_mail(self) -> bool:
        """Something waits in this member's inbox (a cheap look, before every take)."""
        return self.m.ws.store.has_mail(self.m.team, self.m.name)

    def wait_for_sender(self) -> None:
        """Block until no sender holds the inbox lock. The wake comes at the sender's
        write, before its fsync and unlock; the take right after takes the lock for real."""
        self.m.ws.store.wait_unlocked_inbox(self.m.team, self.m.name)


def auto_claimed(task: Json) -> str:
    """How a task assigned by teamd reaches the model (CONTRACT §6)."""
    text = f"<auto-claimed>Task #{task['id']}: {task['subject']}"
    if task.get("description"):
        text += f"\n{task['description']}"
    return text + "</auto-claimed>"
