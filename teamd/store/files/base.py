"""What every part of the files store shares: the root, its paths, its settings; and steps
`together`, which are nothing more here: each unit is durable as it ends (CONTRACT §15's
one-transaction promise is the PostgreSQL store's)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
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

    def together(self) -> AbstractContextManager[None]:
        return nullcontext()

    def apart(self) -> AbstractContextManager[None]:
        return nullcontext()

    def after_commit(self, step: Callable[[], None]) -> None:
        step()
