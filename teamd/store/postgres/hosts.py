"""The hosts of a PostgreSQL store (CONTRACT §15): one `teamd` per host name, its record and
heartbeat, its lease (the fencing number), the leader, and a takeover.

A host's **claim** is a session advisory lock on its name, held on a connection of its own
for as long as its `teamd` runs: a second `teamd` with that name finds it taken. Joining
hands the host a new **lease** from a sequence (never the same number twice); every unit
of its `teamd` and members is fenced with it (`Db.fence`, `teamd_fence`). The heartbeat is
a fenced update of the record, stamped with the database's clock — one clock for every
host, so a host's age is never a matter of two machines' clocks agreeing. A **takeover**
(the leader's, of a host whose heartbeat is older than `host_timeout`) ends that host's
database sessions (a frozen host may hold a unit open), then gives the lease row a new
number: every later fenced unit of that host is refused. Who leads is read from these
records (`teamd.hosts.leader_of`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from teamd.files import Json
from teamd.hostname import here
from teamd.store.errors import LeaseLost, StoreUnreachable
from teamd.store.postgres.base import Base
from teamd.store.postgres.connect import application_name, explain
from teamd.store.postgres.schema import STALE_LEASE

log = logging.getLogger(__name__)

#: the first key of the hosts' session advisory locks (the second: the name's hash)
HOSTS = 0x7464686F

#: the longest a takeover waits for the dead host's units to let go of its lease row
TAKEOVER_WAIT = 10

#: the database's clock, in epoch seconds (every host's heartbeat is stamped with it)
NOW = "extract(epoch FROM clock_timestamp())::float8"


@dataclass
class HostClaim:
    """What a host's `teamd` holds: its name, its lease, and the connection that holds its
    claim."""

    name: str
    lease: int
    conn: Any = field(repr=False)


class Hosts(Base):
    """join_host, beat_host, leave_host, list_hosts, take_over_host, fence."""

    supports_hosts = True

    def join_host(self, name: str, doc: Json) -> HostClaim | None:
        """Claim host `name` and store its record `doc` with a new lease (None when another
        `teamd` holds the claim). From here on this process's units are fenced with it."""
        conn = self.db.fresh()
        got = conn.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))",
                           (HOSTS, name)).fetchone()[0]
        if not got:
            conn.close()
            return None
        try:
            lease = self._new_lease(conn, name, doc)
        except BaseException:
            conn.close()
            raise
        self.claims.append(conn)  # held while the process lives, whatever the caller keeps
        self.db.fence = (name, lease)
        self.db.fenced_out = False
        return HostClaim(name=name, lease=lease, conn=conn)

    def _new_lease(self, conn: Any, name: str, doc: Json) -> int:
        with conn.transaction():
            lease = int(conn.execute(
                "INSERT INTO leases (host, lease) VALUES (%s, nextval('lease_numbers')) "
                "ON CONFLICT (host) DO UPDATE SET lease = nextval('lease_numbers') "
                "RETURNING lease", (name,)).fetchone()[0])
            conn.execute(
                "INSERT INTO hosts (name, doc, state, lease, joined_at, heartbeat)"
                f" VALUES (%s, %s, '{{}}', %s, {NOW}, {NOW}) ON CONFLICT (name) DO UPDATE"
                " SET doc = excluded.doc, state = excluded.state, lease = excluded.lease,"
                " joined_at = excluded.joined_at, heartbeat = excluded.heartbeat,"
                " left_at = NULL", (name, Jsonb(doc), lease))
        return lease

    def beat_host(self, claim: HostClaim, changes: Json | None = None) -> None:
        """The heartbeat: a fenced update of the host's record (and `changes` to it).
        LeaseLost when the lease was taken over, or the claim found held by another
        `teamd` after a lost connection; StoreUnreachable when the database cannot be
        reached (the caller counts how long it has been)."""
        for attempt in (1, 2):  # a connection found lost: once more on a new one
            if claim.conn.closed or claim.conn.broken:
                self._reclaim(claim)
            try:
                with claim.conn.transaction():
                    claim.conn.execute("SELECT teamd_fence(%s, %s)", (claim.name, claim.lease))
                    claim.conn.execute(
                        f"UPDATE hosts SET state = state || %s, heartbeat = {NOW}"
                        " WHERE name = %s", (Jsonb(changes or {}), claim.name))
                return
            except psycopg.Error as exc:
                if exc.sqlstate == STALE_LEASE:
                    self.db.fenced_out = True
                    raise LeaseLost(f"host {claim.name}: its lease {claim.lease} was taken "
                                    "over") from None
                if not (claim.conn.broken or claim.conn.closed):
                    raise
                if attempt == 2:
                    raise explain(exc, self.url) from None

    def _reclaim(self, claim: HostClaim) -> None:
        """A new connection for a claim whose connection was lost (a server restarted, a
        backend terminated): the claim's lock again, or LeaseLost when another `teamd`
        took the name meanwhile."""
        if claim.conn in self.claims:
            self.claims.remove(claim.conn)
        conn = self.db.fresh()  # StoreUnreachable while the server cannot be reached
        if not conn.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))",
                            (HOSTS, claim.name)).fetchone()[0]:
            conn.close()
            self.db.fenced_out = True
            raise LeaseLost(f"host {claim.name}: another teamd claimed the name")
        claim.conn = conn
        self.claims.append(conn)

    def leave_host(self, claim: HostClaim) -> None:
        """A clean stop: the record says the host left (dead at once for every reader), and
        the claim goes with its connection."""
        try:
            if not (claim.conn.closed or claim.conn.broken or self.db.fenced_out):
                with claim.conn.transaction():
                    claim.conn.execute("SELECT teamd_fence(%s, %s)", (claim.name, claim.lease))
                    claim.conn.execute(f"UPDATE hosts SET heartbeat = 0, left_at = {NOW}"
                                       " WHERE name = %s", (claim.name,))
        except psycopg.Error as exc:
            log.warning("host %s: could not record its leaving: %s", claim.name,
                        " ".join(str(exc).split()))
        finally:
            if claim.conn in self.claims:
                self.claims.remove(claim.conn)
            claim.conn.close()

    def list_hosts(self, timeout: float) -> list[Json]:
        """Every host's record, by name: its supervisor's record, what its heartbeats said,
        `lease`, `joined_at`, `heartbeat`, `left_at`, and `alive` (a heartbeat younger than
        `timeout` by the database's clock), `age` (seconds since it) and `held` (its lease
        is still the current one: False once taken over)."""
        rows = self.db.rows(
            f"SELECT h.name, h.doc, h.state, h.lease, h.joined_at, h.heartbeat, h.left_at,"
            f" {NOW} - h.heartbeat, coalesce(l.lease = h.lease, false)"
            " FROM hosts h LEFT JOIN leases l ON l.host = h.name ORDER BY h.name")
        return [{**doc, **state, "name": name, "lease": lease, "joined_at": joined,
                 "heartbeat": beat, "left_at": left, "alive": bool(held) and age < timeout,
                 "age": max(0.0, float(age)), "held": bool(held)}
                for name, doc, state, lease, joined, beat, left, age, held in rows]

    def take_over_host(self, name: str, lease: int, timeout: float,
                       moves: Callable[[], None]) -> bool:
        """Give host `name`'s lease a new number if it is still `lease` and its heartbeat is
        still older than `timeout`, and run `moves` (the leader placing its members
        elsewhere) in the same transaction; False, doing nothing, when its `teamd`
        rejoined or beat meanwhile, or another leader took it over first. The host's
        sessions are ended first (a frozen host may hold a unit open, its share lock on
        the lease row with it); every later fenced unit of the host is refused."""
        with self.db.unit():
            # checked and held (the host row locked) before anything is ended
            still = self.db.one(
                f"SELECT 1 FROM hosts h JOIN leases l ON l.host = h.name WHERE h.name = %s"
                f" AND l.lease = %s AND {NOW} - h.heartbeat >= %s FOR UPDATE OF h",
                (name, lease, timeout))
            if still is None:
                return False
            self.db.execute(f"SET LOCAL lock_timeout = '{TAKEOVER_WAIT}s'")
            self.db.execute(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE"
                " datname = current_database() AND application_name = %s"
                " AND pid <> pg_backend_pid()", (application_name(name),))
            taken = self.db.one(
                "UPDATE leases SET lease = nextval('lease_numbers') WHERE host = %s"
                " AND lease = %s RETURNING lease", (name, lease)) is not None
            if taken:
                self.db.touched()
                moves()
        return taken

    # -- the supervisor: this machine's host (`teamd.hostname.here`) ------------------------
    def claim_supervisor(self, info: Json) -> HostClaim | None:
        return self.join_host(here(), info)

    def supervisor_info(self) -> Json | None:
        doc = self.db.one("SELECT doc FROM hosts WHERE name = %s AND left_at IS NULL",
                          (here(),))
        return doc if isinstance(doc, dict) else None

    def write_supervisor_info(self, info: Json) -> None:
        with self.db.unit():
            self.db.execute("UPDATE hosts SET doc = %s WHERE name = %s", (Jsonb(info), here()))
            self.db.touched()

    def release_supervisor(self, handle: HostClaim | None) -> None:
        if handle is not None:
            self.leave_host(handle)

    def fence(self, max_age: float | None = None) -> None:
        """A fenced unit and nothing else: raises LeaseLost when this process's host lost
        its lease (made before every model call and tool run of a member). With
        `max_age`, only when the last one this process made is older than that."""
        if self.db.fence is None:
            return
        if max_age is not None and time.monotonic() - self.db.fenced_at < max_age:
            return
        with self.db.unit():
            pass  # the unit's first statement is the fence
        self.db.fenced_at = time.monotonic()


__all__ = ["HostClaim", "Hosts", "StoreUnreachable"]
