"""teamd's own errors for a team (CONTRACT.md section 7, `supervisor_error`): what the
supervisor could not do for it — read its roster, reload teamd.toml (said in every team),
reconcile it — journaled where an operator looks (`logs`), not only on teamd's stderr.

An error is journaled once when it appears, and again only if it changes: a corrupt roster
met on every reconcile pass is one line in the journal, not one per pass. Each team's
errors that still hold are kept in `teamd.json` (`errors`: team → the latest `{"reason",
"ts"}`), which `status` reads: an error that cleared is no longer shown.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from teamd import events
from teamd.errors import TeamdError
from teamd.files import Json
from teamd.layout import Workspace

log = logging.getLogger(__name__)

#: where an error comes from; each holds (or clears) on its own
ROSTER, SETTINGS, RECONCILE = "roster", "settings", "reconcile"


class Troubles:
    """The errors that hold now, by team and source, as the supervisor meets them."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.held: dict[str, dict[str, Json]] = {}  # team → source → {"reason", "ts"}

    def report(self, team: str, source: str, reason: str) -> bool:
        """Note `reason`; journal `supervisor_error` unless it is what `source` already said
        for `team`. True when it is new (the caller logs it then)."""
        known = self.held.setdefault(team, {})
        if known.get(source, {}).get("reason") == reason:
            return False
        known[source] = {"reason": reason, "ts": time.time()}
        self.publish()  # first: what the journal says, status already shows
        try:
            events.emit(self.ws, team, "supervisor_error", reason=reason)
        except OSError as exc:  # a full disk, a team folder gone: the log still says it
            log.warning("team %s: cannot journal supervisor_error: %s", team, exc)
        return True

    def report_all(self, teams: Iterable[str], source: str, reason: str) -> None:
        for team in teams:
            self.report(team, source, reason)

    def clear(self, team: str, source: str) -> bool:
        """`source`'s error for `team` no longer holds; True if there was one."""
        if self.held.get(team, {}).pop(source, None) is None:
            return False
        self.publish()
        return True

    def clear_all(self, source: str) -> None:
        for team in list(self.held):
            self.clear(team, source)

    def latest(self) -> dict[str, Json]:
        """Each team's latest error that still holds."""
        return {team: max(known.values(), key=lambda e: float(e["ts"]))
                for team, known in self.held.items() if known}

    def publish(self) -> None:
        """Put `latest` in teamd.json for `status` (the supervisor alone writes that file)."""
        try:
            info = self.ws.store.supervisor_info()
            if info:
                self.ws.store.write_supervisor_info({**info, "errors": self.latest()})
        except (OSError, TeamdError) as exc:
            log.warning("cannot record teamd's errors: %s", exc)
