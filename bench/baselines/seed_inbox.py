"""The seed design's inbox: a lock file made with `O_CREAT|O_EXCL`, tried 50 times 50 ms
apart, then written WITHOUT the lock ("do not block the flow"); read = read all, then clear.

Copied from the seed documents (v8 `_write_to_inbox`, s09 `read_inbox`) for comparison only:
the fall-through write and the unlocked clear are what lose messages under contention.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any


def write_to_inbox(inbox_path: Path, message: dict[str, Any], fsync: bool = False) -> None:
    lock_path = inbox_path.with_suffix(".lock")
    for _ in range(50):  # at most 50 tries
        try:
            fd = os.open(str(lock_path), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            os.close(fd)  # created = holding the lock
            break
        except FileExistsError:
            time.sleep(0.05)  # 50 ms, then try again
    else:
        pass  # timed out: write without the lock (the seeds' fall-through)
    try:
        with open(inbox_path, "a") as f:
            f.write(json.dumps(message) + "\n")
            if fsync:  # not in the seeds: the "fsync on" variant of the benchmark
                f.flush()
                os.fsync(f.fileno())
    finally:
        try:
            lock_path.unlink(missing_ok=True)  # release (even a lock someone else holds)
        except OSError:
            pass


def read_inbox(inbox_path: Path) -> list[dict[str, Any]]:
    """Read every line, then clear the file (no lock, as in the seeds)."""
    if not inbox_path.exists():
        return []
    msgs = [json.loads(line) for line in inbox_path.read_text().strip().splitlines() if line]
    inbox_path.write_text("")  # drain
    return msgs
