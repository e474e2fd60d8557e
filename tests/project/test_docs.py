"""The docs embed the real --help output, and the README's quick start is what CI runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_cli_reference_is_current() -> None:
    result = subprocess.run([sys.executable, "scripts/gen_cli_docs.py", "--check"], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def section(title: str) -> str:
    """The README's `## title` section, up to the next `## ` heading."""
    readme = (REPO / "README.md").read_text()
    return readme.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def commands(text: str) -> list[str]:
    """The non-comment lines of the code fences in `text`."""
    return [line for block in re.findall(r"```\w*\n(.*?)```", text, re.S)
            for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_the_quick_start_is_two_commands_and_ci_runs_the_second() -> None:
    """Run the main job; pass the tests: one line each (issue 19). The --lead demo is its
    own section just below."""
    quick = commands(section("Quick start"))
    assert len(quick) == 2, quick
    assert quick[0].endswith("teamctl demo")
    assert quick[1].strip() in (REPO / ".ci" / "run").read_text()
    readme = (REPO / "README.md").read_text()
    after = readme.split("\n## Quick start\n", 1)[1].split("\n## ", 2)[1]
    assert after.startswith("The demo with an LLM lead") and "demo --lead" in after
