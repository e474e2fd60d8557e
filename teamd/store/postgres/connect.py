"""Connecting to the PostgreSQL store (CONTRACT §15): psycopg's errors as one line each,
the password never shown.

A URL that cannot work — malformed, a wrong or missing password, a role or database that
does not exist — is the user's mistake: `BadInput` (exit 2). A server that cannot be
reached (refused, no socket, a timeout, a connection cut) is `StoreUnreachable` (exit 1):
trying again later may work.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from teamd.errors import BadInput, TeamdError
from teamd.hostname import here
from teamd.store import urls
from teamd.store.errors import StoreUnreachable

#: how long a connection attempt may take before the server counts as unreachable
CONNECT_TIMEOUT = 10
#: a unit (a transaction) whose process sends nothing for this long — frozen (SIGSTOP), or
#: cut off — is ended by the server, its locks freed: a unit's statements follow one
#: another in milliseconds, and a frozen host must not hold its team's locks until it
#: wakes (CONTRACT §15)
UNIT_IDLE_LIMIT = 5

#: TCP settings of every connection, unless its URL sets them: a link that drops without
#: a reset (a cable pulled, a partition) fails a call in seconds instead of the kernel's
#: minutes, so a host blocked on the store notices it lost its lease and kills its members
#: (CONTRACT §15) well within `host_timeout`. libpq ignores them on a Unix socket.
TCP_SETTINGS = {"keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2,
                "keepalives_count": 3, "tcp_user_timeout": 10_000}

#: words of libpq's messages that mean the URL itself cannot work
_USER_MISTAKES = ("password authentication failed", "no password supplied",
                  "does not exist", "invalid connection option", "invalid URI",
                  "missing \"=\"", "invalid integer value", "invalid port",
                  "invalid sslmode", "not permitted to log in", "authentication failed")




def _why(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text.removeprefix("connection failed: ")


def explain(exc: BaseException, url: str) -> TeamdError:
    """What `exc` (raised connecting to, or talking with, the store at `url`) is for a
    person: one line, the password masked."""
    why = _why(exc)
    password = _password(url)
    if password:
        why = why.replace(password, "***")
    where = urls.mask(url)
    if isinstance(exc, psycopg.ProgrammingError) or any(w in why for w in _USER_MISTAKES):
        return BadInput(f"cannot use the store {where}: {why}")
    return StoreUnreachable(f"cannot reach the store {where}: {why}")


def _password(url: str) -> str | None:
    from urllib.parse import unquote, urlsplit
    try:
        found = urlsplit(url).password
    except ValueError:
        return None
    return unquote(found) if found else None


def application_name(host: str) -> str:
    """What a host's connections are called in `pg_stat_activity` (`teamd HOST`): a person
    sees which machine each is, and a takeover ends a dead host's (CONTRACT §15)."""
    return f"teamd {host}"[:63]


def connect(url: str) -> Any:
    """A new autocommit connection to the store at `url` (a unit of work opens its own
    transaction: `teamd.store.postgres.db`)."""
    try:
        given = conninfo_to_dict(url)
        tcp: dict[str, Any] = {k: v for k, v in TCP_SETTINGS.items() if k not in given}
        return psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT,
                               application_name=application_name(here()),
                               options=f"-c idle_in_transaction_session_timeout="
                               f"{UNIT_IDLE_LIMIT * 1000}", **tcp)
    except psycopg.Error as exc:
        raise explain(exc, url) from None
