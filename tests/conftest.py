"""Shared fixtures. Every test runs hermetic: its own workspace root, no API key, and no
systemd variables leaking in from the environment that runs pytest.

The fixtures test files share live here (plain helpers: tests/harness.py,
tests/helpers_proc.py, tests/gitrepo.py). A file that needs its own variant overrides a
fixture by defining one of the same name: `script` to script the model, `team` to give the
team members."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests import claude_code, postgres
from tests.gitrepo import make_repo
from tests.harness import TEAM, make_team

SCRUB = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "NOTIFY_SOCKET",
         "WATCHDOG_USEC", "WATCHDOG_PID")


@pytest.fixture(autouse=True)
def hermetic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = tmp_path / "ws"
    root.mkdir()
    monkeypatch.setenv("TEAMD_ROOT", str(root))
    for key in SCRUB:
        monkeypatch.delenv(key, raising=False)
    for key in list(os.environ):
        if key.startswith("TEAMD_") and key != "TEAMD_ROOT":
            monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(tmp_path)
    yield root


@pytest.fixture
def ws(hermetic: Path) -> Workspace:
    return Workspace.at(hermetic)


@pytest.fixture
def script() -> dict[str, Any]:
    """The scripted model's scenario for `server`: no rules, the default reply (one text
    block, so a member makes one call and goes idle). Tests add rules with
    `server.add_rule`; a file whose every test wants the same rules overrides `script`."""
    return {"rules": []}


@pytest.fixture
def server(script: dict[str, Any], tmp_path: Path) -> Iterator[ScriptedServer]:
    """The scripted model server, answering `script`; every request is also logged to
    tmp_path/requests.jsonl (outside the workspace root)."""
    with ScriptedServer(script, log_path=tmp_path / "requests.jsonl") as srv:
        yield srv


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """An empty folder for members to work in (their `cwd`)."""
    d = tmp_path / "work"
    d.mkdir()
    return d


@pytest.fixture
def team(request: pytest.FixtureRequest, ws: Workspace) -> str:
    """The test file's team (its module's TEAM, else harness.TEAM), created with no member.
    A file whose tests want members overrides this with a `make_team` of its own."""
    return make_team(ws, None, team=getattr(request.module, "TEAM", TEAM))


@pytest.fixture
def live_process() -> Iterator[psutil.Process]:
    """A real process standing in for a running member that never answers."""
    proc = subprocess.Popen(["sleep", "120"])
    try:
        yield psutil.Process(proc.pid)
    finally:
        proc.kill()
        proc.wait(10)


DISK_SIZE = "8m"  #: the size of `small_disk`


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of DISK_SIZE of the test's own, unmounted afterwards (root only: skipped,
    saying why, where mount is not permitted). `harness.fill` fills it."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_SIZE},mode=0700",
                           "tmpfs", str(mnt)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, check=False)


@pytest.fixture
def repo(ws: Workspace) -> Path:
    """The workspace root is the repository (so teamd's own files must stay out of it),
    its first commit holding shared.txt."""
    made = make_repo(ws.root, {"shared.txt": "original line\n"})
    # the test harness's own log of `teamd run` (tests/harness.py) is no product file
    (made / ".git" / "info" / "exclude").write_text("/teamd.log\n")
    return made


@pytest.fixture(scope="session")
def claude() -> Path:
    """The pinned Claude Code CLI (tests/claude_code.py), installed on first use; the test
    is skipped, saying why, where npm is absent."""
    return claude_code.installed()


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[postgres.Cluster]:
    """A private PostgreSQL cluster for the whole run (tests/postgres.py), stopped at the
    end; the test is skipped, saying why, where PostgreSQL is not installed. Its template
    database holds the store's schema, so each `pg_url` starts with it."""
    cluster = postgres.Cluster.start()
    try:
        from teamd.store.postgres.schema import install_schema
        cluster.make_template(install_schema)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def pg_url(pg_cluster: postgres.Cluster) -> Iterator[str]:
    """A fresh database of the test's own, holding the store's schema: its URL (no
    password: the cluster trusts local connections)."""
    url = pg_cluster.database()
    try:
        yield url
    finally:
        pg_cluster.drop(url)
