"""The protocol sequences that wait: `shutdown --wait`, `stop --force`, `down --wait`,
`remove` and `delete` (CONTRACT §6, §9). `teamctl` runs them; they live in the library so
that no sequence is written twice: the steps they wait on are `teamd.actions`' (the lead's
`TeamDelete` starts the same deletion, `actions.delete_team`, and does not wait).

Each one starts with an action (`teamd.actions`), then waits on the team's files (inotify,
re-checked twice a second: a process exit touches no file) until the outcome is known or
its timeout passes. A wait never prints: what it would announce goes to `say`, called once
the wait can be interrupted; Ctrl-C ends it with `Interrupted` (exit 130) saying what is
still pending. A failure is a TeamdError (exit 1) with the sentence a person reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from teamd import actions, journal_gaps, requests, roster
from teamd.errors import BadInput, Interrupted, TeamdError
from teamd.files import Json
from teamd.layout import Workspace

Say = Callable[[str], None]


def _quiet(_: str) -> None:
    """Say nothing (the default `say`)."""


@contextmanager
def interruptible(pending: Callable[[], str]) -> Iterator[None]:
    """Turn Ctrl-C into `Interrupted` with one line saying what is still pending."""
    try:
        yield
    except KeyboardInterrupt:
        try:
            what = pending()
        except (OSError, TeamdError) as exc:
            what = f"could not tell what is pending ({exc})"
        raise Interrupted(f"interrupted: {what}") from None


def wait(ws: Workspace, team: str, timeout: float, done: Callable[[], Any],
         pending: Callable[[], str], announce: str | None = None, say: Say = _quiet) -> Any:
    """Wait until `done()` is truthy (woken by the store's changes of the team, re-checked
    at least twice a second since a process exit touches no file); falsy at the deadline.
    Ctrl-C ends it with Interrupted and `pending()`: what is still to happen. `announce`
    goes to `say` first, already under that Ctrl-C handling."""
    with interruptible(pending):
        if announce:
            say(announce)
        return ws.store.wait_for([team], done, timeout)


# -- one member ---------------------------------------------------------------------------
def request_state(ws: Workspace, team: str, rid: str, name: str) -> str:
    """What a shutdown request is waiting for, in words."""
    record = requests.get(ws, team, rid)
    if record["status"] == "pending":
        return f"{name} has not answered shutdown request {rid} yet (it stays pending)"
    if record["status"] == "approved":
        return f"{name} approved shutdown request {rid} but is still running"
    return f"{name} rejected shutdown request {rid}"


def await_shutdown(ws: Workspace, team: str, rid: str, name: str, timeout: float, *,
                   gone_is_enough: bool = False, announce: str | None = None,
                   say: Say = _quiet) -> None:
    """Wait until `name` answers shutdown request `rid` and is gone (with `gone_is_enough`,
    until it is gone, answered or not); TeamdError when it rejects or `timeout` passes."""

    def settled() -> Json | None:
        record = requests.get(ws, team, rid)
        if record["status"] == "rejected":
            return record
        if record["status"] == "approved" or gone_is_enough:
            return None if actions.still_up(ws, team, [name]) else record
        return None

    record = wait(ws, team, timeout, settled, lambda: request_state(ws, team, rid, name),
                  announce=announce, say=say)
    if record is None:
        raise TeamdError(f"timed out after {timeout:g}s: "
                         f"{request_state(ws, team, rid, name)}")
    if record["status"] == "rejected":
        raise TeamdError(f"{name} rejected the shutdown: "
                         f"{record.get('answer_reason') or 'no reason'}")


def await_exit(ws: Workspace, team: str, name: str, timeout: float, pending: str,
               announce: str | None = None, say: Say = _quiet) -> None:
    """Wait until `name` has no live process; TeamdError after `timeout`."""
    if not wait(ws, team, timeout, lambda: not actions.still_up(ws, team, [name]),
                lambda: pending, announce=announce, say=say):
        raise TeamdError(f"{name} is still running after {timeout:g}s")


def stop(ws: Workspace, team: str, name: str, timeout: float, say: Say = _quiet) -> None:
    """`stop --force`: desired=stopped, then wait until the member is no longer live (the
    supervisor sends SIGTERM, then SIGKILL after `stop_timeout`)."""
    if actions.stop(ws, team, name)["status"] == "shutdown":
        return
    await_exit(ws, team, name, timeout,
               f"{name} is still running (desired=stopped: the supervisor stops it)",
               announce=f"stopping {name} (waiting for it to exit)", say=say)


def remove(ws: Workspace, team: str, name: str, *, force: bool = False,
           timeout: float, sender: str | None = None) -> Json:
    """`remove`: the shutdown handshake (or, with `force` or for a lead, desired=stopped),
    wait until the member is gone, then take it out of the roster (`actions.remove_member`,
    whose result this returns; `{"name"}` alone when it finishes a removal a kill cut short
    after the roster's write)."""
    config = actions.require_team(ws, team)
    if roster.find(config, name) is None and journal_gaps.mend_removal(ws, team, name):
        return {"name": name}
    member = roster.get(config, name)
    if member["desired"] == "running" or actions.still_up(ws, team, [name]):
        if actions.stops_without_handshake(member, force, sender):
            actions.stop(ws, team, name)
        elif member["status"] != "stopping":
            rid = actions.shutdown(ws, team, name, reason=f"removed from team {team}",
                                   sender=sender)["request"]["request_id"]
            await_shutdown(ws, team, rid, name, timeout, gone_is_enough=True)
            if roster.get(actions.require_team(ws, team), name)["desired"] == "running":
                actions.stop(ws, team, name)  # it died unanswered: not to be started again
    await_exit(ws, team, name, timeout,
               f"{name} is still running; it leaves the roster once it is down")
    return actions.remove_member(ws, team, name)


# -- the whole team -----------------------------------------------------------------------
def answers(ws: Workspace, team: str, opened: list[Json]) -> list[Json]:
    """The requests `opened` as they are now; none once the team's folder is gone."""
    try:
        return [requests.get(ws, team, r["request_id"]) for r in opened]
    except (BadInput, OSError):
        if actions.team_gone(ws, team):
            return []
        raise


def rejections(ws: Workspace, team: str, opened: list[Json]) -> list[str]:
    """"alice (busy)" for each of the requests `opened` that was rejected."""
    return [f"{r['recipient']} ({r.get('answer_reason') or 'no reason'})"
            for r in answers(ws, team, opened) if r["status"] == "rejected"]


def still_pending(ws: Workspace, team: str, opened: list[Json]) -> str:
    """Who is still up and which of the requests `opened` are unanswered, in words."""
    try:
        up_now = actions.still_up(ws, team)
    except BadInput:
        if actions.team_gone(ws, team):
            return f"team {team} is gone"
        raise
    waiting = [f"{r['recipient']} (request {r['request_id']} pending)"
               for r in answers(ws, team, opened) if r["status"] == "pending"]
    parts = []
    if up_now:
        parts.append(f"still up: {', '.join(up_now)}")
    if waiting:
        parts.append(f"not answered: {', '.join(waiting)}")
    return "; ".join(parts) or "nothing (every member is down)"


def await_down(ws: Workspace, team: str, opened: list[Json], timeout: float,
               announce: str | None = None, say: Say = _quiet) -> None:
    """`down --wait`: until every member is down; TeamdError when one of the requests
    `opened` is rejected or `timeout` passes."""

    def settled() -> bool:
        return bool(rejections(ws, team, opened)) or not actions.still_up(ws, team)

    ok = wait(ws, team, timeout, settled, lambda: still_pending(ws, team, opened),
              announce=announce, say=say)
    rejected = rejections(ws, team, opened)
    if rejected:
        raise TeamdError(f"rejected the shutdown: {', '.join(rejected)}")
    if not ok:
        raise TeamdError(f"timed out after {timeout:g}s: {still_pending(ws, team, opened)}")


def delete(ws: Workspace, team: str, *, force: bool = False, purge: bool = False,
           timeout: float, sender: str | None = None, say: Say = _quiet) -> Path | None:
    """`delete`: `actions.delete_team`, then wait until the team's folders are gone (whoever
    removes them: the supervisor, or this wait once nobody is live). Says whom it asked to
    shut down; returns the archive (None when purged). TeamdError when a member rejects or
    `timeout` passes: the team stays `deleting`."""
    started = actions.delete_team(ws, team, force=force, purge=purge, sender=sender)
    opened = started["requests"]

    def finished() -> bool:
        if actions.team_gone(ws, team):
            return True
        return bool(rejections(ws, team, opened)) or actions.finish_delete(ws, team)

    def pending() -> str:
        if actions.team_gone(ws, team):
            return f"team {team} is deleted"
        return (f"team {team} is being deleted; {still_pending(ws, team, opened)}; "
                f"`teamctl delete {team}` again waits for it (--force stops everyone)")

    said = actions.asked_to_shut_down(opened)
    if started["deleted"] and said:
        say(said)  # they exited at once: still say what was asked
    done = started["deleted"] or wait(ws, team, timeout, finished, pending, announce=said,
                                      say=say)
    if not actions.team_gone(ws, team):
        rejected = rejections(ws, team, opened)
        why = f"rejected the shutdown: {', '.join(rejected)}" if rejected else \
            f"timed out after {timeout:g}s" if not done else "not removed"
        raise TeamdError(f"team {team} is not deleted: {why}; "
                         f"{still_pending(ws, team, opened)}; it stays `deleting` "
                         f"(`teamctl delete {team} --force` stops everyone)")
    archives = ws.store.archives(team)
    return Path(archives[-1]) if archives and not purge else None
