"""Who supervises this root: `.teams/teamd.lock` (flock) and `.teams/teamd.json`.

The flock is the truth (the kernel drops it when the supervisor dies); `teamd.json` says
which process holds it, checked against its start time so a reused pid never counts.
"""

from __future__ import annotations

import os
import time
from typing import Any

import filelock
import psutil

from teamd import apikey, files
from teamd.errors import BadInput
from teamd.files import Json
from teamd.layout import Workspace
from teamd.proc import live_process


def running(ws: Workspace) -> Json | None:
    """The live supervisor's record, or None when no supervisor runs for this root."""
    info = files.read_json(ws.supervisor_info) if ws.supervisor_info.exists() else None
    if not info or live_process(info.get("pid"), info.get("create_time")) is None:
        return None
    return info


def claim(ws: Workspace, version: str) -> filelock.FileLock:
    """Take the supervisor lock for this root or raise BadInput naming the holder. The
    record says whether this supervisor holds an API key (`api_key_set`)."""
    files.ensure_dir(ws.teams_dir)
    lock = filelock.FileLock(str(ws.supervisor_lock), timeout=0, mode=files.FILE_MODE,
                             preserve_lock_file=True)
    try:
        lock.acquire()
    except filelock.Timeout:
        holder = running(ws)
        who = f" (pid {holder['pid']})" if holder else ""
        raise BadInput(f"another teamd already supervises {ws.root}{who}") from None
    me = psutil.Process(os.getpid())
    record: dict[str, Any] = {"schema": 1, "pid": me.pid, "create_time": me.create_time(),
                              "started_at": time.time(), "version": version,
                              "api_key_set": apikey.held() is not None}  # never the key
    files.write_json(ws.supervisor_info, record)
    return lock
