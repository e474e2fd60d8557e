"""Who supervises this root: the store's supervisor claim and its record (files:
`.teams/teamd.lock`, a flock, and `.teams/teamd.json`).

The claim is the truth (the kernel drops a flock when the supervisor dies); the record says
which process holds it, checked here against its start time so a reused pid never counts.
"""

from __future__ import annotations

import os
import time
from typing import Any

import psutil

from teamd import apikey
from teamd.errors import BadInput
from teamd.files import Json
from teamd.layout import Workspace
from teamd.proc import live_process


def running(ws: Workspace) -> Json | None:
    """The live supervisor's record, or None when no supervisor runs for this root."""
    info = ws.store.supervisor_info()
    if not info or live_process(info.get("pid"), info.get("create_time")) is None:
        return None
    return info


def claim(ws: Workspace, version: str) -> Any:
    """Become this root's supervisor (a handle for `release`) or raise BadInput naming the
    holder. The record says whether this supervisor holds an API key (`api_key_set`)."""
    me = psutil.Process(os.getpid())
    record: dict[str, Any] = {"schema": 1, "pid": me.pid, "create_time": me.create_time(),
                              "started_at": time.time(), "version": version,
                              "api_key_set": apikey.held() is not None}  # never the key
    handle = ws.store.claim_supervisor(record)
    if handle is None:
        holder = running(ws)
        who = f" (pid {holder['pid']})" if holder else ""
        raise BadInput(f"another teamd already supervises {ws.root}{who}")
    return handle


def release(ws: Workspace, handle: Any) -> None:
    """Stop being this root's supervisor: its record goes, then the claim."""
    ws.store.release_supervisor(handle)
