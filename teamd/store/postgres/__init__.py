"""The PostgreSQL store (CONTRACT §15): the records of sections 3–7 and 11–12 as rows of a
PostgreSQL database, each the same JSON document as its file, for one team across many
machines.

Its parts, one concern each: `connect` (connecting; errors as one line, the password
masked), `schema` (the tables, their version, `install_schema`), `db` (a connection per
thread and process; units of work as transactions with advisory locks; the commit, its
crash points and its notifications), `teams` (teams, rosters, archives), `board` (tasks,
ids, requests, "always" answers), `inboxes` (the exactly-once take), `journal`,
`sessions` (and transcripts), `money` (spend, back-off, call slots, the supervisor's
claim), `hosts` (hosts, leases, the leader, takeovers), `feed` (`LISTEN/NOTIFY` as
`Change`s). psycopg is imported only here: the files
store, the default, never loads it.
"""

from __future__ import annotations

from teamd.store.postgres.board import Board
from teamd.store.postgres.hosts import Hosts
from teamd.store.postgres.journal import Journal
from teamd.store.postgres.money import Money
from teamd.store.postgres.schema import install_schema
from teamd.store.postgres.sessions import Sessions

__all__ = ["PostgresStore", "install_schema"]


class PostgresStore(Sessions, Journal, Board, Money, Hosts):
    """The `Store` (teamd.store.api) kept in a PostgreSQL database."""
