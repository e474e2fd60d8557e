"""What every part of the files store shares: the root, its paths, its settings."""

from __future__ import annotations

from pathlib import Path

from teamd.store.files.paths import Paths


class Base:
    """The state the files store's parts (mixins of `FilesStore`) have in common."""

    description = "files"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths = Paths(root)

    def own_folders(self) -> list[Path]:
        return [self.paths.teams_dir, self.paths.tasks_root]
