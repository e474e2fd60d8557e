"""A workspace: one root folder (`--root`, else `$TEAMD_ROOT`, else the current directory).

Its records (`.teams/`, `.tasks/`: CONTRACT.md sections 2-7) are its store's
(`Workspace.store`; the files store alone builds paths there). What a host keeps for itself
whatever the store is here: `teamd.toml`, `.worktrees/`, a member process's own stderr log,
a Claude Code member's state.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

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
    """A root, its store, and the paths a host keeps for itself whatever the store."""

    root: Path
    #: the store chosen for this run (`--store`); None: the `store` setting decides
    store_url: str | None = None

    @cached_property
    def store(self) -> Store:
        """Where this root's records live (CONTRACT §15): `--store`, else the `store`
        setting (`TEAMD_STORE`, `teamd.toml`), else the files under `.teams/` and `.tasks/`."""
        from teamd import settings  # both import layout: not at module level
        from teamd.store import open_store
        return open_store(self.root, self.store_url or settings.store_url(self))

    @classmethod
    def at(cls, root: str | os.PathLike[str] | None = None, store: str | None = None
           ) -> Workspace:
        return cls(resolve_root(root), store)

    @property
    def settings_file(self) -> Path:
        return self.root / "teamd.toml"

    @property
    def worktrees_root(self) -> Path:
        return self.root / ".worktrees"

    def worktree(self, team: str, member: str) -> Path:
        """Where a member's git worktree goes (CONTRACT.md section 13)."""
        return (self.worktrees_root / validate_name(team, "team name")
                / validate_name(member, "member name"))

    # -- a member's local files: on the host that runs it, whatever the store (CONTRACT §15);
    # inside the team's folder, so that a delete archives them with the team
    def _local(self, team: str) -> Path:
        return self.root / ".teams" / validate_name(team, "team name")

    def member_log(self, team: str, member: str) -> Path:
        """A member process's own stderr, `.teams/{team}/logs/{name}.log`."""
        return self._local(team) / "logs" / f"{validate_name(member, 'member name')}.log"

    def claude_state(self, team: str, member: str) -> Path:
        """A Claude Code member's state, its HOME (settings, transcripts):
        `.teams/{team}/claude/{name}/`, never the user's `~/.claude` (CONTRACT §14)."""
        return self._local(team) / "claude" / validate_name(member, "member name")
