"""Who supervises this root: the store's supervisor claim and its record (files:
`.teams/teamd.lock`, a flock, and `.teams/teamd.json`; a store with hosts: this machine's
host, `teamd.hostname.here`, and its record — CONTRACT §15).

The claim is the truth (the kernel drops a flock when the supervisor dies; a host's claim
goes with its connection); the record says which process holds it, checked here against
its start time so a reused pid never counts.
"""

from __future__ import annotations

import os
import time
from typing import Any

import psutil

from teamd import __version__, apikey
from teamd.errors import BadInput
from teamd.files import Json
from teamd.hostname import here
from teamd.hosts import here_record
from teamd.layout import Workspace
from teamd.proc import live_process


def running(ws: Workspace) -> Json | None:
    """This machine's live supervisor's record, or None when none runs here."""
    info = ws.store.supervisor_info()
    if not info or live_process(info.get("pid"), info.get("create_time")) is None:
        return None
    return info


def supervised(ws: Workspace) -> bool:
    """Does some `teamd` act for this root's members: this machine's, or with hosts, any
    alive host's (then a command leaves a member's process to its host)?"""
    if running(ws) is not None:
        return True
    if not ws.store.supports_hosts:
        return False
    from teamd import settings
    return any(h["alive"] for h in ws.store.list_hosts(settings.load(ws).host_timeout))


def claim(ws: Workspace, version: str = __version__) -> Any:
    """Become this root's supervisor — with hosts, this machine's host — (a handle for
    `release`) or raise BadInput naming the holder. The record says whether this
    supervisor holds an API key (`api_key_set`)."""
    me = psutil.Process(os.getpid())
    record: dict[str, Any] = {"schema": 1, "pid": me.pid, "create_time": me.create_time(),
                              "started_at": time.time(), "version": version,
                              "api_key_set": apikey.held() is not None}  # never the key
    if ws.store.supports_hosts:
        from teamd import settings
        record.update(here_record(settings.load(ws)))
    handle = ws.store.claim_supervisor(record)
    if handle is None:
        holder = ws.store.supervisor_info()
        who = f" (pid {holder['pid']})" if holder and holder.get("pid") else ""
        if ws.store.supports_hosts:
            raise BadInput(f"another teamd already runs as host {here()!r} on "
                           f"{ws.store.description}{who}: one teamd per host name "
                           "(teamd run --host NAME)")
        raise BadInput(f"another teamd already supervises {ws.root}{who}")
    return handle


def release(ws: Workspace, handle: Any) -> None:
    """Stop being this root's supervisor: its record goes, then the claim."""
    ws.store.release_supervisor(handle)
