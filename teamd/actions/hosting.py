"""What `teamctl hosts` shows (CONTRACT §15): every host of the store, alive or dead, with
the members placed on it, its load, and the members' directories it does not have."""

from __future__ import annotations

from teamd import placement, roster, settings, workdirs
from teamd.errors import BadInput, TeamdError
from teamd.files import Json
from teamd.hostname import HOSTS_NEED_POSTGRES
from teamd.layout import Workspace


def host_list(ws: Workspace) -> list[Json]:
    """Each host's record with `alive`, `age` (seconds since its heartbeat), `placed`
    (members desired running placed on it), `load` (placed of max_members, or "-"
    with no limit) and `cwd_missing` (members' directories it was asked for and does not
    have). BadInput for a store without hosts."""
    if not ws.store.supports_hosts:
        raise BadInput(f"{HOSTS_NEED_POSTGRES}: {ws.store.description} has no hosts")
    found = ws.store.list_hosts(settings.load(ws).host_timeout)
    rosters = []
    for team in ws.store.team_names():
        try:
            rosters.append(roster.load(ws, team))
        except TeamdError:
            continue  # `status` names an unreadable team; here it only places nobody
    placed = placement.counts(rosters)
    out = []
    for h in found:
        n, cap = placed.get(h["name"], 0), int(h.get("max_members") or 0)
        out.append({**h, "placed": n, "load": f"{n}/{cap}" if cap else "-",
                    workdirs.KEY: h.get(workdirs.KEY) or []})
    return out
