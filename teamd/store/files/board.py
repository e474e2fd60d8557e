"""The board's files: `.tasks/{team}/{id}.json`, `.highwatermark`, the board lock (CONTRACT §5).

A task file is named by its id and replaced whole; `.highwatermark` holds the last id handed
out and is advanced and fsynced before the task file of the new id is written, so an id is
never handed out twice nor reused, even after its file is gone. Only when `.highwatermark`
is missing or unreadable (a hand edit), or its next id is somehow taken, do the ids on disk
count: listed by name, never parsed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial

from teamd import files
from teamd.files import Json
from teamd.store.errors import check_task, good_tasks
from teamd.store.files.base import Base
from teamd.store.files.records import read_record
from teamd.store.files.units import unit

#: a task file's name: `{id}.json` exactly as `Paths.task` spells it (no leading zero)
_TASK_NAME = re.compile(r"([1-9][0-9]*)\.json")


class Board(Base):
    """board_exists, board_unit, claim_unit, task_ids, read_task, read_tasks, write_task,
    next_task_id, top_task_id, raise_top_task_id."""

    def board_exists(self, team: str) -> bool:
        return self.paths.tasks_dir(team).is_dir()

    @contextmanager
    def board_unit(self, team: str) -> Iterator[None]:
        with unit(self.paths.board_lock(team)):
            yield

    @contextmanager
    def claim_unit(self, team: str, task_id: int) -> Iterator[Json | None]:
        """The board's own unit: claims of different tasks take turns too."""
        with self.board_unit(team):
            yield self.read_task(team, task_id)

    def task_ids(self, team: str) -> list[int]:
        try:
            names = os.listdir(self.paths.tasks_dir(team))
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(int(m[1]) for m in map(_TASK_NAME.fullmatch, names) if m)

    def read_task(self, team: str, task_id: int) -> Json | None:
        path = self.paths.task(team, task_id)
        task = read_record(path)
        return None if task is None else check_task(task, task_id, str(path))

    def read_tasks(self, team: str) -> list[Json]:
        paths = ((task_id, self.paths.task(team, task_id)) for task_id in self.task_ids(team))
        return good_tasks((task_id, partial(read_record, path), str(path))
                          for task_id, path in paths)

    def write_task(self, team: str, task: Json) -> None:
        files.write_json(self.paths.task(team, int(task["id"])), task)

    def next_task_id(self, team: str) -> int:
        hwm_path = self.paths.highwatermark(team)
        try:
            hwm: int | None = int(hwm_path.read_text().strip() or 0)
        except (FileNotFoundError, ValueError):
            hwm = None  # missing or unreadable: the highest id on disk counts below
        new = (hwm or 0) + 1
        if hwm is None or self.paths.task(team, new).exists():
            new = max([hwm or 0, *self.task_ids(team)]) + 1
        files.atomic_write_bytes(hwm_path, f"{new}\n".encode())
        return new

    def top_task_id(self, team: str) -> int:
        try:
            return int(self.paths.highwatermark(team).read_text().strip() or 0)
        except (OSError, ValueError):
            return 0

    def raise_top_task_id(self, team: str, top: int) -> None:
        if int(top) > self.top_task_id(team):
            files.atomic_write_bytes(self.paths.highwatermark(team), f"{int(top)}\n".encode())
