"""The PostgreSQL the tests run (CONTRACT §15, "Tested for real"): a private cluster started
from the installed binaries, a fresh database per test, and a role that must give a password.

`binaries()` finds the server's programs (`/usr/lib/postgresql/*/bin`, the newest, else
`initdb` on PATH) or skips the test, saying why. `Cluster.start()` makes a cluster in a
folder of its own under the system's temporary folder (pytest's are 0700 root: the
`postgres` user could not reach them), as `postgres` through `runuser` when the tests run as
root (`initdb` refuses root), listening only on a Unix socket there; local connections are
trusted, except for the members of the role `needs_password` (`password_url`), whose
passwords are checked (scram), so a test can give a wrong one. `stop()` stops it at once
(`pg_ctl stop -m immediate`) and removes the folder: only what the tests started.
`database()` makes a database for one test (a copy of the template that holds the schema,
when one was made: `CREATE DATABASE … TEMPLATE` is a file copy) and gives its URL.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

USER = "postgres"
#: the role whose members give a password (pg_hba); everyone else connects trusted
NEEDS_PASSWORD = "needs_password"
HBA = f"""\
local all +{NEEDS_PASSWORD} scram-sha-256
local all all trust
"""
#: the cluster is a test's: little memory, no TCP
SETTINGS = "-c max_connections=200 -c shared_buffers=32MB -c listen_addresses=''"
#: and, unless a benchmark wants a commit's real cost, no fsync
FAST = "-c fsync=off -c full_page_writes=off -c synchronous_commit=off"


def binaries() -> Path:
    """The folder of the installed server's programs; skips the test where there is none."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                   key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit()
                   else 0)
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    if initdb is None:
        pytest.skip("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb, no "
                    "initdb on PATH): apt-get install postgresql to run the PostgreSQL tests")
    return Path(initdb).parent


def _as_owner() -> list[str]:
    """The prefix that runs a server program as its owner: `runuser -u postgres --` as root."""
    return ["runuser", "-u", USER, "--"] if os.geteuid() == 0 else []


def _connect(url: str) -> Any:
    psycopg = pytest.importorskip("psycopg", reason="the PostgreSQL tests need psycopg: "
                                  "pip install -e '.[test]'")
    return psycopg.connect(url, autocommit=True)


class Cluster:
    """A private PostgreSQL cluster: its folder, data, socket and log."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.bin = binaries()
        self.data = base / "data"
        self.socket_dir = base / "run"
        self.log = base / "server.log"
        self.template: str | None = None
        self._names = itertools.count(1)

    @classmethod
    def start(cls, durable: bool = False) -> Cluster:
        """A new cluster, running; `durable`: every commit fsynced, as in production."""
        bin_dir = binaries()
        base = Path(tempfile.mkdtemp(prefix="teamd-pg-"))
        cluster = cls(base)
        cluster.bin = bin_dir
        base.chmod(0o755)  # the postgres user walks into it; data and socket are its own
        cluster.socket_dir.mkdir(mode=0o755)
        if os.geteuid() == 0:
            shutil.chown(cluster.socket_dir, USER, USER)
            cluster.log.touch(0o600)
            shutil.chown(cluster.log, USER, USER)
            base.chmod(0o711)
            shutil.chown(base, USER)
        try:
            cluster._run("initdb", "-D", str(cluster.data), "-U", USER, "--auth=trust",
                         "--no-sync", "-E", "UTF8", "--locale=C")
            (cluster.data / "pg_hba.conf").write_text(HBA)
            cluster._run("pg_ctl", "start", "-D", str(cluster.data), "-w", "-t", "60",
                         "-l", str(cluster.log), "-o",
                         f"-k {cluster.socket_dir} {SETTINGS}" + ("" if durable else f" {FAST}"))
        except BaseException:
            shutil.rmtree(base, ignore_errors=True)
            raise
        cluster.sql(f"CREATE ROLE {NEEDS_PASSWORD} NOLOGIN")
        return cluster

    def _run(self, program: str, *args: str) -> None:
        done = subprocess.run([*_as_owner(), str(self.bin / program), *args],
                              capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise RuntimeError(f"{program} failed (exit {done.returncode}): "
                               f"{done.stderr.strip()[-2000:]}\n{log[-2000:]}")

    def stop(self) -> None:
        """Stopped at once, and its folder removed."""
        try:
            if (self.data / "postmaster.pid").exists():
                self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "immediate", "-w")
        finally:
            shutil.rmtree(self.base, ignore_errors=True)

    def url(self, database: str = "postgres", user: str = USER,
            password: str | None = None) -> str:
        """A libpq URI of a database here, over the Unix socket."""
        who = user if password is None else f"{user}:{password}"
        return f"postgresql://{who}@/{database}?host={self.socket_dir}"

    def sql(self, statement: str, database: str = "postgres") -> list[tuple[Any, ...]]:
        """Run one statement as the superuser (autocommit): its rows, if any."""
        with _connect(self.url(database)) as conn:
            cur = conn.execute(statement)
            return list(cur.fetchall()) if cur.description else []

    def make_template(self, install: Any) -> None:
        """Make the database every `database()` copies: `install(url)` fills it (the schema)."""
        name = "teamd_template"
        self.sql(f"CREATE DATABASE {name}")
        install(self.url(name))
        self.sql(f"ALTER DATABASE {name} WITH is_template = true")
        self.template = name

    def database(self) -> str:
        """A fresh database of its own: its URL."""
        name = f"t{os.getpid()}_{next(self._names)}"
        template = f" TEMPLATE {self.template}" if self.template else ""
        self.sql(f"CREATE DATABASE {name}{template}")
        return self.url(name)

    def drop(self, url: str) -> None:
        """Drop a database `database()` made, its connections cut first."""
        self.sql(f"DROP DATABASE IF EXISTS {database_name(url)} WITH (FORCE)")

    def password_url(self, database: str, user: str, password: str) -> str:
        """A login role that must give `password` (pg_hba: scram), owning nothing: its URL
        for `database`, with the password in it."""
        self.sql(f"CREATE ROLE {user} LOGIN PASSWORD '{password}' IN ROLE {NEEDS_PASSWORD}")
        self.sql(f"GRANT ALL ON DATABASE {database} TO {user}")
        self.sql(f"GRANT ALL ON SCHEMA public TO {user}", database)
        self.sql(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {user}", database)
        self.sql(f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {user}", database)
        return self.url(database, user, password)

    def terminate(self, database: str) -> int:
        """Cut every connection to `database` but this one (a server-side drop of a
        client's link): how many were cut."""
        rows = self.sql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        f"WHERE datname = '{database}' AND pid <> pg_backend_pid()")
        return int(rows[0][0])

    def terminate_application(self, url: str, application: str) -> int:
        """Cut every connection to `url`'s database made as `application` (a host's
        connections are `teamd HOST`): how many were cut."""
        rows = self.sql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        f"WHERE datname = '{database_name(url)}' "
                        f"AND application_name = '{application}'")
        return int(rows[0][0])


def database_name(url: str) -> str:
    """The database a `Cluster.url` names."""
    return url.split("@/", 1)[1].split("?", 1)[0]
