"""The seed design's task claim: scan the board, take the first unclaimed task, write it.

`TASK_MGR.update` holds a lock while it writes (a thread lock in the seeds; an flock here,
since the racers are processes), but the scan that chose the task is outside it and the
update does not look again: two racers that scanned the same board claim the same task.
Reads the same `.tasks/{team}/{id}.json` files teamd writes. For comparison only.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any


def list_all(folder: Path) -> list[dict[str, Any]]:
    tasks = []
    for path in folder.glob("*.json"):
        if path.stem.isdigit():
            try:
                tasks.append(json.loads(path.read_text()))
            except ValueError:
                continue  # caught mid-write (the seeds write in place)
    return sorted(tasks, key=lambda t: int(t["id"]))


def update(folder: Path, task_id: int, **changes: Any) -> None:
    fd = os.open(folder / ".seed.lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        path = folder / f"{task_id}.json"
        task = json.loads(path.read_text())
        task.update(changes)
        path.write_text(json.dumps(task, indent=2))
    finally:
        os.close(fd)


def claim(folder: Path, name: str) -> int | None:
    """The seeds' idle-loop claim: scan, then write; returns the id this racer took."""
    unclaimed = [t for t in list_all(folder)
                 if t["status"] == "pending" and not t["owner"] and not t["blocked_by"]]
    if not unclaimed:
        return None
    task_id = int(unclaimed[0]["id"])
    update(folder, task_id, status="in_progress", owner=name)
    return task_id
