"""The PostgreSQL store's tables (CONTRACT §15), their version, and installing or migrating
them (`install_schema`).

Every record is the JSON document its file holds, in a `doc` column beside the columns the
queries need, all keyed by `team` first. Records that are read and rewritten whole (rosters,
member states, tasks, requests, spend, "always" answers, the back-off) are `jsonb`; the
records of a log (inbox messages, session records, journal lines, transcripts) are `json`,
which keeps the very text the writer made — key order, and a `\\u0000` a tool printed,
which `jsonb` refuses. A session or inbox row whose record is not a whole one (what a hand
edit, or a fault test, leaves) holds its bytes in `bad` instead. A deleted team's archive
is its rows with `team` set to the archive's name (`{team}-{stamp}`, never a team name).

No ORM: the store is a few dozen short statements over ten tables, each a
read-modify-write inside a unit the store already spells as a transaction; an ORM's
session and identity map would sit between the unit and the rows and hide the locking the
contract's promises rest on.
"""

from __future__ import annotations

from typing import Any

from teamd.errors import BadInput
from teamd.store import urls

#: the hosts of a team across machines (version 2): each host's record, its lease (the
#: fencing number every fenced write is checked against: `teamd_fence`), and the sequence
#: the lease numbers come from — a lease is never handed out twice
HOSTS = (
    # `doc`: the supervisor's record as it wrote it; `state`: what its heartbeats report
    "CREATE TABLE hosts (name text PRIMARY KEY, doc jsonb NOT NULL, state jsonb NOT NULL,"
    " lease bigint NOT NULL, joined_at float8 NOT NULL, heartbeat float8 NOT NULL,"
    " left_at float8)",
    "CREATE TABLE leases (host text PRIMARY KEY, lease bigint NOT NULL)",
    "CREATE SEQUENCE lease_numbers",
    # a fenced unit's first statement: its share lock on the lease row makes a takeover
    # (which updates the row) wait for the unit's commit, and every unit after the
    # takeover fail, its writes refused
    "CREATE FUNCTION teamd_fence(h text, l bigint) RETURNS void LANGUAGE plpgsql AS $$"
    " BEGIN PERFORM 1 FROM leases WHERE host = h AND lease = l FOR SHARE;"
    " IF NOT FOUND THEN RAISE EXCEPTION 'the lease % of host % is no longer held', l, h"
    " USING ERRCODE = 'TD001'; END IF; END $$",
)

#: the version this teamd writes; `MIGRATIONS[v]` takes a database from v to v + 1
VERSION = 2
MIGRATIONS: dict[int, tuple[str, ...]] = {1: HOSTS}

#: the SQLSTATE `teamd_fence` raises: a write with a stale lease, refused
STALE_LEASE = "TD001"

TABLES = (
    "CREATE TABLE teamd_schema (version integer NOT NULL)",
    # the roster (config.json) of each team; its row is the team's existence
    "CREATE TABLE teams (team text PRIMARY KEY, doc jsonb NOT NULL)",
    # members/{name}.json
    "CREATE TABLE members (team text NOT NULL, name text NOT NULL, doc jsonb NOT NULL,"
    " PRIMARY KEY (team, name))",
    # the board: its row (the id high-water mark) goes first when a team is deleted
    "CREATE TABLE boards (team text PRIMARY KEY, top_id bigint NOT NULL DEFAULT 0)",
    "CREATE TABLE tasks (team text NOT NULL, id bigint NOT NULL, doc jsonb NOT NULL,"
    " PRIMARY KEY (team, id))",
    # inboxes, oldest first by seq; `mark` moves with every write and cut
    "CREATE TABLE inbox (seq bigserial PRIMARY KEY, team text NOT NULL, name text NOT NULL,"
    " doc json, bad bytea)",
    "CREATE INDEX inbox_of ON inbox (team, name, seq)",
    "CREATE TABLE inbox_marks (team text NOT NULL, name text NOT NULL,"
    " mark bigint NOT NULL, PRIMARY KEY (team, name))",
    # what a reader refused (`*.rejected.jsonl`): the line and why
    "CREATE TABLE rejected (seq bigserial PRIMARY KEY, team text NOT NULL, name text NOT NULL,"
    " what text NOT NULL, line bytea NOT NULL, reason text NOT NULL, at double precision)",
    "CREATE TABLE requests (team text NOT NULL, id text NOT NULL, doc jsonb NOT NULL,"
    " PRIMARY KEY (team, id))",
    # permissions.json, spend.json, person_needed.json: one document per team
    "CREATE TABLE team_docs (team text NOT NULL, what text NOT NULL, doc jsonb NOT NULL,"
    " PRIMARY KEY (team, what))",
    # the journal, in parts (its rotation: see journal.py)
    "CREATE TABLE journal (seq bigserial PRIMARY KEY, team text NOT NULL, part integer NOT NULL,"
    " size integer NOT NULL, doc json NOT NULL)",
    "CREATE INDEX journal_of ON journal (team, seq)",
    "CREATE TABLE journal_parts (team text PRIMARY KEY, part integer NOT NULL,"
    " size bigint NOT NULL)",
    "CREATE TABLE sessions (seq bigserial PRIMARY KEY, team text NOT NULL, name text NOT NULL,"
    " doc json, bad bytea)",
    "CREATE INDEX sessions_of ON sessions (team, name, seq)",
    "CREATE TABLE transcripts (team text NOT NULL, name text NOT NULL, place text NOT NULL,"
    " doc json NOT NULL, PRIMARY KEY (team, place))",
    # what `keep_removed` kept, and the archives of deleted teams
    "CREATE TABLE removed (team text NOT NULL, name text NOT NULL, kept text NOT NULL,"
    " PRIMARY KEY (team, kept))",
    "CREATE TABLE archives (archive text PRIMARY KEY, team text NOT NULL, doc jsonb)",
    # the root's records: ratelimit.json, teamd.json
    "CREATE TABLE root_docs (what text PRIMARY KEY, doc jsonb NOT NULL,"
    " written double precision NOT NULL)",
)

#: the advisory lock that serialises installing and migrating
SCHEMA_LOCK = 0x7465616D64  # "teamd"


def found_version(conn: Any) -> int | None:
    """The schema's version in this database, or None when it has none."""
    row = conn.execute("SELECT to_regclass('teamd_schema') IS NOT NULL").fetchone()
    if not row[0]:
        return None
    got = conn.execute("SELECT max(version) FROM teamd_schema").fetchone()
    return None if got[0] is None else int(got[0])


def ensure(conn: Any, url: str) -> bool:
    """Create the schema, or migrate an older one, in one transaction on `conn` (autocommit):
    True when it was created, False when it was there at this version. BadInput, writing
    nothing, for a schema newer than this teamd."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        version = found_version(conn)
        if version is not None and version > VERSION:
            raise BadInput(f"the store {urls.mask(url)} has schema version {version}, newer "
                           f"than this teamd's ({VERSION}): upgrade teamd")
        if version == VERSION:
            return False
        if version is None:
            for statement in TABLES + HOSTS:
                conn.execute(statement)
            conn.execute("INSERT INTO teamd_schema (version) VALUES (%s)", (VERSION,))
            return True
        for step in range(version, VERSION):
            for statement in MIGRATIONS[step]:
                conn.execute(statement)
        conn.execute("UPDATE teamd_schema SET version = %s", (VERSION,))
        return False


def install_schema(url: str) -> bool:
    """Create the store's schema in the database of `url` (True), or find it there at this
    version (False), migrating an older one in one transaction. BadInput (one line, the
    password masked) for a URL that cannot work or a newer schema; StoreUnreachable when
    the server cannot be reached."""
    from teamd.store.postgres.connect import connect
    conn = connect(url)
    try:
        return ensure(conn, url)
    finally:
        conn.close()
