"""No module of `teamd/` or `teamctl/` grows past 450 lines (the scripted server's included):
a newcomer reads one in a sitting, and a module that needs more holds two concerns."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 450


def test_no_module_over_the_limit() -> None:
    over = {str(p.relative_to(ROOT)): n for package in ("teamd", "teamctl")
            for p in sorted((ROOT / package).rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > LIMIT}
    assert not over, f"modules over {LIMIT} lines: {over}"
