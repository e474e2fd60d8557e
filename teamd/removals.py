"""Removing and renaming files and folders of the product: each is a durable write
(CONTRACT §17), counted by `teamd.crashpoints` like an append or an atomic replace."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from teamd import crashpoints


def remove_file(path: Path) -> None:
    """Remove the file at `path`, if there is one."""
    crashpoints.before("remove", path)
    path.unlink(missing_ok=True)
    crashpoints.after("remove", path)


def rename(source: Path, target: Path) -> None:
    """Rename a file or folder (`os.replace`); counted at the target, its final path."""
    crashpoints.before("rename", target)
    os.replace(source, target)
    crashpoints.after("rename", target)


def remove_tree(path: Path) -> None:
    """Remove a folder and everything in it (what is already gone is no error)."""
    crashpoints.before("remove_tree", path)
    shutil.rmtree(path, ignore_errors=True)
    crashpoints.after("remove_tree", path)
