"""What a store raises beyond `teamd.errors`: a stored record that is not what it should be.

Every store writes its records whole, so a record that cannot be read is a hand edit (or a
disk gone bad): the reader names it and, where one bad record must not stop a team, skips
it. `where` names the record for people (files: its path; a database: its table and key).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from teamd.errors import TeamdError

log = logging.getLogger(__name__)


class BadRecord(TeamdError):
    """A stored record that cannot be read as what it should be: "{where}: {why}"."""

    def __init__(self, where: str, why: str) -> None:
        super().__init__(f"{where}: {why}")
        self.where = where
        self.why = why


def check_task(doc: Any, task_id: int, where: str) -> dict[str, Any]:
    """`doc` if it is the task of `task_id` (its id, a status), else BadRecord at `where`
    (tasks are written whole: another record under that id is a hand edit)."""
    try:
        if int(doc["id"]) != task_id:
            raise ValueError(f"its id is {doc['id']!r}")
        str(doc["status"])
    except (KeyError, TypeError, ValueError) as exc:
        raise BadRecord(where, str(exc)) from None
    return dict(doc)


def good_tasks(found: Iterable[tuple[int, Callable[[], Any], str]]) -> list[dict[str, Any]]:
    """The tasks of `found` (id, how to read its record, where it is), those that are not
    a task of their id skipped and named in the log (a hand edit must not stop a team);
    a record gone meanwhile (None) is left out."""
    out: list[dict[str, Any]] = []
    for task_id, read, where in found:
        try:
            doc = read()
            if doc is not None:
                out.append(check_task(doc, task_id, where))
        except BadRecord as exc:
            log.error("%s: skipped, not a task (%s)", exc.where, exc.why)
    return out


class StoreUnreachable(TeamdError):
    """The store's server cannot be reached (or the connection to it was lost): trying
    again later may work (exit 1)."""


class LeaseLost(BaseException):
    """This process's host no longer holds its lease (CONTRACT §15, "Failover, fenced"): the
    store refused a fenced write, or this host's `teamd` found the lease taken over or
    could not renew it in time. Another host may now run this host's members, so this
    process must act for none of them again: it ends them (a `teamd`) or itself (a member)
    and writes nothing more.

    A BaseException, like SystemExit: the handlers that keep a loop going through
    `Exception` (a bad roster, a failed tool) must not swallow it and go on acting."""
