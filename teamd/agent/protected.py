"""What no rule can open (CONTRACT §11): the files a member's file tools never write or
edit, whatever the permission rules say.

teamd's own files — `teamd.toml` and the store's own folders (`.teams/` and `.tasks/` of
the root, for the files store) — hold the rules, the roster and the board that bind the
model: a model that could rewrite them could free itself. Another member's worktree
(anything under `.worktrees/` but the member's own `.worktrees/{team}/{name}/`) is that
member's work. Paths are judged once every symlink is resolved; reading them stays allowed.

The API key file (`api_key_file`; for a systemd credential, its whole folder) is out of
every file tool's reach, reading included (`check_key`): a Claude Code member's `Read`,
`Grep` or `Glob` of it, or of a folder holding it, is refused like the built-in
`read_file`'s. (A shell command runs as the user: the README says what holds for `bash`.)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from teamd import apikey
from teamd.agent.tools_files import ToolError
from teamd.layout import Workspace

#: the file tools that write (read_file reads anything inside the member's cwd)
WRITING_TOOLS = ("write_file", "edit_file")
OWN_FILES = "refused: teamd's own files"
OTHER_WORKTREE = "refused: another member's worktree"
KEY_FILE = "refused: the API key file"


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


def key_place(setting: str, environ: Mapping[str, str]) -> Path | None:
    """What `api_key_file` keeps out of reach: the file, or the credentials folder of a
    systemd credential (a bare name); None without one (or a folder not known here)."""
    if not setting:
        return None
    if "/" not in setting:
        folder = environ.get(apikey.CREDENTIALS_ENV)
        return Path(folder) if folder else None
    return Path(setting)


def check_key(setting: str, environ: Mapping[str, str], cwd: Path, path: str) -> None:
    """ToolError when `path` (relative to `cwd`) is the API key file, inside its folder
    (a systemd credential), or a folder that holds it (a search would read it)."""
    place = key_place(setting, environ)
    if place is None:
        return
    target = Path(path).expanduser()
    resolved, key = _real(target if target.is_absolute() else cwd / target), _real(place)
    if _inside(resolved, key) or _inside(key, resolved):
        raise ToolError(f"{KEY_FILE} ({resolved}): no tool reads it; the team's model calls "
                        "carry the key without it")
