"""Deprecated and retired models (CONTRACT.md sections 7 and 12): the table comes from the
installed SDK's source, never imported by `teamctl`; `teamctl spawn` warns in one line and
`teamd` journals `model_deprecated` once per model per start into each team using it."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path

import pytest

from teamd import actions, deprecations, roster
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import journal, running_teamd, wait_until
from tests.helpers_proc import clean_env, teamctl


def sdk_table() -> dict[str, str]:
    """The table as the SDK itself has it (imported here, in the test only)."""
    from anthropic._data import DEPRECATED_MODELS

    return dict(DEPRECATED_MODELS)


def test_the_table_is_the_installed_sdks() -> None:
    assert deprecations.table() == sdk_table()
    assert "claude-sonnet-4-5" in deprecations.table()


def test_reading_the_table_imports_nothing_of_the_sdk() -> None:
    code = ("import sys; from teamd import deprecations; t = deprecations.table(); "
            "print(len(t) > 0, any(m == 'anthropic' or m.startswith('anthropic.') "
            "for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout.split()
    assert out == ["True", "False"]


def test_deprecated_then_retired_by_the_date() -> None:
    before = deprecations.lookup("claude-sonnet-4-5", today=dt.date(2026, 11, 29))
    assert before == deprecations.Deprecation("claude-sonnet-4-5", "2026-11-30", retired=False)
    assert before.warning().startswith("model claude-sonnet-4-5 is deprecated and retires "
                                       "on 2026-11-30")
    on_the_day = deprecations.lookup("claude-sonnet-4-5", today=dt.date(2026, 11, 30))
    assert on_the_day is not None and on_the_day.retired
    assert "was retired on 2026-11-30" in on_the_day.warning()
    assert deprecations.lookup("claude-sonnet-5-5") is None  # the default is current


@pytest.mark.parametrize("source, expected", [
    ('from typing import Dict\nDEPRECATED_MODELS: Dict[str, str] = {"a": "March 1st, 2025"}\n',
     {"a": "March 1st, 2025"}),
    ('DEPRECATED_MODELS = {"b": "2025-01-02", "c": "May 22nd, 2027"}\n',
     {"b": "2025-01-02", "c": "May 22nd, 2027"}),
    ("DEPRECATED_MODELS = build()\n", None),  # not a literal: nothing is run to find out
    ("def f(:\n", None),
])
def test_the_table_is_parsed_not_run(source: str, expected: dict[str, str] | None) -> None:
    assert deprecations._literal_table(source, "x.py") == expected


@pytest.mark.parametrize("text, day", [
    ("November 30th, 2026", dt.date(2026, 11, 30)), ("June 1st, 2026", dt.date(2026, 6, 1)),
    ("October 22nd, 2025", dt.date(2025, 10, 22)), ("2027-03-03", dt.date(2027, 3, 3)),
    ("soon", None),
])
def test_dates_in_the_sdks_words(text: str, day: dt.date | None) -> None:
    assert deprecations._parse_date(text) == day


def spawn_warnings(ws: Workspace, name: str, *args: str, **env: str) -> list[str]:
    """`teamctl spawn t NAME ARGS` (a key set: no warning about it in the way): exit 0,
    and its warning lines."""
    env = {**clean_env(), "ANTHROPIC_API_KEY": "k", **env}
    if not ws.store.team_exists("t"):
        assert teamctl(ws.root, "create", "t", env=env).returncode == 0
    done = teamctl(ws.root, "spawn", "t", name, "--prompt", "p", *args, env=env)
    assert done.returncode == 0, done.stderr
    return [line for line in done.stderr.decode().splitlines() if "warning" in line]


def test_spawn_warns_in_one_line_for_the_model_or_the_default(ws: Workspace) -> None:
    warnings = spawn_warnings(ws, "a", "--model", "claude-sonnet-4-5")
    assert len(warnings) == 1 and "claude-sonnet-4-5" in warnings[0]
    assert "2026-11-30" in warnings[0] and ("deprecated" in warnings[0]
                                            or "retired" in warnings[0])
    assert spawn_warnings(ws, "b") == []
    by_default = spawn_warnings(ws, "c", TEAMD_MODEL="claude-mythos-preview")
    assert "model claude-mythos-preview was retired on 2026-06-30" in by_default[0]


def test_teamd_journals_each_deprecated_model_once_per_start_per_team(
        ws: Workspace, tmp_path: Path) -> None:
    # old: two members on a deprecated model and one on a current one; new: current only
    actions.create_team(ws, "old")
    actions.create_team(ws, "new")
    for team, name, model in [("old", "a", "claude-sonnet-4-5"), ("old", "b", "claude-sonnet-4-5"),
                              ("old", "c", None), ("new", "d", None)]:
        actions.spawn(ws, team, name, "Wait.", model=model, cwd=str(tmp_path))

    def told(team: str) -> list[dict[str, object]]:
        return [e for e in journal(ws, team) if e["event"] == "model_deprecated"]

    def all_idle() -> bool:
        return all(m["status"] == "idle" for team in ("old", "new")
                   for m in roster.load(ws, team)["members"])

    with ScriptedServer({"rules": []}) as server:
        for start in (1, 2):
            with running_teamd(ws, server.url):
                # every member up and idle: many reconciles have run since the start
                wait_until(all_idle, 30, "every member to be idle")
            assert [(e["model"], e["retires"]) for e in told("old")] == [
                ("claude-sonnet-4-5", "2026-11-30")] * start
            assert told("new") == []


def test_spawn_warns_for_a_model_the_installed_sdk_does_not_list(ws: Workspace) -> None:
    """A typo, or a model retired and dropped from the SDK's list (CONTRACT §9): one line,
    as for a deprecated one; the member is added all the same."""
    assert "claude-sonnet-4-0" not in deprecations.models()  # the SDK's own list, read
    assert {"claude-sonnet-5-5", "claude-sonnet-4-5"} <= deprecations.models()
    assert spawn_warnings(ws, "a", "--model", "claude-sonnet-4-0") == [
        "warning: model claude-sonnet-4-0 is not a model the installed SDK knows (a typo, or "
        "one retired and dropped): calls to it may fail; did you mean claude-sonnet-4-6?"]
    assert roster.get(roster.load(ws, "t"), "a")["model"] == "claude-sonnet-4-0"
    assert spawn_warnings(ws, "b", TEAMD_MODEL="claude-sonet-5-5") == [
        "warning: model claude-sonet-5-5 is not a model the installed SDK knows (a typo, or "
        "one retired and dropped): calls to it may fail; did you mean claude-sonnet-5-5?"]
    for i, known in enumerate(("claude-sonnet-5-5", "claude-haiku-4-5-20251001")):
        assert spawn_warnings(ws, f"c{i}", "--model", known) == []
