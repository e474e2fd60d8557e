"""A host of a team across machines (CONTRACT §15), as its `teamd` sees it: the heartbeat
that renews its lease, the lease given up in time, which members are its own, and whether
a member elsewhere counts as live.

A host keeps its lease by a heartbeat every `host_heartbeat` seconds (a fenced write). When
the heartbeat cannot be made — the database unreachable, the connection cut — the host
gives the lease up itself once `LEASE_SHARE` of `host_timeout` has passed since the last
one that was: before any leader may take it over (`host_timeout` by the database's
clock), so a host that cannot reach the database has already killed its members when
another host starts them. The heartbeat also says which members' directories this host
does not have (`teamd.workdirs`). Who leads is `leader_of`; what the leader does
(placing members, taking over dead hosts) is `teamd.placement`'s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from teamd import hostname, workdirs
from teamd.files import Json
from teamd.layout import Workspace
from teamd.settings import Settings
from teamd.store.errors import LeaseLost, StoreUnreachable

log = logging.getLogger(__name__)

#: the share of `host_timeout` after the last heartbeat that was made at which a host that
#: cannot make one gives its lease up (and kills its members): well before a leader may
#: take it over, with room for a clock tick and the kill itself
LEASE_SHARE = 0.6


class Host:
    """This `teamd`'s host: its claim (from `Store.claim_supervisor`), its heartbeat and
    whether it leads. `beat` raises LeaseLost when the lease is gone."""

    def __init__(self, ws: Workspace, conf: Settings, claim: Any) -> None:
        self.ws = ws
        self.conf = conf
        self.claim = claim
        self.name: str = claim.name
        self.renewed = time.monotonic()  # the last heartbeat that was made
        self.next_beat = 0.0  # time.time() of the next heartbeat
        self.unreachable = ""  # why the last heartbeat failed ("" when it was made)
        self.lost = False  # the lease is gone: nothing runs here until it joins again
        self.missing = workdirs.Missing()  # members' cwds this host does not have

    def due(self, now: float) -> bool:
        return now >= self.next_beat

    def beat(self, now: float, members: int) -> None:
        """The heartbeat, with the host's member count and room. LeaseLost when the lease
        was taken over, or when no heartbeat could be made for `LEASE_SHARE` of
        `host_timeout`."""
        self.next_beat = now + self.conf.host_heartbeat
        try:
            self.ws.store.beat_host(self.claim, {"members": members,
                                                 "max_members": self.conf.max_members,
                                                 workdirs.KEY: self.missing.listed()})
        except StoreUnreachable as exc:
            silent = time.monotonic() - self.renewed
            if not self.unreachable:
                log.error("host %s: heartbeat failed: %s", self.name, exc)
            self.unreachable = str(exc)
            if silent >= self.conf.host_timeout * LEASE_SHARE:
                raise LeaseLost(f"host {self.name}: no heartbeat for {silent:.1f} s "
                                f"({exc})") from None
            self.next_beat = now + min(1.0, self.conf.host_heartbeat)  # try again soon
            return
        if self.unreachable:
            log.info("host %s: heartbeat made again", self.name)
        self.unreachable = ""
        self.renewed = time.monotonic()

    def lacks(self, cwd: str, members: int) -> bool:
        """Note that `cwd` is missing here; True once this host's record says so (a
        heartbeat made at once when it is news; False when it could not be made)."""
        if self.missing.add(cwd):
            self.beat(time.time(), members)
        return not self.unreachable

    def leads(self, hosts: Mapping[str, Json]) -> bool:
        return not self.lost and leader_of(hosts) == self.name


def leader_of(hosts: Mapping[str, Json]) -> str | None:
    """The leader, as every host reads the records (CONTRACT §15): of the hosts alive and
    holding their lease, the one that joined first (the lowest lease). A host that dies or
    freezes stops being it as soon as its heartbeat is old; two hosts that briefly both
    think they lead do no harm — a takeover and a claim are each one compare-and-set in
    the database, and a placement re-checks under the member's lock."""
    alive = [h for h in hosts.values() if h.get("alive") and h.get("held")]
    return min(alive, key=lambda h: int(h["lease"]))["name"] if alive else None


def here_record(conf: Settings) -> Json:
    """What a host's record says of it besides its supervisor's record (CONTRACT §15)."""
    return {"host": hostname.here(), "max_members": conf.max_members, "labels": {},
            "members": 0, workdirs.KEY: []}


def is_mine(member: Mapping[str, Any], host: str | None) -> bool:
    """Is `member` this host's to run? Every member is, without hosts (`host` None)."""
    return host is None or member.get("host") == host
