"""With PostgreSQL, `[permissions]`, `[hooks]` and `[prices]` are the store's (CONTRACT §15):
a rule and a price written in one root's teamd.toml reach a second root — another
directory, the same database — whose member is refused or allowed by the rule and charged
by the price: after `teamctl init --store` on the first root, again after a change and a
SIGHUP of the first root's `teamd` (a broken file on SIGHUP writes nothing), and, for a
member already running, from its next call after `init --store` is run again; a member
paused for want of a price is woken by a price pushed from the other root. The flat keys
stay each root's own. Real `teamd` and `teamctl` processes, real PostgreSQL (tests/postgres.py),
the real SDK over HTTP to the scripted server, real `bash`: what a command left on disk is
the proof it ran or not. With files, each root keeps its own tables.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import (
    TEAM,
    events_of,
    last_user,
    member,
    running_teamd,
    tool_use,
    wait_status,
    wait_until,
)
from tests.helpers_proc import ctl, teamctl

T = 30.0
MODEL = "claude-shared-1"  # no built-in price: what it costs is what [prices] says
#: what each scripted call reports: 1,000 input tokens, so a call costs rate / 1,000 dollars
USAGE = {"input_tokens": 1000, "output_tokens": 0, "cache_read_input_tokens": 0,
         "cache_creation_input_tokens": 0}
ONE, TWO = "echo one >> one.txt", "echo two >> two.txt"
OK = "(no output)\n[exit code 0]"  # what an allowed command of them gives back


@pytest.fixture
def script() -> dict[str, Any]:
    """alice, told a STEP, runs both commands in one turn; every call reports USAGE."""
    return {"rules": [
        {"agent": "alice", "contains": "STEP", "reply": {
            "content": [tool_use("bash", command=ONE), tool_use("bash", command=TWO)],
            "usage": USAGE}},
        {"agent": "alice", "tool_result": "bash", "reply": {"content": "Done.",
                                                             "usage": USAGE}}],
        "default": {"content": [{"type": "text", "text": "Waiting."}], "usage": USAGE}}


def settings_text(url: str, deny: str, rate: float) -> str:
    """The first root's teamd.toml: its own idle_timeout, a deny rule and MODEL's price."""
    return (f'store = "{url}"\nidle_timeout = 77\n\n[permissions]\ndeny = ["{deny}"]\n\n'
            f'[prices]\n"{MODEL}" = {{input = {rate}, output = 10.0}}\n')


def shared(deny: str, rate: float) -> dict[str, Any]:
    """The store's document that file makes."""
    return {"permissions": {"deny": [deny]}, "hooks": {},
            "prices": {MODEL: {"input": rate, "output": 10.0}}}


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def step(ws: Workspace, server: ScriptedServer, n: int) -> tuple[list[Any], list[float]]:
    """Tell alice STEP-n; once she is idle again: her two bash results (is_error, content)
    and the cost of each model call she made for it."""
    calls = len(events_of(ws, "alice", "model_call"))
    since = len(server.requests)
    ctl(ws, "send", TEAM, "alice", f"STEP-{n}")
    answered = server.wait_for(lambda r: r["agent"] == "alice" and any(
        b.get("type") == "tool_result" for b in last_user(r)["content"]), T, since=since)
    wait_until(lambda: len(events_of(ws, "alice", "model_call")) >= calls + 2, T,
               "both calls of the step journaled")
    wait_status(ws, "alice", "idle")
    results = [(b["is_error"], b["content"]) for b in last_user(answered)["content"]
               if b.get("type") == "tool_result"]
    costs = [e["cost_usd"] for e in events_of(ws, "alice", "model_call")[calls:]]
    return results, costs


def config(ws: Workspace) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(ctl(ws, "config", "--json"))
    return doc


def test_a_rule_and_a_price_of_one_root_govern_a_member_of_another(
        tmp_path: Path, pg_url: str, server: ScriptedServer) -> None:
    first, second = Workspace.at(tmp_path / "first"), Workspace.at(tmp_path / "second")
    work = tmp_path / "work"
    work.mkdir()
    first.root.mkdir()
    first.settings_file.write_text(settings_text(pg_url, "bash(echo one*)", 2.0))
    done = json.loads(ctl(first, "init", "--store", pg_url, "--json"))
    assert (done["schema"], done["shared"]) == ("current", "written")
    # the second root: a fresh teamd.toml of defaults, which keeps the store's tables
    done = json.loads(ctl(second, "init", "--store", pg_url, "--json"))
    assert done["shared"] == "kept"
    assert "echo one" not in second.settings_file.read_text()
    seen = config(second)
    assert seen["permissions"] == {"value": {"default": "allow", "allow": [], "ask": [],
                                             "deny": ["bash(echo one*)"]}, "source": "store"}
    assert seen["prices"]["source"] == "store" and seen["prices"]["value"][MODEL]["input"] == 2
    assert seen["idle_timeout"] == {"value": 60, "source": "file"}  # the flat keys: its own
    assert "store: " in ctl(second, "config")

    # after `init --store`: the rule refuses the one, allows the other; the price charges
    ctl(second, "create", TEAM)
    ctl(second, "spawn", TEAM, "alice", "--prompt", "Wait for work.", "--cwd", str(work),
        "--model", MODEL)
    with running_teamd(second, server.url):
        wait_status(second, "alice", "idle")
        results, costs = step(second, server, 1)
        assert results == [(True, 'denied by rule "bash(echo one*)"'),
                           (False, OK)]
        assert costs == [pytest.approx(0.002)] * 2
        ctl(second, "stop", TEAM, "alice", "--force")
        wait_status(second, "alice", "shutdown")
    assert (lines(work / "one.txt"), lines(work / "two.txt")) == ([], ["two"])

    # a change and a SIGHUP of the first root's teamd; a broken file first writes nothing
    with running_teamd(first, server.url) as daemon:
        wait_until(lambda: len(events_of(first, "*", "supervisor_started")) == 2, T,
                   "the first root's teamd to start")
        first.settings_file.write_text(settings_text(pg_url, "bsh(echo two*)", 7.0))
        daemon.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: "bsh(echo two*)" in daemon.output(), T, "the bad rule named")
        assert first.store.read_shared_tables() == shared("bash(echo one*)", 2.0)
        first.settings_file.write_text(settings_text(pg_url, "bash(echo two*)", 7.0))
        daemon.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: first.store.read_shared_tables() == shared("bash(echo two*)", 7.0),
                   T, "the first root's tables in the store")
    ctl(second, "up", TEAM)
    with running_teamd(second, server.url):
        wait_status(second, "alice", "idle")
        results, costs = step(second, server, 2)
        assert results == [(False, OK),
                           (True, 'denied by rule "bash(echo two*)"')]
        assert costs == [pytest.approx(0.007)] * 2

        # `init --store` again pushes them: a running member applies them from its next call
        first.settings_file.write_text(settings_text(pg_url, "bash(echo *)", 11.0))
        assert json.loads(ctl(first, "init", "--store", pg_url, "--json"))["shared"] == \
            "written"
        results, costs = step(second, server, 3)
        assert results == [(True, 'denied by rule "bash(echo *)"')] * 2
        assert costs == [pytest.approx(0.011)] * 2
    assert (lines(work / "one.txt"), lines(work / "two.txt")) == (["one"], ["two"])
    denied = [e["rule"] for e in events_of(second, "alice", "tool_denied")]
    assert denied == ["bash(echo one*)", "bash(echo two*)", "bash(echo *)", "bash(echo *)"]


def test_a_price_pushed_from_one_root_wakes_a_member_paused_for_want_of_it_on_another(
        tmp_path: Path, pg_url: str, server: ScriptedServer) -> None:
    """A budget is never blind: alice, on the second root, is paused (no price for MODEL).
    The first root's price, written into the store by `init --store` while the second
    root's teamd runs, wakes her there: nothing was done on the second root."""
    first, second = Workspace.at(tmp_path / "first"), Workspace.at(tmp_path / "second")
    first.root.mkdir()
    first.settings_file.write_text(f'store = "{pg_url}"\n')
    ctl(second, "init", "--store", pg_url)
    ctl(second, "create", TEAM)
    ctl(second, "spawn", TEAM, "alice", "--prompt", "Wait for work.", "--cwd",
        str(tmp_path), "--model", MODEL, "--budget", "1")
    with running_teamd(second, server.url):
        wait_status(second, "alice", "paused")
        assert member(second, TEAM, "alice")["last_error"] == \
            f"no price for model {MODEL}: add it under [prices] in teamd.toml"
        assert not [r for r in server.requests if r["agent"] == "alice"]  # never called
        first.settings_file.write_text(settings_text(pg_url, "bash(rm *)", 3.0))
        ctl(first, "init", "--store", pg_url)
        server.wait_for(lambda r: r["agent"] == "alice", T)
        wait_status(second, "alice", "idle")
        assert [e["cost_usd"] for e in events_of(second, "alice", "model_call")] == [
            pytest.approx(0.003)]


def test_a_hand_broken_shared_document_is_named_exit_2(tmp_path: Path, pg_url: str) -> None:
    """The document is written whole by `init --store` and SIGHUP, which check it first;
    one broken by hand (here, through the seam) is named, as a broken teamd.toml is."""
    ws = Workspace.at(tmp_path / "root")
    ctl(ws, "init", "--store", pg_url)
    for doc, says in (({"permissions": {"deny": ["bsh(x)"]}, "hooks": {}, "prices": {}},
                       "bsh(x)"),
                      ({"permissions": {}, "colours": {}}, "not a table it keeps: colours")):
        assert ws.store.write_shared_tables(doc)
        result = teamctl(ws.root, "config")
        lines = result.stderr.decode().splitlines()
        assert result.returncode == 2 and len(lines) == 1, result
        assert says in lines[0] and pg_url in lines[0], lines
        assert ws.store.read_shared_tables() == doc  # nothing changed


def test_with_files_each_root_keeps_its_own_tables(tmp_path: Path) -> None:
    first, second = Workspace.at(tmp_path / "first"), Workspace.at(tmp_path / "second")
    first.root.mkdir()
    first.settings_file.write_text(settings_text("files", "bash(echo one*)", 2.0))
    assert json.loads(ctl(first, "init", "--store", "files", "--json"))["shared"] is None
    assert json.loads(ctl(second, "init", "--store", "files", "--json"))["shared"] is None
    mine, theirs = config(first), config(second)
    assert mine["permissions"] == {"value": {"default": "allow", "allow": [], "ask": [],
                                             "deny": ["bash(echo one*)"]}, "source": "file"}
    assert mine["prices"] == {"value": {MODEL: {"input": 2, "output": 10, "cache_write_5m": 2.5,
                                                "cache_write_1h": 4, "cache_read": 0.2}},
                              "source": "file"}
    # `teamctl init` wrote the second root's tables: empty, its own
    assert theirs["permissions"]["value"]["deny"] == []
    assert theirs["permissions"]["source"] == theirs["prices"]["source"] == "file"
    assert theirs["prices"]["value"] == {}
    assert "store: " not in ctl(first, "config")
