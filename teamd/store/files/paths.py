"""Every path under `.teams/` and `.tasks/` (CONTRACT §2): the files store's layout.

Only the files store (`teamd.store.files`) builds these paths; everything else asks the
store for records. The paths a host keeps for itself whatever the store — `teamd.toml`,
`.worktrees/`, a member process's own stderr log `logs/{name}.log` — are `Workspace`'s
(`teamd.layout`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from teamd.errors import BadInput
from teamd.names import ARCHIVE_TS_RE, NAME_RE, validate_name


@dataclass(frozen=True)
class Paths:
    root: Path

    @property
    def teams_dir(self) -> Path:
        return self.root / ".teams"

    @property
    def tasks_root(self) -> Path:
        return self.root / ".tasks"

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

    def permissions(self, team: str) -> Path:
        """The team's "always" answers to permission requests (CONTRACT.md section 11)."""
        return self.team_dir(team) / "permissions.json"

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

    def paged(self, team: str) -> Path:
        """The ids of the messages the person_needed hook already ran for (teamd's own)."""
        return self.team_dir(team) / "person_needed.json"

    def team_exists(self, team: str) -> bool:
        return self.config(team).is_file()
