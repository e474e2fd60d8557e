"""The store from the command line (CONTRACT §15): `--store URL` of `teamctl` and `teamd run`,
`teamctl init --store URL`. A URL that cannot work is one line and exit 2 with nothing
written; a password on the command line draws one warning (it shows in `ps`) and is never
shown or written: every output and every file under the root is scanned for it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import psutil
import pytest

from teamd import actions
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import TEAM, asked, running_teamd
from tests.helpers_proc import clean_env, ctl, snapshot, teamctl
from tests.postgres import Cluster, database_name

SECRET = "s3cret-Pw"
#: a server that is not there: nothing listens on port 1
UNREACHABLE = f"postgresql://teamd:{SECRET}@127.0.0.1:1/teamd"

BAD = [("other-scheme", f"mysql://teamd:{SECRET}@db/teamd", "unknown store"),
       ("malformed-port", f"postgresql://teamd:{SECRET}@db:port/teamd", "malformed store URL"),
       ("not-a-url", "postgres", "unknown store")]


def scan(root: Path, *outputs: bytes) -> None:
    """The password is in no output and no file under `root`."""
    for out in outputs:
        assert SECRET.encode() not in out, out
    for rel, (_, _, data) in snapshot(root).items():
        assert data is None or SECRET.encode() not in data, rel


@pytest.mark.parametrize(("url", "says"), [(u, s) for _, u, s in BAD],
                         ids=[i for i, _, _ in BAD])
def test_a_bad_store_url_is_one_line_exit_2_and_nothing_written(
        ws: Workspace, url: str, says: str) -> None:
    ctl(ws, "init")
    actions.create_team(ws, TEAM)
    before = snapshot(ws.root)
    runs = [teamctl(ws.root, "--store", url, "status"),
            teamctl(ws.root, "--store", url, "create", "other"),
            teamctl(ws.root, "init", "--store", url),
            teamctl(ws.root, "--store", url, "init"),
            subprocess.run([sys.executable, "-m", "teamd", "run", "--root", str(ws.root),
                            "--store", url], capture_output=True, timeout=60,
                           env=clean_env(), check=False)]
    for result in runs:
        assert result.returncode == 2, result
        lines = result.stderr.decode().splitlines()
        assert len(lines) == 1 and says in lines[0], (result.args, lines)
        assert result.stdout == b"", result
        scan(ws.root, result.stdout, result.stderr)
    assert snapshot(ws.root) == before  # teamd.toml too


def test_init_store_with_no_teamd_toml_writes_nothing_when_the_url_is_bad(
        ws: Workspace) -> None:
    result = teamctl(ws.root, "init", "--store", BAD[0][1])
    assert result.returncode == 2 and not ws.settings_file.exists(), result


def test_init_store_names_the_store_keeping_the_file_and_is_idempotent(ws: Workspace) -> None:
    ctl(ws, "init")
    edited = ws.settings_file.read_text().replace("idle_timeout = 60", "idle_timeout = 90  # mine")
    ws.settings_file.write_text(edited + "\n# my own note\n")
    out = ctl(ws, "init", "--store", "files", "--json")
    assert json.loads(out) == {"settings": str(ws.settings_file), "store": "files",
                               "schema": None, "shared": None}  # files: nothing shared
    text = ws.settings_file.read_text()
    assert text == edited + "\n# my own note\n"  # `store = "files"` was there: unchanged
    ws.settings_file.write_text(text.replace('store = "files"\n', ""))
    ctl(ws, "init", "--store", "files")
    again = ws.settings_file.read_text()
    assert again.count('store = "files"') == 1 and "idle_timeout = 90  # mine" in again
    assert "# my own note" in again and "[permissions]" in again
    before = snapshot(ws.root)
    ctl(ws, "init", "--store", "files")  # run again: exit 0, nothing changed
    assert snapshot(ws.root) == before
    assert "store" in json.loads(ctl(ws, "config", "--json"))


def test_init_store_on_a_new_root_writes_the_defaults_and_the_store(tmp_path: Path) -> None:
    root = tmp_path / "new"
    ctl(root, "init", "--store", "files")
    text = (root / "teamd.toml").read_text()
    assert 'store = "files"' in text and "idle_timeout = 60" in text and "[hooks]" in text


def test_a_password_on_the_command_line_is_warned_about_and_never_shown(
        ws: Workspace) -> None:
    ctl(ws, "init")
    before = snapshot(ws.root)
    result = teamctl(ws.root, "--store", UNREACHABLE, "status")
    lines = result.stderr.decode().splitlines()
    assert result.returncode in (1, 2), result  # no PostgreSQL store, or no server
    assert "shows in `ps`" in lines[0] and "teamd:***@127.0.0.1:1" in lines[0], lines
    assert len(lines) == 2, lines  # the warning, then the error
    scan(ws.root, result.stdout, result.stderr)
    assert snapshot(ws.root) == before
    # teamd run: warned once, though it re-executes itself to hide the API key
    env = {**clean_env(), "ANTHROPIC_API_KEY": "test-key"}
    run = subprocess.run([sys.executable, "-m", "teamd", "run", "--root", str(ws.root),
                          "--store", UNREACHABLE], capture_output=True, timeout=60, env=env,
                         check=False)
    said = run.stderr.decode()
    assert run.returncode in (1, 2) and said.count("shows in `ps`") == 1, said
    scan(ws.root, run.stdout, run.stderr)
    # a password-less URL draws no warning
    quiet = teamctl(ws.root, "--store", "postgresql://teamd@127.0.0.1:1/teamd", "status")
    assert b"shows in `ps`" not in quiet.stderr


def test_config_and_status_show_the_store_masked(ws: Workspace) -> None:
    actions.create_team(ws, TEAM)
    env = {**clean_env(), "TEAMD_STORE": UNREACHABLE}
    result = teamctl(ws.root, "config", "--json", env=env)
    assert result.returncode == 0, result
    assert json.loads(result.stdout)["store"] == {
        "value": "postgresql://teamd:***@127.0.0.1:1/teamd", "source": "env"}
    scan(ws.root, result.stdout, result.stderr)
    doc = json.loads(ctl(ws, "status", "--json"))
    assert doc["store"] == "files" and doc["root"] == str(ws.root)
    assert {"supervisor", "teams", "unreadable"} <= set(doc)


# -- against a real PostgreSQL (tests/postgres.py: skipped, saying why, where none) -----
def fresh_database(cluster: Cluster) -> str:
    """A database with no schema in it yet: its name."""
    name = f"fresh_{uuid.uuid4().hex[:12]}"
    cluster.sql(f"CREATE DATABASE {name}")
    return name


def test_init_store_creates_the_schema_once_and_writes_no_password(
        ws: Workspace, pg_cluster: Cluster) -> None:
    name = fresh_database(pg_cluster)
    url = pg_cluster.password_url(name, f"u_{name}", SECRET)
    ctl(ws, "init")
    first = teamctl(ws.root, "init", "--store", url, "--json")
    assert first.returncode == 0, first
    done = json.loads(first.stdout)
    assert done["schema"] == "created" and done["store"] == url.replace(f":{SECRET}", "")
    assert f'store = "{done["store"]}"' in ws.settings_file.read_text()
    assert first.stderr.decode().count("shows in `ps`") == 1  # the password on the line
    assert pg_cluster.sql("SELECT count(*) FROM teamd_schema", name) == [(1,)]
    before = snapshot(ws.root)
    again = teamctl(ws.root, "init", "--store", url, "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["schema"] == "current", again
    assert snapshot(ws.root) == before
    # the root now runs on it, the password coming from the environment (never the file)
    env = {**clean_env(), "PGPASSWORD": SECRET}
    outputs = [first.stdout, first.stderr, again.stdout, again.stderr]
    for args in (("create", TEAM), ("spawn", TEAM, "alice", "--prompt", "p"),
                 ("send", TEAM, "alice", "hi"), ("status", "--json"), ("logs", TEAM)):
        result = teamctl(ws.root, *args, env=env)
        assert result.returncode == 0, (args, result)
        outputs += [result.stdout, result.stderr]
    assert json.loads(outputs[-4])["store"] == done["store"]
    assert ws.store.description != "files"
    scan(ws.root, *outputs)
    scan_database(pg_cluster, name)


def scan_database(cluster: Cluster, name: str) -> None:
    """The password is in no row of any table of the store (the journal among them)."""
    tables = [t for (t,) in cluster.sql("SELECT tablename FROM pg_tables WHERE schemaname = "
                                        "'public'", name)]
    assert "journal" in tables and cluster.sql("SELECT count(*) FROM journal", name)[0][0]
    for table in tables:
        hits = cluster.sql(f"SELECT count(*) FROM {table} t WHERE t::text LIKE "
                           f"'%{SECRET}%'", name)
        assert hits == [(0,)], table


def test_init_store_refuses_a_url_that_cannot_work(ws: Workspace, pg_cluster: Cluster,
                                                   pg_url: str) -> None:
    ctl(ws, "init")
    before = snapshot(ws.root)
    name = fresh_database(pg_cluster)
    wrong = pg_cluster.password_url(name, f"u_{name}", SECRET).replace(SECRET, "wrong-pw")
    newer = database_name(pg_url)
    pg_cluster.sql("UPDATE teamd_schema SET version = version + 1", newer)
    cases = [(wrong, 2, "password"), (pg_cluster.url("no_such_db"), 2, "no_such_db"),
             (pg_url, 2, "newer"), (UNREACHABLE, 1, "")]
    for url, code, says in cases:
        result = teamctl(ws.root, "init", "--store", url)
        lines = result.stderr.decode().splitlines()
        errors = [line for line in lines if "shows in `ps`" not in line]
        assert result.returncode == code and len(errors) == 1, (url, result)
        assert says in errors[0], (url, errors)
        scan(ws.root, result.stdout, result.stderr)
        assert snapshot(ws.root) == before, url  # teamd.toml unchanged
    # no teamd.toml at all: none is made either
    ws.settings_file.unlink()
    assert teamctl(ws.root, "init", "--store", wrong).returncode == 2
    assert not ws.settings_file.exists()
    assert pg_cluster.sql("SELECT to_regclass('teamd_schema') IS NULL", name) == [(True,)]


@pytest.mark.timeout(180)
def test_teamd_run_and_teamctl_on_the_store_their_store_option_names(
        tmp_path: Path, server: ScriptedServer, pg_url: str) -> None:
    root = tmp_path / "on-pg"
    root.mkdir()
    pg = Workspace.at(root, store=pg_url)
    ctl(root, "--store", pg_url, "create", TEAM)
    ctl(root, "--store", pg_url, "spawn", TEAM, "alice", "--prompt", "Wait for work.",
        "--cwd", str(tmp_path))
    with running_teamd(pg, server.url, backoff_initial=0.1) as daemon:
        assert f"--store {pg_url}" in " ".join(psutil.Process(daemon.pid).cmdline())
        since = len(server.requests)
        ctl(root, "--store", pg_url, "send", TEAM, "alice", "PING-s1")
        server.wait_for(asked("PING-s1", "alice"), 30, since=since)
        doc = json.loads(ctl(root, "--store", pg_url, "status", TEAM, "--json"))
        assert doc["store"] == pg_url and doc["supervisor"] is not None
    # the records are the database's: the root holds only what a host keeps for itself
    assert not (root / ".teams" / TEAM / "config.json").exists()
    assert not (root / ".tasks").exists()
    assert json.loads(ctl(root, "status", "--json"))["teams"] == []  # the files: no team


def test_spawn_with_hosts_leaves_a_cwd_missing_here_to_the_hosts(tmp_path: Path,
                                                                 pg_url: str) -> None:
    """The machine running teamctl need not have the member's cwd: the host that runs it
    judges (placement skips a host without it). Pinned to this machine, or relative, or
    with the files store (no hosts): exit 2, one line, nothing written."""
    root = tmp_path / "on-pg"
    root.mkdir()
    env = {**clean_env(), "TEAMD_STORE": pg_url, "TEAMD_HOST": "here"}
    elsewhere = tmp_path / "on-the-build-hosts"  # a mount this machine does not have
    ctl(root, "create", TEAM, env=env)
    spawned = json.loads(ctl(root, "spawn", TEAM, "a", "--prompt", "p", "--cwd",
                             str(elsewhere), "--json", env=env))
    assert spawned["cwd"] == str(elsewhere) and not elsewhere.exists()
    before = ctl(root, "status", TEAM, "--json", env=env)
    refused = [(env, ("--cwd", str(elsewhere), "--host", "here"), "is not a directory"),
               (env, ("--cwd", "relative/dir"), "give its absolute path"),
               ({**clean_env()}, ("--cwd", str(elsewhere)), "is not a directory")]
    for where, args, says in refused:
        if "TEAMD_STORE" not in where:
            ctl(root, "create", TEAM, env=where)  # the files store's own team
        result = teamctl(root, "spawn", TEAM, "b", "--prompt", "p", *args, env=where)
        lines = result.stderr.decode().splitlines()
        assert result.returncode == 2 and len(lines) == 1 and says in lines[0], (args, result)
    assert ctl(root, "status", TEAM, "--json", env=env) == before
    assert json.loads(ctl(root, "status", TEAM, "--json", env=clean_env()))["teams"][0][
        "members"] == []
