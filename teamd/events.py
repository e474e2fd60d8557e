"""The team's journal (CONTRACT.md section 7): what an event is, and its rules.

Append-only, one object per line with `ts`, `event` and `member` where one applies;
rotated once it passes `events_max_bytes`, keeping `events_keep` (by the settings in force:
this module's). Where and how the lines are kept, rotated and streamed is the store's
(`ws.store.emit`, `read_journal`, `stream_journal`); which records concern whom, which are
chatter, and a record's time are here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import Any

from teamd import settings
from teamd.errors import BadInput
from teamd.files import Json
from teamd.layout import Workspace

log = logging.getLogger(__name__)


def emit(ws: Workspace, team: str, event: str, member: str | None = None,
         **fields: Any) -> Json:
    """Append one event (rotating first if the journal is too big). Returns the record."""
    record: Json = {"ts": time.time(), "event": event}
    if member is not None:
        record["member"] = member
    record.update(fields)
    emit_many(ws, team, [record])
    return record


#: the settings in force of a process that holds them (teamd, a teammate), by settings file:
#: its journal writes rotate by these instead of reading teamd.toml again for each event
_in_force: dict[Path, settings.Settings] = {}


def use_settings(ws: Workspace, conf: settings.Settings) -> None:
    """Rotate this process's journal writes under `ws` by `conf` from now on: for the
    supervisor and a teammate, which read teamd.toml themselves (at start, on SIGHUP, before
    a model call). A process that never calls this (teamctl) reads teamd.toml at each write."""
    _in_force[ws.settings_file] = conf


def _settings(ws: Workspace) -> settings.Settings:
    conf = _in_force.get(ws.settings_file)
    if conf is not None:
        return conf
    try:
        return settings.load_file(ws)  # the journal's limits are flat keys: the host's own
    except BadInput as exc:
        # A broken teamd.toml must not lose the journal entry of a write already made.
        log.warning("%s; rotating events with the default limits", exc)
        return settings.Settings()


def emit_many(ws: Workspace, team: str, records: list[Json]) -> None:
    """Append records as one step, rotating first by the settings in force (nothing when
    the team is gone: its deletion raced the write)."""
    conf = _settings(ws)
    ws.store.emit(team, records, max_bytes=conf.events_max_bytes, keep=conf.events_keep)


def read(ws: Workspace, team: str, member: str | None = None) -> list[Json]:
    """Current journal records (oldest first), optionally only those about `member`."""
    records = ws.store.read_journal(team)
    if member is None:
        return records
    return [r for r in records if _concerns(r, member)]


def _concerns(record: Json, member: str) -> bool:
    if record.get("member") == member:
        return True
    msg = record.get("message")
    return isinstance(msg, dict) and member in (msg.get("sender"), msg.get("recipient"))


def concerns(record: Json, names: Sequence[str]) -> bool:
    """Is the record about one of `names` (as the member, or a message's sender or
    recipient)? Every record is, when `names` is empty."""
    return not names or any(_concerns(record, n) for n in names)


def is_chatter(record: Json) -> bool:
    """Routine records `teamctl logs` shows only with -v: model calls, idle notices."""
    if record.get("event") == "model_call":
        return True
    msg = record.get("message")
    return record.get("event") == "message" and isinstance(msg, dict) \
        and msg.get("type") == "idle_notification"


def ts_of(rec: Json) -> float:
    """A record's `ts` (0 when it has none)."""
    ts = rec.get("ts")
    return float(ts) if isinstance(ts, int | float) else 0.0


def follow(ws: Workspace, team: str, member: str | None = None,
           poll: float = 0.2, from_start: bool = False) -> Generator[Json, None, None]:
    """Yield new events as they are appended (survives rotation). Runs until interrupted.
    With `from_start`, first every event already in the journal (no gap between the two)."""
    yield from ws.store.stream_journal(
        team, match=None if member is None else (lambda r: _concerns(r, member)),
        follow=True, history=from_start, poll=poll, stop_at_deletion=False)


def stream(ws: Workspace, team: str, *, archive: str | None = None,
           match: Callable[[Json], bool] | None = None,
           last: int | None = None, since: float | None = None, follow: bool = False,
           history: bool = True, poll: float = 0.5,
           stop_at_deletion: bool = True,
           on_bad: Callable[[bytes], None] | None = None,
           on_caught_up: Callable[[], None] | None = None) -> Generator[Json, None, None]:
    """The journal of `team` (or of its deleted namesake's `archive`, one of
    `ws.store.archives(team)`), rotated files first, as it is read: memory stays flat
    whatever its size.

    `match` filters; `last` starts after the last N events that pass the filters (read
    backwards from the end); `since` drops older events; without `history` (and without
    `last`) it starts at the end. With `follow` it then waits for new events, across
    rotations; with `stop_at_deletion` it ends after `team_deleted`, or once the team is
    gone (what was written before is read out first).
    `on_bad` is called with each line read in passing that is not a JSON object (garbage a
    person or a broken disk put there): it is skipped, and the caller can say so.
    `on_caught_up` is called once the history is read, before following.
    """
    keep = match or (lambda _r: True)

    def wanted(rec: Json) -> bool:  # a time filter only: a clock may have stepped back
        return (since is None or ts_of(rec) >= since) and keep(rec)

    return ws.store.stream_journal(
        team, archive=archive, match=wanted, last=last, follow=follow, history=history,
        poll=poll, stop_at_deletion=stop_at_deletion, on_bad=on_bad,
        on_caught_up=on_caught_up)
