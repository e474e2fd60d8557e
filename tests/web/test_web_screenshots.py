"""The README's screenshots come from a real run (scripts/web_screenshots.py): this runs
the script into a temporary folder and checks it wrote each page as a PNG of the size it
asked for, showing a live page (the script waits for the event stream and the data)."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SHOTS = {"web-teams.png": (1360, 520), "web-team.png": (1360, 1100),
         "web-member.png": (1360, 900)}


@pytest.mark.timeout(300)
def test_the_screenshot_script_takes_every_page(tmp_path: Path, browser: Any) -> None:
    out = tmp_path / "shots"
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "web_screenshots.py"),
                           "--out", str(out)], capture_output=True, text=True, timeout=240,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == [str(out / name) for name in SHOTS]
    for name, size in SHOTS.items():
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        assert struct.unpack(">II", data[16:24]) == size
        assert (REPO / "docs" / name).is_file()  # the README shows the committed ones
