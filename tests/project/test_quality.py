"""The linters and the type checker are part of the test command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=300)


def test_ruff() -> None:
    result = run("ruff", "check", "teamd", "teamctl", "tests", "bench")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy() -> None:
    result = run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr


def test_teamctl_does_not_import_anthropic() -> None:
    code = "import sys, teamctl.cli; print('anthropic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"
