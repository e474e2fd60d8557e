"""The entry point of a teammate process, in the forked child: logging, then the member
(`teamd.agent.member`) until it leaves. The member's work is in `member`; its agent behind
`runtime` (the built-in one in `builtin`).
"""

from __future__ import annotations

import logging

from teamd import settings
from teamd.agent.member import Member
from teamd.agent.shutdowns import Leave
from teamd.layout import Workspace

__all__ = ["Member", "run_member"]


def run_member(ws: Workspace, team: str, name: str,
               conf: settings.Settings | None = None, wake_fd: int | None = None) -> int:
    """Entry point in the forked child. Returns the exit code (0 shutdown, 75 sleep).
    `conf`: the supervisor's settings in force, kept while teamd.toml is broken.
    `wake_fd`: the read end of the wake pipe teamd pokes (`teamd.wake`); without one the
    member watches its files itself, and says so (`wake_fallback`)."""
    logging.basicConfig(level=logging.INFO,
                        format=f"%(asctime)s {name}@{team} %(levelname)s %(message)s")
    for noisy in ("httpx", "httpx2", "anthropic"):  # one INFO line per request otherwise
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        return Member(ws, team, name, conf, wake_fd=wake_fd).run()
    except Leave as leaving:
        return leaving.code
