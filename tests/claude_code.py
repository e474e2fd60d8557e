"""The Claude Code CLI the tests run (CONTRACT §14, "Tested for real"): the version the
project pins, installed from the npm registry into the project's cache folder on first use
(`.cache/claude-code/{VERSION}/`, ignored by git), and how a test runs it headless.

`installed()` installs it once per machine (under a lock, into a temporary prefix renamed
into place, so two test runs at once or a run killed mid-install never leave half a CLI)
and returns the program; where `npm` is absent it skips the test, saying why. `env()` is
the environment a test gives it: a scratch HOME, no telemetry or other non-essential
traffic, the API at `base_url` with the key given (never the environment's own).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import filelock
import pytest

#: the Claude Code release the tests run (the oldest the project supports: teamd.runtimes.OLDEST)
VERSION = "2.1.332"
PACKAGE = "@anthropic-ai/claude-code"
CACHE = Path(__file__).resolve().parent.parent / ".cache" / "claude-code"
#: a fresh install takes ~10 s on a fast line; a slow registry gets far longer
INSTALL_TIMEOUT = 600


def program(version: str = VERSION) -> Path:
    """Where the installed CLI is (whether or not it is there yet)."""
    return CACHE / version / "node_modules" / ".bin" / "claude"


def installed(version: str = VERSION) -> Path:
    """The pinned CLI, installed with `npm install --prefix` on first use. Skips the calling
    test, saying why, where npm is missing; fails it when npm is there but cannot
    install."""
    claude = program(version)
    if claude.exists():
        return claude
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip(f"npm is not on PATH: cannot install {PACKAGE}@{version} for the "
                    "Claude Code tests (install Node.js and npm to run them)")
    CACHE.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(CACHE / f"{version}.lock"), mode=0o600):
        if claude.exists():  # another run installed it meanwhile
            return claude
        staging = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=CACHE))
        try:
            done = subprocess.run(
                [npm, "install", "--prefix", str(staging), "--no-audit", "--no-fund",
                 "--loglevel=error", f"{PACKAGE}@{version}"],
                capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False)
            if done.returncode != 0:
                pytest.fail(f"npm install {PACKAGE}@{version} failed "
                            f"(exit {done.returncode}): {done.stderr.strip()[-2000:]}")
            os.replace(staging, CACHE / version)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return claude


def env(home: Path, base_url: str, api_key: str, **extra: str) -> dict[str, str]:
    """The whole environment of a headless Claude Code run: only PATH from the test's own
    (no key, no proxy, no user config leaks in), a scratch HOME, the API at `base_url`."""
    home.mkdir(parents=True, exist_ok=True)
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
            "ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": api_key,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", **extra}


def headless(claude: Path, prompt: str, *options: str) -> list[str]:
    """The command of one headless turn, its events as stream-json on stdout."""
    return [str(claude), "-p", prompt, "--output-format", "stream-json", "--verbose",
            *options]
