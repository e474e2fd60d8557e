"""What the leader of the hosts does (CONTRACT §15): place each member on a host, and take
over a dead host's members.

A member with no host, or whose host was taken over, goes to the alive host with the most
room (`max_members` minus its members; 0 = no limit), ties to the fewest members, then by
name — never to a host whose record lists the member's `cwd` as missing there
(`teamd.workdirs`); with no alive host that has it, it waits, `pending`. A pinned member
(`pinned_host`: `spawn --host`, a worktree or claude-code member) goes only to its pin;
while that host is dead it waits, `pending`, saying so in `last_error`. A member that
moves keeps its tasks and its session: its new host resumes it. A takeover fences the
dead host off and moves its members in one transaction (`Store.take_over_host`): no
member is ever live on two hosts.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any

from teamd import hostname, roster, workdirs
from teamd.errors import BadInput
from teamd.files import Json
from teamd.layout import Workspace
from teamd.states import LIVE, Desired, Status, Writer, transition

log = logging.getLogger(__name__)


#: statuses of a member whose process ran (or was to run) on the host it leaves
WAS_RUNNING = LIVE | {Status.SLEEPING, Status.BACKOFF}


def pin_for(ws: Workspace, host: str | None, *, local_state: bool) -> str | None:
    """The host a member spawned now is pinned to (None: the leader places it): `host`
    (`spawn --host`, `Task` `host`), or this machine's for a member whose state is local
    (a worktree, Claude Code's). BadInput for a name that cannot be a host's, `--host`
    without hosts, or a member with local state pinned elsewhere."""
    if host is not None and not hostname.NAME_RE.fullmatch(host):
        raise BadInput(f"--host {host!r}: a host name is 1-64 letters, digits, '.', '_' "
                       "or '-'")
    if not ws.store.supports_hosts:
        if host is not None:
            raise BadInput(f"--host {host}: hosts share a PostgreSQL store (--store URL); "
                           f"{ws.store.description} is this machine's alone")
        return None
    here = hostname.here()
    if local_state and host not in (None, here):
        raise BadInput(f"--host {host}: a worktree or claude-code member keeps its state on "
                       f"the host that spawns it ({here}); run the spawn there")
    return host or (here if local_state else None)


def waiting_for(host: str) -> str:
    return f"waiting for host {host}"


def counts(rosters: Iterable[Json]) -> dict[str, int]:
    """Members each host runs or is to run (desired running), across `rosters`."""
    out: dict[str, int] = {}
    for config in rosters:
        for m in config.get("members", []):
            if m.get("host") and m.get("desired") == Desired.RUNNING:
                out[m["host"]] = out.get(m["host"], 0) + 1
    return out


def choose(hosts: Iterable[Json], load: Mapping[str, int], cwd: str | None = None) -> str | None:
    """The alive host with the most room (ties: fewest members, then name) that does not
    list `cwd` as missing; None when no such host has room."""
    best: tuple[float, int, str] | None = None
    for h in hosts:
        if not h.get("alive") or workdirs.lacks(h, cwd):
            continue
        name, cap = str(h["name"]), int(h.get("max_members") or 0)
        have = load.get(name, 0)
        room = math.inf if cap == 0 else cap - have
        if room <= 0:
            continue
        key = (-room, have, name)
        best = key if best is None or key < best else best
    return None if best is None else best[2]


def needs_host(m: Mapping[str, Any], hosts: Mapping[str, Json]) -> bool:
    """A member to place: a pinned one not on its pin, or one to run whose pin was taken
    over and that was not yet told to wait for it (`pending`, `waiting for host …`); an unpinned
    one desired running with no host, or on a host that was taken over (its lease no
    longer held) or is unknown."""
    pin, where = m.get("pinned_host"), m.get("host")
    if pin:
        if where != pin:
            return True
        # taken over (or unknown): its process, if it still runs, was fenced off first
        gone = not hosts.get(pin, {}).get("held", False)
        told = m.get("status") == Status.PENDING and m.get("last_error") == waiting_for(pin)
        return gone and m.get("desired") == Desired.RUNNING and not told
    if where is None:
        return m.get("desired") == Desired.RUNNING
    return not hosts.get(where, {}).get("held", False)


def place(ws: Workspace, team: str, config: Json, hosts: Mapping[str, Json],
          load: dict[str, int]) -> int:
    """Give each member of `team` that needs one a host (`load` kept up to date); how many
    were placed or moved."""
    moved = 0
    for m in config["members"]:
        if not needs_host(m, hosts):
            continue
        pin = m.get("pinned_host")
        target = pin or choose(hosts.values(), load, m.get("cwd"))
        if target is None:  # placed when an alive host has room (and its cwd)
            if choose(hosts.values(), load) is not None:  # room, but not its cwd
                moved += bool(roster.update_member(ws, team, m["name"], partial(
                    unplaced, hosts=hosts, why=workdirs.nowhere(m["cwd"]))))
            continue

        def change(member: Json, _config: Json, target: str = target) -> bool:
            if not needs_host(member, hosts):
                return False  # placed meanwhile
            was = member.get("host")
            member["host"] = target
            alive = hosts.get(target, {}).get("alive", False)
            if member["status"] in WAS_RUNNING or (not alive and member["desired"] == \
                    Desired.RUNNING):  # its process was another host's, now fenced off
                no_process(member)
            member["last_error"] = None if alive else waiting_for(target)
            if was and was != target:
                log.info("%s/%s: moved from host %s to %s", team, member["name"], was, target)
            return True

        if roster.update_member(ws, team, m["name"], change):
            moved += 1
            if m.get("desired") == Desired.RUNNING:
                load[target] = load.get(target, 0) + 1
    return moved


def no_process(member: Json) -> None:
    """`member` has no process (any it had was another host's, or is not to be forked):
    no pid, `pending`."""
    member.update(pid=None, pid_create_time=None)
    transition(member, Status.PENDING, Writer.TEAMD)


def unplaced(member: Json, _config: Json, *, hosts: Mapping[str, Json], why: str) -> bool:
    """The change for a member no alive host can take (`why`): no host, and `pending` if
    its process ran on the host it leaves. False when placed meanwhile, or already told."""
    if not needs_host(member, hosts):
        return False
    if member["status"] in WAS_RUNNING:
        no_process(member)
    elif member.get("last_error") == why and member.get("host") is None:
        return False
    member.update(host=None, last_error=why)
    return True


def take_over(ws: Workspace, dead: Json, teams: Callable[[], Iterable[tuple[str, Json]]],
              hosts: dict[str, Json], timeout: float) -> bool:
    """Fence dead host `dead` off and move its members (pinned ones wait for it), in one
    transaction; False when its `teamd` rejoined or another leader took it over first."""
    name = str(dead["name"])
    after = {**hosts, name: {**dead, "alive": False, "held": False}}

    def move() -> None:
        rosters = list(teams())
        load = counts(config for _, config in rosters)
        for team, config in rosters:
            place(ws, team, config, after, load)

    taken = ws.store.take_over_host(name, int(dead["lease"]), timeout, move)
    if taken:
        hosts[name] = after[name]
        why = ("left" if dead.get("left_at") is not None
               else f"dead (no heartbeat for {float(dead.get('age', 0)):.1f} s)")
        log.warning("host %s: %s; its lease is fenced off and its members placed again",
                    name, why)
    return taken
