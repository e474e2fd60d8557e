"""What no rule can open (CONTRACT §11): the files a member's file tools never write or
edit, whatever the permission rules say.

teamd's own files — `teamd.toml` and the store's own folders (`.teams/` and `.tasks/` of
the root, for the files store) — hold the rules, the roster and the board that bind the
model: a model that could rewrite them could free itself. Another member's worktree
(anything under `.worktrees/` but the member's own `.worktrees/{team}/{name}/`) is that
member's work. Paths are judged once every symlink is resolved; reading them stays allowed.
"""

from __future__ import annotations

import os
from pathlib import Path

from teamd.agent.tools_files import ToolError
from teamd.layout import Workspace

#: the file tools that write (read_file reads anything inside the member's cwd)
WRITING_TOOLS = ("write_file", "edit_file")
OWN_FILES = "refused: teamd's own files"
OTHER_WORKTREE = "refused: another member's worktree"


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def check_write(ws: Workspace, team: str, member: str, target: Path) -> None:
    """ToolError when `target` (a path with its symlinks resolved) is one a file tool must
    not write for member `member` of `team`."""
    resolved = _real(target)
    if resolved == _real(ws.settings_file) or any(
            _inside(resolved, _real(d)) for d in ws.store.own_folders()):
        raise ToolError(f"{OWN_FILES} ({resolved}): the rules, the roster and the board "
                        "change only through the person (teamctl) or the team tools")
    if _inside(resolved, _real(ws.worktrees_root)) and not _inside(
            resolved, _real(ws.worktrees_root / team / member)):
        raise ToolError(f"{OTHER_WORKTREE} ({resolved}): work in your own directory, or "
                        "message its owner")
