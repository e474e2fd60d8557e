"""The supervisor's lock `teamd.lock`, `teamd.json`, and `person_needed.json` (CONTRACT §2, §11);
the settings a files store shares between hosts: none (§15).

The flock on `.teams/teamd.lock` is the claim (the kernel drops it when the supervisor
dies); `teamd.json` is the record of who holds it, which readers check against the live
process themselves.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from typing import Any

from teamd import files, removals
from teamd.errors import BadInput
from teamd.files import Json
from teamd.hostname import HOSTS_NEED_POSTGRES
from teamd.store.files.base import Base


class Supervision(Base):
    """claim_supervisor, supervisor_info, write_supervisor_info, release_supervisor,
    read/write paged, read/write shared tables; the hosts' part of the seam (none here)."""

    def claim_supervisor(self, info: Json) -> int | None:
        """The handle is the descriptor holding the flock. Opened and locked in place,
        never made afresh: `filelock` may replace a lock file it has just seen made, and
        two supervisors starting at once on a new root would each hold their own."""
        files.ensure_dir(self.paths.teams_dir)
        fd = os.open(self.paths.supervisor_lock,
                     os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, files.FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        files.ensure_dir(self.paths.tasks_root)  # the feed watches both roots
        files.write_json(self.paths.supervisor_info, info)
        return fd

    def supervisor_info(self) -> Json | None:
        path = self.paths.supervisor_info
        return files.read_json(path) if path.exists() else None

    def write_supervisor_info(self, info: Json) -> None:
        files.write_json(self.paths.supervisor_info, info)

    def release_supervisor(self, handle: int | None) -> None:
        removals.remove_file(self.paths.supervisor_info)
        if handle is not None:
            os.close(handle)  # the flock goes with it

    # -- hosts: one machine, so none (CONTRACT §15) ---------------------------------------
    supports_hosts = False

    def list_hosts(self, timeout: float) -> list[Json]:
        return []

    def beat_host(self, claim: Any, changes: Json | None = None) -> None:
        raise BadInput(HOSTS_NEED_POSTGRES)

    def take_over_host(self, name: str, lease: int, timeout: float,
                       moves: Callable[[], None]) -> bool:
        raise BadInput(HOSTS_NEED_POSTGRES)

    def fence(self, max_age: float | None = None) -> None:
        pass  # one machine: nothing to fence off

    def read_paged(self, team: str) -> Json | None:
        return files.read_json(self.paths.paged(team))

    def write_paged(self, team: str, doc: Json) -> None:
        files.write_json(self.paths.paged(team), doc)

    def read_shared_tables(self) -> Json | None:
        return None  # one root, one teamd.toml: its tables are the ones in force

    def write_shared_tables(self, doc: Json) -> bool:
        return False
