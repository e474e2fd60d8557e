"""The change feed of the files store: inotify events decoded into `Change`s (CONTRACT §3).

A `FilesFeed` watches `.teams/` and `.tasks/` (teams coming and going) and, for each team it
reports, the team's folder and the sub-folders its kinds live in. It knows what every file
name there means — `config.json` and `members/` are the SPEC, `members/{name}.json` a
MEMBER, `{name}_inbox.jsonl` an INBOX, `.tasks/{team}/{id}.json` a TASK, `.highwatermark`
the TASK_IDS, `requests/` a REQUEST, `spend.json` the SPEND, `events.jsonl` the JOURNAL,
`sessions/` a SESSION — and drops the rest (locks, temp files, records nobody waits on). A
folder made after the feed was opened (a team, its `members/`) is watched the moment its
creation is read, before anything is written in it that a reader could miss.
"""

from __future__ import annotations

import select
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from teamd.names import NAME_RE
from teamd.store import feeds
from teamd.store.changes import Change, Kind
from teamd.store.files.base import Base
from teamd.store.files.paths import Paths
from teamd.watch import Watcher

INBOX_SUFFIX = "_inbox.jsonl"

# what a watched folder is: the two roots, or one of a team's folders
TOP, ROOT, TEAM_DIR, MEMBERS, TASKS, REQUESTS, SESSIONS = (
    "top", "root", "team", "members", "tasks", "requests", "sessions")
#: the kinds a team's sub-folder has to be watched for
SUB_KINDS = {MEMBERS: {Kind.MEMBER}, TASKS: {Kind.TASK, Kind.TASK_IDS},
             REQUESTS: {Kind.REQUEST}, SESSIONS: {Kind.SESSION}}
#: a sub-folder made in a team folder after it was watched
SUB_MADE = {"members": (MEMBERS, Kind.SPEC), "requests": (REQUESTS, Kind.REQUEST),
            "sessions": (SESSIONS, Kind.SESSION)}
TEAM_FILES = {"config.json": Kind.SPEC, "spend.json": Kind.SPEND, "events.jsonl": Kind.JOURNAL}


def _stem(name: str, suffix: str) -> str | None:
    """`name` less `suffix` when what is left is a valid record name."""
    if not name.endswith(suffix):
        return None
    stem = name[: -len(suffix)]
    return stem if NAME_RE.fullmatch(stem) else None


class FilesFeed:
    """The `Feed` (teamd.store.api) of a files store: a `Watcher` whose file names are
    decoded into `Change`s."""

    def __init__(self, paths: Paths, teams: Sequence[str] | None,
                 kinds: frozenset[Kind] | None, poll_fallback: float) -> None:
        self.paths = paths
        self.teams = None if teams is None else set(teams)
        self.kinds = kinds
        self._folders: dict[Path, tuple[str, str]] = {}  # watched folder → (team, what)
        self._pending: list[Change] = []
        self._lost = False
        self._watcher = Watcher([], poll_fallback=poll_fallback)
        self._roots = (paths.teams_dir, paths.tasks_root)
        if not all(root.is_dir() for root in self._roots):  # until they are made
            self._add(paths.root, "", TOP)
        for root in self._roots:
            self._add(root, "", ROOT)
        for team in (self._folders_named() if teams is None else teams):
            self.watch(team)

    def _folders_named(self) -> set[str]:
        """Every team folder there is, also one whose roster is not written yet (made
        just before the feed opened: its roster's arrival must be reported too)."""
        return {child.name for root in self._roots if root.is_dir()
                for child in root.iterdir() if NAME_RE.fullmatch(child.name)}

    def _wants(self, kind: Kind) -> bool:
        return self.kinds is None or kind in self.kinds

    def _add(self, folder: Path, team: str, what: str) -> None:
        if self._watcher.polling or not folder.is_dir():
            return
        self._watcher.add(folder)
        self._folders[folder] = (team, what)

    def _remove(self, folder: Path) -> None:
        self._watcher.remove(folder)
        self._folders.pop(folder, None)

    def _add_sub(self, team: str, what: str) -> None:
        if any(self._wants(k) for k in SUB_KINDS[what]):
            folder = {MEMBERS: self.paths.members_dir, TASKS: self.paths.tasks_dir,
                      REQUESTS: self.paths.requests_dir, SESSIONS: self.paths.sessions_dir}
            self._add(folder[what](team), team, what)

    # -- the Feed interface ----------------------------------------------------------------
    @property
    def polling(self) -> bool:
        return self._watcher.polling

    def fileno(self) -> int:
        return self._watcher.fileno()

    def watch(self, team: str) -> None:
        # no "already watched" short cut: a folder made again needs a new watch
        if self.teams is not None:
            self.teams.add(team)
        self._add(self.paths.team_dir(team), team, TEAM_DIR)
        for what in SUB_KINDS:
            self._add_sub(team, what)

    def unwatch(self, team: str) -> None:
        if self.teams is not None:
            self.teams.discard(team)
        for folder in [f for f, (t, _) in self._folders.items() if t == team]:
            self._remove(folder)

    def drain(self) -> tuple[list[Change], bool]:
        self._read()
        changes, lost = list(dict.fromkeys(self._pending)), self._lost  # one of each
        self._pending, self._lost = [], False
        return changes, lost

    def wait(self, timeout: float | None, also: Sequence[int] = ()) -> bool:
        if self._pending or self._lost:
            return True
        if self._watcher.polling:
            return self._watcher.wait(timeout, also)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self._watcher.fileno(), *also], [], [], left)
            if not ready:
                return False
            if any(fd in ready for fd in also):
                return True
            self._read()  # kept for `drain`: only a change of the kinds asked ends the wait
            if self._pending or self._lost:
                return True

    def close(self) -> None:
        self._watcher.close()

    def __enter__(self) -> FilesFeed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- decoding ------------------------------------------------------------------------
    def _read(self) -> None:
        events, overflow = self._watcher.drain_events()
        self._lost = self._lost or overflow
        for folder, name in events:
            for change in self._decode(folder, name):
                if self._wants(change.kind) and (self.teams is None or change.team in self.teams):
                    self._pending.append(change)

    def _decode(self, folder: Path | None, name: str) -> list[Change]:
        where = self._folders.get(folder) if folder is not None else None
        if where is None:
            return []  # a folder unwatched meanwhile
        team, what = where
        if what == TOP:
            return self._root_made(name)
        change = self._decode_in(team, what, name)
        return [] if change is None else [change]

    def _root_made(self, name: str) -> list[Change]:
        """`.teams/` or `.tasks/` was made after the feed opened: watched, and the teams
        made in it before that reported."""
        made = [root for root in self._roots if root.name == name]
        for root in made:
            self._add(root, "", ROOT)
            if all(root.is_dir() for root in self._roots):
                self._remove(self.paths.root)
        found = [child.name for root in made for child in root.iterdir()] if made else []
        return [c for c in (self._decode_in("", ROOT, n) for n in found) if c is not None]

    def _decode_in(self, team: str, what: str, name: str) -> Change | None:
        if what == ROOT:
            if not NAME_RE.fullmatch(name):
                return None  # teamd.json, ratelimit.json, locks, .archive, .calls
            if self.teams is None or name in self.teams:
                self.watch(name)  # at once: before its config.json lands, so none slips
            return Change(Kind.TEAM, name)
        if what == TEAM_DIR:
            if name in TEAM_FILES:
                return Change(TEAM_FILES[name], team)
            if name in SUB_MADE:
                sub, kind = SUB_MADE[name]
                self._add_sub(team, sub)  # made after the team folder was watched
                return Change(kind, team)
            owner = _stem(name, INBOX_SUFFIX)
            return None if owner is None else Change(Kind.INBOX, team, owner)
        if what == TASKS:
            if name == ".highwatermark":
                return Change(Kind.TASK_IDS, team)
            if name.endswith(".json") and name[:-5].isdigit():
                return Change(Kind.TASK, team, name[:-5])
            return None
        if what == REQUESTS:
            request_id = name[:-5] if name.endswith(".json") else ""
            ok = request_id and not request_id.startswith(".")  # not a temp file
            return Change(Kind.REQUEST, team, request_id) if ok else None
        record = _stem(name, ".jsonl" if what == SESSIONS else ".json")
        if record is None:
            return None
        return Change(Kind.SESSION if what == SESSIONS else Kind.MEMBER, team, record)


class Feeds(Base):
    """changes, wait_for."""

    def changes(self, teams: Sequence[str] | None = None, *,
                kinds: frozenset[Kind] | None = None, poll_fallback: float = 0.5) -> FilesFeed:
        return FilesFeed(self.paths, teams, kinds, poll_fallback)

    def wait_for(self, teams: Sequence[str], check: Callable[[], Any], timeout: float,
                 tick: float = 0.5) -> Any:
        return feeds.wait_on_feed(self, teams, check, timeout, tick)
