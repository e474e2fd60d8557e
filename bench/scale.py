#!/usr/bin/env python3
"""The scale curves of issue 10: what one claim, one `task add`, an idle team and a large
roster cost as the board and the team grow.

Also home of `write_board`, which lays a board of any size straight onto disk in the
contract's format (the API would take minutes for 100k tasks); tests/test_board_scale.py
uses it too.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from teamd import files
from teamd.layout import Workspace

#: tasks per dependency chain in a written board: 1 ← 2 ← 3, 4 ← 5 ← 6, …
CHAIN = 3


def write_board(ws: Workspace, team: str, n: int, *, done: int = 0) -> None:
    """Tasks 1..n of an existing team's board, written directly as `board.create` would
    leave them (CONTRACT §5), and `.highwatermark` = n. Tasks form chains of CHAIN (each
    blocked by the one before it in its chain, both ways); tasks 1..done are completed,
    owned by `bench`. Not fsynced: a benchmark's scratch board, fast to build."""
    folder = ws.tasks_dir(team)
    now = time.time()
    for i in range(1, n + 1):
        completed = i <= done
        task = {"schema": 1, "id": i, "subject": f"task {i}", "description": "",
                "status": "completed" if completed else "pending",
                "owner": "bench" if completed else None,
                "blocked_by": [i - 1] if (i - 1) % CHAIN else [],
                "blocks": [i + 1] if i % CHAIN and i < n else [],
                "created_by": "lead", "created_at": now, "updated_at": now,
                "claimed_at": now if completed else None,
                "completed_at": now if completed else None, "commits": []}
        fd = os.open(folder / f"{i}.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(files.dumps_doc(task))
    files.atomic_write_bytes(ws.highwatermark(team), f"{n}\n".encode())
