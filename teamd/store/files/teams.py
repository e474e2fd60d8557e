"""Teams coming and going under `.teams/` and `.tasks/` (CONTRACT §2, §9 create, delete, remove).

A team is its folder `.teams/{team}/` holding a `config.json`, and its board `.tasks/{team}/`.
Made: the folders, then the spend, then the roster under its lock (a team always has its
spend). Deleted: its journal ends with `team_deleted`, its board goes first (a crash leaves
no board that a team made again by that name would take for its own, CONTRACT §17), then
its folder is renamed away in one step — into `.teams/.archive/{team}-{ts}/`, or removed.
"""

from __future__ import annotations

import os
from pathlib import Path

from teamd import files, removals
from teamd.errors import BadInput
from teamd.files import Json
from teamd.names import stamp
from teamd.store.files.base import Base
from teamd.store.files.units import unit

#: what an archive keeps of a team folder; inboxes, requests and locks are dropped
ARCHIVED = ("config.json", "members", "sessions", "transcripts", "logs", "tasks", "removed")


class Teams(Base):
    """create_team, delete_team, archives, team_names, team_exists, keep_removed, removed,
    drop_live_files."""

    def team_names(self) -> list[str]:
        return self.paths.team_names()

    def team_exists(self, team: str) -> bool:
        return self.paths.team_exists(team)

    def describe_team(self, team: str) -> str:
        return str(self.paths.team_dir(team))

    def create_team(self, team: str, roster: Json, spend: Json) -> bool:
        p = self.paths
        if p.team_exists(team):
            return False
        board = p.tasks_dir(team)
        if board.is_dir() and not p.team_dir(team).is_dir():
            raise BadInput(f"team {team!r}: the board of a deleted team is left over in "
                           f"{board}; remove that folder to create the team again")
        for folder in (p.teams_dir, p.tasks_root, p.team_dir(team), p.members_dir(team),
                       p.requests_dir(team), p.sessions_dir(team), p.transcripts_dir(team),
                       p.logs_dir(team), board):
            files.ensure_dir(folder)
        with unit(p.config(team)):
            if p.team_exists(team):
                return False
            with unit(p.spend(team)):  # before the roster: a team always has its spend
                files.write_json(p.spend(team), spend)
            files.write_json(p.config(team), roster)
        return True

    def delete_team(self, team: str, last: Json, *, purge: bool) -> str | None:
        p = self.paths
        when = stamp(float(last["ts"]))
        if purge:
            target = p.teams_dir / f".deleted-{team}-{when}-{os.getpid()}"
        else:
            target = files.ensure_dir(p.archive_dir) / f"{team}-{when}"
        with unit(p.events(team)):
            files.append_jsonl(p.events(team), [last], locked=True)
            if p.tasks_dir(team).is_dir():  # the board first, into the folder that goes next
                removals.rename(p.tasks_dir(team), p.team_dir(team) / "tasks")
            removals.rename(p.team_dir(team), target)
        if purge:
            removals.remove_tree(target)
            return None
        _prune_archive(target)
        return str(target)

    def archives(self, team: str) -> list[str]:
        return [str(path) for path in self.paths.archives(team)]

    def read_archived_spec(self, team: str, archive: str) -> Json | None:
        if archive not in self.archives(team):
            return None
        return files.read_json(Path(archive) / "config.json")

    def keep_removed(self, team: str, name: str, stamp: str) -> str | None:
        """Each file moved under its own lock, in the contract's order (inbox, then
        session)."""
        p = self.paths
        moves = [(p.inbox(team, name), "inbox.jsonl"), (p.session(team, name), "session.jsonl")]
        if not any(path.exists() for path, _ in moves):
            return None
        folder = files.ensure_dir(p.removed_dir(team) / f"{name}-{stamp}")
        for path, kept in moves:
            if path.parent.is_dir():
                with unit(path):
                    if path.exists():
                        removals.rename(path, folder / kept)
        return str(folder)

    def removed(self, team: str, name: str) -> list[str]:
        return [str(path) for path in self.paths.removed(team, name)]

    def drop_live_files(self, team: str) -> None:
        """Take away what only a root that runs needs — lock files, an empty `logs/` — from
        a team no process uses (`teamctl export`'s copy: a backup, as section 2 lays out)."""
        for folder in (self.paths.team_dir(team), self.paths.tasks_dir(team)):
            for lock in sorted(folder.rglob("*.lock")):
                removals.remove_file(lock)
        logs = self.paths.logs_dir(team)
        if logs.is_dir() and not any(logs.iterdir()):
            removals.remove_tree(logs)


def _prune_archive(folder: Path) -> None:
    for path in folder.iterdir():
        keep = path.name in ARCHIVED or (path.name.startswith("events")
                                         and path.name.endswith(".jsonl"))
        if keep:
            if path.is_dir():  # the members' status files stay, not their locks
                for lock in path.glob("*.lock"):
                    lock.unlink(missing_ok=True)
            continue
        if path.is_dir():
            removals.remove_tree(path)
        else:
            removals.remove_file(path)
