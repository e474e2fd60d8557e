"""The shipped units in systemd/: they verify cleanly and keep the settings we rely on.

`systemd-analyze verify` loads a unit with a test-mode manager in-process; it never boots
or talks to systemd, so it runs fine where systemd is not PID 1. A template cannot be
loaded without an instance: we copy each unit as-is into a temp folder and verify the
instance `teamd@home-user-proj.service`, which systemd builds from the template there.
"""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

UNIT_DIR = Path(__file__).resolve().parents[2] / "systemd"
UNITS = sorted(UNIT_DIR.glob("*.service"))
DEFAULT_STOP_TIMEOUT = 20  # CONTRACT.md section 10
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")


def _ids(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


def _instance_name(unit: Path, instance: str = "home-user-proj") -> str:
    # teamd@.service -> teamd@home-user-proj.service; a plain unit stays as it is.
    return unit.name.replace("@.", f"@{instance}.", 1)


def _parse(unit: Path) -> configparser.RawConfigParser:
    # systemd allows repeated keys (Environment=); keep the last, we only read single ones.
    parser = configparser.RawConfigParser(strict=False, interpolation=None, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(unit.read_text())
    return parser


def _seconds(value: str) -> float:
    """A systemd time span ("45", "45s", "1min 30s") in seconds."""
    units = {"": 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600}
    total = 0.0
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", value):
        total += float(number) * units[unit]
    return total


def _verify(
    unit: Path, tmp_path: Path, *, user: bool, instance: str
) -> subprocess.CompletedProcess[str]:
    assert SYSTEMD_ANALYZE is not None
    folder = tmp_path / ("user" if user else "system")
    folder.mkdir(exist_ok=True)
    shutil.copy2(unit, folder / unit.name)
    env = dict(os.environ, SYSTEMD_LOG_COLOR="0", SYSTEMD_PAGER="")
    cmd = [SYSTEMD_ANALYZE]
    if user:
        # A --user manager needs a runtime directory; give it a private one.
        runtime = tmp_path / "runtime"
        runtime.mkdir(mode=0o700, exist_ok=True)
        env["XDG_RUNTIME_DIR"] = str(runtime)
        cmd.append("--user")
    cmd += ["verify", "--man=no", str(folder / _instance_name(unit, instance))]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)


def test_there_are_units() -> None:
    assert UNITS, f"no *.service in {UNIT_DIR}"


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed")
@pytest.mark.parametrize("user", [False, True], ids=["system", "user"])
@pytest.mark.parametrize("instance", ["home-user-proj", r"tmp-my\x20proj"], ids=["plain", "space"])
@pytest.mark.parametrize("unit", UNITS, ids=_ids(UNITS))
def test_systemd_analyze_verify(unit: Path, tmp_path: Path, user: bool, instance: str) -> None:
    result = _verify(unit, tmp_path, user=user, instance=instance)
    output = result.stdout + result.stderr
    # Warnings about other units on the machine may appear; only ours must be clean.
    base = unit.name.split("@")[0]
    ours = [line for line in output.splitlines() if base in line]
    assert result.returncode == 0, output
    assert ours == [], "\n".join(ours)


@pytest.mark.parametrize("unit", UNITS, ids=_ids(UNITS))
def test_unit_settings(unit: Path) -> None:
    text = unit.read_text()
    parser = _parse(unit)
    service = parser["Service"]
    assert service["Type"] == "notify"
    assert service["NotifyAccess"] == "main"
    assert service["KillMode"] == "mixed"
    assert _seconds(service["TimeoutStopSec"]) > DEFAULT_STOP_TIMEOUT
    assert _seconds(service["WatchdogSec"]) > 0
    assert service["Restart"] == "on-failure"
    assert service["NoNewPrivileges"] == "yes"
    assert service["ProtectSystem"] == "strict"
    assert service["ReadWritePaths"]
    assert service["PrivateTmp"] == "yes"
    assert service["EnvironmentFile"].startswith("-")
    assert parser["Unit"]["StartLimitIntervalSec"]
    assert parser["Unit"]["StartLimitBurst"]
    assert parser["Install"]["WantedBy"]
    # Keys newer than systemd 252 (Debian 12) are "unknown" there.
    for key in ("RestartSteps", "RestartMaxDelaySec"):
        assert not re.search(rf"^\s*{key}\s*=", text, re.M), key
    # The API key lives in the EnvironmentFile, never in the unit.
    assert not re.search(r"^\s*Environment\s*=.*ANTHROPIC_API_KEY", text, re.M)
    assert not re.search(r"sk-ant-", text)


TEMPLATES = [u for u in UNITS if "@." in u.name]


@pytest.mark.parametrize("unit", TEMPLATES, ids=_ids(TEMPLATES))
def test_template_uses_instance_path(unit: Path) -> None:
    service = _parse(unit)["Service"]
    assert "%f" in service["ExecStart"]
    assert service["ExecStart"].startswith("/usr/bin/env ")
    assert service["WorkingDirectory"] == "%f"
    assert "%f" in service["ReadWritePaths"].split()
