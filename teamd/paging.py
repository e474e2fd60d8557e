"""The `person_needed` hook (CONTRACT.md section 11): page the person when something that
waits for their answer lands in their inbox, so no member waits for ever unseen.

Owned here: which messages page (a permission or plan request, `member_failed`,
`budget_reached`) in which inbox (the person's: `lead_inbox.jsonl` without an LLM lead,
`user_inbox.jsonl` with one); remembering the ids already paged, durably and before the
hook starts (`.teams/{team}/person_needed.json`), so a message pages at most once, across
a restart of teamd too; and running the hook without blocking anything: in a child of
teamd (forked from its single thread, like a member) that runs `hooks.run` — `/bin/sh`,
`hook_timeout`, `hook_run` journaled with its exit — and exits. teamd reaps it and never
waits for it; the hook's exit code changes nothing.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from typing import Any

from teamd import hooks, inbox, roster
from teamd.errors import TeamdError
from teamd.files import Json
from teamd.layout import Workspace
from teamd.proc import close_fds, die_with_parent, reset_signals
from teamd.settings import Settings

log = logging.getLogger(__name__)

HOOK = "person_needed"
#: what waits for the person's answer (CONTRACT §11)
PAGED_TYPES = frozenset({"permission_request", "plan_approval_request", "member_failed",
                         "budget_reached"})
#: ids remembered per team: far more than an inbox holds unanswered
KEEP = 1000


class Pager:
    """Looks at each team's person's inbox when it changed; starts the hook per new message."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.seen: dict[str, tuple[str, int, int, int]] = {}  # team → the inbox as last read
        self.running: set[int] = set()  # pids of hook runners not reaped yet

    def check(self, team: str, config: Json, conf: Settings, parent_pid: int) -> None:
        """Page for what is new in `team`'s person's inbox (a stat when nothing changed)."""
        command = conf.hooks.get(HOOK)
        if not command:
            return
        person = roster.person(config)
        inbox_mark = self.ws.store.inbox_mark(team, person)
        if inbox_mark is None:
            self.seen.pop(team, None)
            return
        mark = (person, *inbox_mark)
        if self.seen.get(team) == mark:
            return
        self.seen[team] = mark
        waiting = [m for m in inbox.peek(self.ws, team, person) if m["type"] in PAGED_TYPES]
        if not waiting:
            return
        paged = self.paged(team)
        new = [m for m in waiting if m["id"] not in paged]
        if not new:
            return
        # remembered before any hook starts: a crash now loses a page, never doubles one
        self.remember(team, [*paged, *(m["id"] for m in new)])
        for message in new:
            self.start(team, person, message, command, conf.hook_timeout, parent_pid)

    def paged(self, team: str) -> list[str]:
        try:
            doc = self.ws.store.read_paged(team) or {}
        except TeamdError as exc:  # a hand-mangled file: page again rather than never
            log.warning("%s; paging as if it were empty", exc)
            doc = {}
        ids = doc.get("paged")
        return [str(i) for i in ids] if isinstance(ids, list) else []

    def remember(self, team: str, ids: list[str]) -> None:
        self.ws.store.write_paged(team, {"schema": 1, "paged": ids[-KEEP:]})

    def start(self, team: str, person: str, message: Json, command: str, timeout: float,
              parent_pid: int) -> None:
        """Fork the runner of one page; teamd goes on at once."""
        try:
            pid = os.fork()
        except OSError as exc:
            log.error("team %s: cannot start the %s hook: %s", team, HOOK, exc)
            return
        if pid == 0:  # pragma: no cover - runs in the child
            _child(self.ws, team, person, message, command, timeout, parent_pid)
        self.running.add(pid)


def _child(ws: Workspace, team: str, person: str, message: Json, command: str,
           timeout: float, parent_pid: int) -> None:  # pragma: no cover - in the child
    """Run the hook, journal it, exit; dies with teamd, and on SIGTERM (teamd stopping)
    still kills the hook's process group on the way out."""
    code = 1
    try:
        die_with_parent(signal.SIGTERM, parent_pid)
        reset_signals()
        signal.signal(signal.SIGTERM, _exit_on_signal)
        close_fds()
        hooks.run(ws, team, person, ws.root, HOOK, command, timeout, message=message)
        code = 0
    except BaseException as exc:
        print(f"teamd: the {HOOK} hook of team {team}: {exc}", file=sys.stderr)
    finally:
        os._exit(code)


def _exit_on_signal(signum: int, frame: Any) -> None:  # pragma: no cover - in the child
    raise SystemExit(128 + signum)
