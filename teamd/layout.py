"""Every path of a workspace, and name validation.

A workspace is one root folder (`--root`, else `$TEAMD_ROOT`, else the current directory)
holding `.teams/` and `.tasks/` as laid out in CONTRACT.md section 2. Nothing else in the
package builds a path by hand: it asks a `Workspace`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from teamd.errors import BadInput

# the names are layout's vocabulary too: re-exported for its many readers
from teamd.names import ARCHIVE_TS_RE as ARCHIVE_TS_RE
from teamd.names import LEAD as LEAD
from teamd.names import NAME_RE as NAME_RE
from teamd.names import ROOT_ENV as ROOT_ENV
from teamd.names import SUPERVISOR as SUPERVISOR
from teamd.names import USER as USER
from teamd.names import validate_member_name as validate_member_name
from teamd.names import validate_name as validate_name

if TYPE_CHECKING:
    from teamd.store.api import Store


def resolve_root(root: str | os.PathLike[str] | None = None) -> Path:
    """The workspace root: the argument, else $TEAMD_ROOT, else the current directory."""
    chosen = root if root is not None else os.environ.get(ROOT_ENV) or os.getcwd()
    return Path(chosen).expanduser().absolute()


@dataclass(frozen=True)
class Workspace:
    root: Path

    @cached_property
    def store(self) -> Store:
        """Where this root's records live (CONTRACT §15): the files under `.teams/` and
        `.tasks/` unless configured otherwise."""
        from teamd.store import open_store  # the store imports layout: not at module level
        return open_store(self.root)

    @classmethod
    def at(cls, root: str | os.PathLike[str] | None = None) -> Workspace:
        return cls(resolve_root(root))

    # -- workspace-wide ----------------------------------------------------------------
    @property
    def settings_file(self) -> Path:
        return self.root / "teamd.toml"

    @property
    def teams_dir(self) -> Path:
        return self.root / ".teams"

    @property
    def tasks_root(self) -> Path:
        return self.root / ".tasks"

    @property
    def worktrees_root(self) -> Path:
        return self.root / ".worktrees"

    @property
    def supervisor_lock(self) -> Path:
        return self.teams_dir / "teamd.lock"

    @property
    def supervisor_info(self) -> Path:
        return self.teams_dir / "teamd.json"

    @property
    def archive_dir(self) -> Path:
        """Where `delete` keeps a deleted team's journal, sessions and transcripts."""
        return self.teams_dir / ".archive"

    def archives(self, team: str) -> list[Path]:
        """The archive folders of deleted teams called `team`, oldest first."""
        validate_name(team, "team name")
        if not self.archive_dir.is_dir():
            return []
        return sorted(p for p in self.archive_dir.iterdir()
                      if p.name.startswith(f"{team}-") and ARCHIVE_TS_RE.fullmatch(
                          p.name[len(team) + 1:]))

    @property
    def ratelimit_file(self) -> Path:
        """The shared API back-off of the root (CONTRACT.md section 12)."""
        return self.teams_dir / "ratelimit.json"

    @property
    def calls_dir(self) -> Path:
        """The slot locks of `max_concurrent_calls` (CONTRACT.md section 12)."""
        return self.teams_dir / ".calls"

    def team_names(self) -> list[str]:
        """Teams on disk (folders holding a config.json), sorted."""
        if not self.teams_dir.is_dir():
            return []
        return sorted(
            p.name
            for p in self.teams_dir.iterdir()
            if NAME_RE.fullmatch(p.name) and (p / "config.json").is_file()
        )

    # -- one team ----------------------------------------------------------------------
    def team_dir(self, team: str) -> Path:
        return self.teams_dir / validate_name(team, "team name")

    def config(self, team: str) -> Path:
        return self.team_dir(team) / "config.json"

    def members_dir(self, team: str) -> Path:
        """Each member's live state, one file per member (CONTRACT.md section 4)."""
        return self.team_dir(team) / "members"

    def member_status(self, team: str, member: str) -> Path:
        """`members/{name}.json`: what member `member` is right now (CONTRACT.md §4)."""
        return self.members_dir(team) / f"{validate_name(member, 'member name')}.json"

    def spend(self, team: str) -> Path:
        """The team's spend so far (CONTRACT.md section 12)."""
        return self.team_dir(team) / "spend.json"

    def inbox(self, team: str, member: str) -> Path:
        return self.team_dir(team) / f"{validate_name(member, 'member name')}_inbox.jsonl"

    def requests_dir(self, team: str) -> Path:
        return self.team_dir(team) / "requests"

    def request(self, team: str, request_id: str) -> Path:
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", request_id or ""):
            raise BadInput(f"invalid request id {request_id!r}")
        return self.requests_dir(team) / f"{request_id}.json"

    def removed_dir(self, team: str) -> Path:
        """Where `remove` keeps a removed member's session and inbox, for a person to read
        (`removed/{name}-{ts}/`): a member spawned again by that name starts afresh."""
        return self.team_dir(team) / "removed"

    def removed(self, team: str, member: str) -> list[Path]:
        """The folders `remove` kept of members called `member`, oldest first."""
        validate_name(member, "member name")
        folder = self.removed_dir(team)
        if not folder.is_dir():
            return []
        return sorted(p for p in folder.iterdir() if p.name.startswith(f"{member}-")
                      and ARCHIVE_TS_RE.fullmatch(p.name[len(member) + 1:]))

    def sessions_dir(self, team: str) -> Path:
        return self.team_dir(team) / "sessions"

    def session(self, team: str, member: str) -> Path:
        return self.sessions_dir(team) / f"{validate_name(member, 'member name')}.jsonl"

    def transcripts_dir(self, team: str) -> Path:
        return self.team_dir(team) / "transcripts"

    def logs_dir(self, team: str) -> Path:
        return self.team_dir(team) / "logs"

    def member_log(self, team: str, member: str) -> Path:
        return self.logs_dir(team) / f"{validate_name(member, 'member name')}.log"

    def events(self, team: str) -> Path:
        return self.team_dir(team) / "events.jsonl"

    def tasks_dir(self, team: str) -> Path:
        return self.tasks_root / validate_name(team, "team name")

    def task(self, team: str, task_id: int) -> Path:
        return self.tasks_dir(team) / f"{int(task_id)}.json"

    def highwatermark(self, team: str) -> Path:
        return self.tasks_dir(team) / ".highwatermark"

    def board_lock(self, team: str) -> Path:
        return self.tasks_dir(team) / "board"

    def worktree(self, team: str, member: str) -> Path:
        """Where a member's git worktree goes (CONTRACT.md section 13)."""
        return (self.worktrees_root / validate_name(team, "team name")
                / validate_name(member, "member name"))

    def paged(self, team: str) -> Path:
        """The ids of the messages the person_needed hook already ran for (teamd's own)."""
        return self.team_dir(team) / "person_needed.json"

    def team_exists(self, team: str) -> bool:
        return self.config(team).is_file()
