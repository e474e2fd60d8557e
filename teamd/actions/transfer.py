"""A team copied whole from one store to another (CONTRACT §15): `teamctl export TEAM DIR`
(the team into a files root, a backup `jq` reads) and `teamctl import DIR` (every team of a
files root into the workspace's store). Both are `copy_team`, written once against the
`Store` protocol only.

Everything a team keeps is copied: its roster and member states, its tasks and the id
high-water mark, inboxes, requests, "always" rules, journal, sessions, transcripts, spend,
and teamd's paged record. Not copied: what only a live root has (locks, the members' own
stderr logs, lines a reader moved to `*.rejected.jsonl`, what `remove` put aside) and what
is the root's rather than the team's (the supervisor's record, the shared back-off).

A running `teamd` of the target root must start no member before its session is in: the
team is created with no members, and its real roster is written last. Checks come first
(the team is not in the target, every source team is readable), then the copy.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from teamd import budget, linescan
from teamd.errors import BadInput
from teamd.files import Json
from teamd.layout import Workspace
from teamd.names import LEAD, USER
from teamd.store.api import Store

#: records written in one step (journal lines, session records, messages)
BATCH = 2000
#: told of how far a copy is: (team, what, how many so far)
Progress = Callable[[str, str, int], None]


def export_team(ws: Workspace, team: str, folder: Path,
                progress: Progress | None = None) -> Json:
    """Write `team` of `ws`'s store into the files root `folder` (made if missing), with no
    lock file and no `logs/`. BadInput when `folder` already holds a team of that name."""
    from teamd.actions.teams import require_team
    from teamd.store.files import FilesStore

    require_team(ws, team)
    target = FilesStore(folder.absolute())
    if target.team_exists(team) or target.board_exists(team):
        raise BadInput(f"{folder} already holds team {team!r}: export into another folder")
    folder.mkdir(parents=True, exist_ok=True)
    done = copy_team(ws.store, target, team, progress)
    target.drop_live_files(team)
    return {**done, "to": str(folder)}


def import_root(ws: Workspace, folder: Path, progress: Progress | None = None) -> list[Json]:
    """Load every team of the files root `folder` into `ws`'s store. BadInput, naming it,
    for a team the store has already (then nothing is imported), or when `folder` holds no
    team."""
    from teamd.store.files import FilesStore

    if not folder.is_dir():
        raise BadInput(f"no such directory: {folder}")
    source = FilesStore(folder.absolute())
    teams = source.team_names()
    if not teams:
        raise BadInput(f"{folder} holds no team (a files root: .teams/TEAM/config.json)")
    there = [t for t in teams if ws.store.team_exists(t) or ws.store.board_exists(t)]
    if there:
        raise BadInput(f"team {there[0]!r} exists already in this root's store "
                       f"({ws.store.description}): `teamctl delete {there[0]}` it first, "
                       f"or import elsewhere; nothing imported")
    for team in teams:
        _spec(source, team)  # every team readable before any is copied
    return [{**copy_team(source, ws.store, team, progress), "from": str(folder)}
            for team in teams]


def _spec(store: Store, team: str) -> Json:
    spec = store.read_spec(team)
    if not isinstance(spec, dict) or not isinstance(spec.get("members"), list):
        raise BadInput(f"{store.describe_spec(team)}: not a team's roster")
    return spec


def copy_team(src: Store, dst: Store, team: str, progress: Progress | None = None) -> Json:
    """Copy `team` from `src` into `dst`, which must not have it; what was copied, counted."""
    tell: Progress = progress or (lambda *_: None)
    spec = _spec(src, team)
    names = sorted({str(m["name"]) for m in spec["members"]} | {LEAD, USER})
    spend = src.read_spend(team) or budget.new_spend()
    if not dst.create_team(team, {**spec, "members": []}, spend):
        raise BadInput(f"team {team!r} exists already in {dst.description}")
    count: dict[str, int] = {"members": len(spec["members"])}
    with dst.board_unit(team):
        ids = src.task_ids(team)
        for task_id in ids:
            task = src.read_task(team, task_id)
            if task is not None:
                dst.write_task(team, task)
        dst.raise_top_task_id(team, src.top_task_id(team))
    count["tasks"] = len(ids)
    requests = src.list_requests(team)
    for request in requests:
        dst.create_request(team, request)
    count["requests"] = len(requests)
    for rule in src.always_rules(team):
        dst.add_always(team, rule)
    judge = linescan.json_judge()
    count["messages"] = sum(_batched(partial(dst.deliver, team, name),
                                     src.peek(team, name, judge)) for name in names)
    count["session_records"] = sum(
        _batched(partial(dst.append_session, team, name), src.read_session(team, name),
                 partial(tell, team, f"session records of {name}")) for name in names)
    kept = src.list_transcripts(team)
    for name, stamp, where in kept:
        dst.keep_transcript(team, name, stamp, src.read_transcript(team, name, where) or [])
    count["transcripts"] = len(kept)
    count["events"] = _batched(partial(dst.emit, team, max_bytes=sys.maxsize, keep=0),
                               src.stream_journal(team, stop_at_deletion=False),
                               partial(tell, team, "journal lines"))
    paged = src.read_paged(team)
    if paged is not None:
        dst.write_paged(team, paged)
    for name in names:
        state = src.read_state(team, name)
        if state is not None:
            with dst.member_unit(team, name):
                dst.write_state(team, name, state)
    with dst.roster_unit(team):
        dst.write_spec(team, spec)  # last: the members come to life in `dst` only now
    return {"team": team, "from": src.description, "to": dst.description, **count}


def _batched(write: Callable[[list[Json]], Any], records: Iterable[Json],
             told: Callable[[int], None] | None = None) -> int:
    """Write `records` BATCH at a time (memory flat however long they are); how many."""
    done = 0
    for chunk in _chunks(records):
        write(chunk)
        done += len(chunk)
        if told is not None:
            told(done)
    return done


def _chunks(records: Iterable[Json]) -> Iterator[list[Json]]:
    chunk: list[Json] = []
    for record in records:
        chunk.append(record)
        if len(chunk) == BATCH:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
