"""A member's `cwd` across hosts (CONTRACT §15): a member is placed only on a host where its
`cwd` exists.

A host asked to run a member whose `cwd` it does not have forks nothing: it lists that
directory in its own host record (`cwd_missing`, written at once and with every heartbeat,
which drops a directory that exists by then — a mount that appeared), then hands the member
back — `pending`, `last_error` `cwd /x missing on host h1`, its `host` cleared for the
leader to place it again (a pinned member keeps its host: it waits there). The leader
never chooses a host whose record lists the member's `cwd`; with no alive host left that
has it, the member stays `pending`, `last_error` `no alive host has its cwd /x`, until one
does.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from teamd import hostname
from teamd.errors import BadInput
from teamd.layout import Workspace

#: the host record's key: the directories members asked of the host that it does not have
KEY = "cwd_missing"


def missing_on(host: str, cwd: str) -> str:
    return f"cwd {cwd} missing on host {host}"


def nowhere(cwd: str) -> str:
    return f"no alive host has its cwd {cwd}"


def exists_here(cwd: str) -> bool:
    """Is `cwd` a directory on this machine?"""
    return Path(cwd).is_dir()


def lacks(host: Mapping[str, Any], cwd: str | None) -> bool:
    """Does host record `host` say it does not have directory `cwd`?"""
    return cwd is not None and cwd in (host.get(KEY) or ())


def for_spawn(ws: Workspace, cwd: str | None, default: Path, pin: str | None) -> Path:
    """The working directory of a member spawned now (`--cwd`, else `default`). It must
    exist on this machine when the member runs here: without hosts, or pinned to this
    host. Otherwise the host that runs it is the judge (an absolute path, then: a relative
    one means nothing on another machine). BadInput when it cannot do."""
    workdir = Path(cwd).expanduser() if cwd else default
    if workdir.is_dir():
        return workdir
    if not ws.store.supports_hosts or pin == hostname.here():
        raise BadInput(f"--cwd {str(workdir)!r} is not a directory")
    if not workdir.is_absolute():
        raise BadInput(f"--cwd {str(workdir)!r} is not a directory here; for one that "
                       "exists only on other hosts give its absolute path")
    return workdir


class Missing:
    """The directories this host was asked for and does not have, as its record lists them."""

    def __init__(self) -> None:
        self.paths: set[str] = set()

    def add(self, cwd: str) -> bool:
        """Note `cwd` as missing here; True when it is news (the record must say so)."""
        if cwd in self.paths:
            return False
        self.paths.add(cwd)
        return True

    def listed(self) -> list[str]:
        """What the record says now: the noted directories that still do not exist."""
        self.paths = {p for p in self.paths if not exists_here(p)}
        return sorted(self.paths)
