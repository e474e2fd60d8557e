"""The board's files: `.tasks/{team}/{id}.json`, `.highwatermark`, the board lock (CONTRACT §5)."""

from __future__ import annotations

from teamd.store.files.base import Base


class Board(Base):
    """board_unit, task_ids, read_task, write_task, next_task_id, top_task_id."""
