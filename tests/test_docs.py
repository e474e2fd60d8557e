"""The docs embed the real --help output, and the README's quick start is what CI runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_cli_reference_is_current() -> None:
    result = subprocess.run([sys.executable, "scripts/gen_cli_docs.py", "--check"], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_ci_runs_the_readme_test_command() -> None:
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)\n```", readme.split("## Quick start", 1)[1],
                        re.S)[:2]
    assert len(blocks) == 2, "the quick start is two commands"
    assert blocks[1].strip() in (REPO / ".ci" / "run").read_text()
