"""The supervisor's part in a team across machines (CONTRACT §15): its host joined, its
heartbeat, the leader's round, and the lease lost.

Only a store many machines share has hosts (`Store.supports_hosts`); without them `host`
is None and every member is this supervisor's. With them, `teamd run` runs only the
members placed on its host, counts a member of another host as live while that host is
alive, and leaves placing members, handing out tasks and paging the person to the
leader. A member placed here whose `cwd` this host does not have is never forked: the
host's record says so, and the member goes back to the leader (`teamd.workdirs`). A lost
lease (taken over, or no heartbeat in time) ends every member process at once with
SIGKILL, writes nothing for them, and joins again with a new lease as soon as the
database answers. `Supervisor` is a `Hosting`.
"""

from __future__ import annotations

import logging
import os
import signal
from typing import Any

import psutil

from teamd import placement, roster_cache, workdirs
from teamd.errors import BadInput
from teamd.files import Json
from teamd.hosts import Host, is_mine
from teamd.processes import find_strays
from teamd.states import Desired, Status
from teamd.store.errors import LeaseLost, StoreUnreachable
from teamd.wakeups import Wakeups

log = logging.getLogger(__name__)


class Hosting(Wakeups):
    """This supervisor's host, if its store has hosts; the leader's round."""

    # set by Supervisor (and those of `Wakeups`; its `host` None: the store has no hosts)
    rosters: dict[str, Json]
    stopping: bool
    _lock: Any

    #: host name → its record (`alive`, `held`…), as the last round read them
    hosts_seen: dict[str, Json]

    @property
    def host_name(self) -> str | None:
        return None if self.host is None else self.host.name

    def mine(self, member: Json) -> bool:
        return is_mine(member, self.host_name)

    def leads(self) -> bool:
        """Does this supervisor decide for the whole store (places, assigns, pages)?"""
        return self.host is None or self.host.leads(self.hosts_seen)

    def run_host_timer(self, now: float) -> None:
        """The heartbeat when due (or, with the lease lost, another try to join), then,
        for the leader, its round. LeaseLost when the lease is gone."""
        if self.host is None or not self.host.due(now):
            return
        if self.host.lost:
            self.rejoin(now)
            return
        self.host.beat(now, len(self.processes))
        if self.host.leads(self.read_hosts()):
            self.lead_round()

    def read_hosts(self) -> dict[str, Json]:
        self.hosts_seen = {h["name"]: h for h in self.ws.store.list_hosts(self.conf.host_timeout)}
        return self.hosts_seen

    def lead_round(self) -> None:
        """Take over each dead host still holding its lease (its members placed again in
        the same step)."""
        hosts = self.hosts_seen
        for dead in [h for h in hosts.values() if not h["alive"] and h["held"]]:
            if dead["name"] == self.host_name:
                continue  # ourselves: our own heartbeat says otherwise
            try:
                if placement.take_over(self.ws, dead, self.all_rosters, hosts,
                                       self.conf.host_timeout):
                    self.views.clear()  # the moved members' states: read them again
            except LeaseLost:
                raise
            except Exception as exc:  # tried again at the next heartbeat
                log.error("host %s: cannot take it over yet: %s", dead["name"], exc)

    def all_rosters(self) -> list[tuple[str, Json]]:
        out = []
        for team in self.ws.store.team_names():
            try:
                out.append((team, roster_cache.Cached(self.ws, team).load()))
            except Exception as exc:  # one team's bad roster must not stop a takeover
                log.error("team %s: not read for the takeover: %s", team, exc)
        return out

    def place_members(self, team: str, config: Json) -> bool:
        """The leader: give each member of `team` that needs one a host. True when some
        were placed (the caller reads the roster again)."""
        if self.host is None or not self.leads():
            return False
        # a member never placed yet: the hosts as they are now (one that just joined
        # has room), not as the last heartbeat read them
        fresh = any(m.get("host") is None for m in config["members"])
        hosts = self.read_hosts() if fresh else self.hosts_seen
        load = placement.counts(self.rosters.values())
        return placement.place(self.ws, team, config, hosts, load) > 0

    def lacks_cwd(self, team: str, member: Json) -> bool:
        """Is `member`, to be forked here, without its `cwd` on this host? Then this host's
        record says so first (so the leader never places it here again), and the member is
        handed back: `pending`, `last_error` saying why, its `host` cleared for the leader
        (kept when it is pinned here: it waits for the directory)."""
        cwd = member.get("cwd")
        if self.host is None or not cwd or workdirs.exists_here(cwd):
            return False
        host = self.host.name
        if not self.host.lacks(cwd, len(self.processes)):
            return True  # the record could not say so yet: the next reconcile tries again
        why = workdirs.missing_on(host, cwd)

        def hand_back(m: Json, _config: Json) -> bool:
            pinned = m.get("pinned_host") == host
            if m.get("host") != host or m.get("desired") != Desired.RUNNING or (
                    pinned and m["status"] == Status.PENDING and m.get("last_error") == why):
                return False  # moved or stopped meanwhile, or told already
            placement.no_process(m)
            m.update(last_error=why, host=host if pinned else None)
            return True

        if self.update_member(team, member["name"], hand_back):
            log.warning("%s/%s: %s; %s", team, member["name"], why,
                        "it waits for it here (pinned)" if member.get("pinned_host") == host
                        else "handed back to the leader")
        return True

    def lose_lease(self, exc: LeaseLost, rejoin: bool = True) -> None:
        """Our lease is gone: another host may be starting our members. End every member
        process now (SIGKILL: no goodbye that writes), reap them recording nothing, and
        join again with a new lease."""
        log.error("%s: ending this host's %d member processes at once and writing "
                  "nothing more for them", exc, len(self.processes))
        # every process of every member, its tools' own sessions included: a tool left
        # running here would run on two hosts once the member starts elsewhere
        doomed: list[psutil.Process] = []
        for process in list(self.processes.values()):
            try:
                doomed += psutil.Process(process.pid).children(recursive=True)
            except psutil.Error:
                pass
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        doomed += [stray.proc for stray in find_strays(os.getpid(), self.processes)]
        for proc in doomed:
            try:
                proc.kill()
            except psutil.Error:
                pass
        for pid in list(self.processes):
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
            process = self.processes.pop(pid)
            self.ladder.forget(process)
            process.close()
        assert self.host is not None
        self.ws.store.release_supervisor(self._lock)  # the name's claim, for the new join
        self._lock = None
        self.host.lost = True
        self.host.next_beat = 0.0 if rejoin else float("inf")  # join again at once

    def rejoin(self, now: float) -> None:
        """Join again with a new lease once the database answers (else at the next
        heartbeat); the members placed here are then started by the next reconcile."""
        from teamd import pidfile
        assert self.host is not None
        self.host.next_beat = now + self.conf.host_heartbeat
        try:
            claim = pidfile.claim(self.ws)
        except (StoreUnreachable, BadInput) as exc:  # BadInput: our old claim, not yet gone
            log.error("host %s: cannot join again yet: %s", self.host.name, exc)
            return
        self._lock = claim
        self.host = Host(self.ws, self.conf, claim)
        self.views.clear()
        log.info("host %s: joined again with lease %d", self.host.name, claim.lease)
