"""Spend and budgets, the quiet lead's rule, and what the scripted server learnt for
them (CONTRACT.md sections 4, 10 and 12): the parts on their own, against hand-computed
values. The end-to-end behaviour is in test_cost_e2e.py."""

from __future__ import annotations

import json
import stat
import time
import urllib.request
from typing import Any

import pytest

from teamd import actions, budget, files, policy, roster, settings
from teamd.agent import retry_advice
from teamd.errors import BadInput
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import wait_until


# -- settings (the price table's arithmetic is in test_prices.py) ---------------------------
@pytest.mark.parametrize("text, says", [
    ('[prices]\n"m" = 3\n', "must be a table like"),
    ('[prices]\n"m" = {input = 3}\n', "needs output"),
    ('[prices]\n"m" = {input = -1, output = 2}\n', "input must be a number >= 0"),
    ('[prices]\n"m" = {input = "3", output = 2}\n', "input must be a number >= 0"),
    ('[prices]\n"m" = {input = 3, output = 2, cache_read = -0.1}\n', "cache_read must be"),
    ('[prices]\n"m" = {input = 3, output = 2, cache_write = 1}\n', "unknown key 'cache_write'"),
    ('[prices]\n"m" = {input = 3, output = 2, checked = "2026-11-26"}\n', "unknown key"),
    ('[prices]\n"m" = {input = 3, output = 2, long = 5}\n', "long must be a table"),
    ('[prices]\n"m" = {input = 3, output = 2, long = {input = 6, output = 4}}\n',
     "long needs threshold"),
    ('[prices]\n"m" = {input = 3, output = 2, long = {threshold = 1.5, input = 6, '
     'output = 4}}\n', "whole number"),
    ('prices = 3\n', "[prices] must be a table"),
    ('cache_ttl = "2h"\n', "cache_ttl must be one of auto, 5m, 1h"),
    ('lead_wake_on_idle = "quite"\n', "did you mean 'quiet'"),
    ('max_concurrent_calls = -1\n', "must not be negative"),
    ('max_concurrent_calls = 1.5\n', "max_concurrent_calls must be a number"),
])
def test_bad_settings_are_refused_naming_them(ws: Workspace, text: str, says: str) -> None:
    ws.settings_file.write_text(text)
    with pytest.raises(BadInput) as caught:
        settings.load(ws)
    assert says in str(caught.value) and str(ws.settings_file) in str(caught.value)


def test_the_new_settings_come_from_the_environment_too(ws: Workspace) -> None:
    conf = settings.load(ws, {"TEAMD_MAX_CONCURRENT_CALLS": "3",
                              "TEAMD_LEAD_WAKE_ON_IDLE": "each"})
    assert (conf.max_concurrent_calls, conf.lead_wake_on_idle) == (3, "each")
    with pytest.raises(BadInput, match="TEAMD_LEAD_WAKE_ON_IDLE"):
        settings.load(ws, {"TEAMD_LEAD_WAKE_ON_IDLE": "never"})


# -- spend and budgets -----------------------------------------------------------------------
def test_a_team_starts_with_its_spend_and_adds_to_it_under_its_lock(ws: Workspace) -> None:
    actions.create_team(ws, "t", budget_usd=20)
    path = ws.store.paths.spend(team="t")
    assert files.read_json(path) == {"schema": 1, "spent_usd": 0.0}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert roster.load(ws, "t")["budget_usd"] == 20.0
    assert budget.charge(ws, "t", 0.1005) == pytest.approx(0.1005)
    assert budget.charge(ws, "t", 0.2) == pytest.approx(0.3005)
    assert budget.spent(ws, "t") == pytest.approx(0.3005)
    path.write_text("{not json")  # a bad file is counted from 0, never fatal
    assert budget.spent(ws, "t") == 0.0


def test_budgets_are_set_and_removed_and_bad_ones_refused(ws: Workspace) -> None:
    actions.create_team(ws, "t")
    actions.spawn(ws, "t", "alice", "work", budget_usd=0.05)
    assert roster.get(roster.load(ws, "t"), "alice")["budget_usd"] == 0.05
    assert actions.set_budget(ws, "t", "2.5", member="alice")["budget_usd"] == 2.5
    assert actions.set_budget(ws, "t", 0, member="alice")["budget_usd"] is None
    assert roster.get(roster.load(ws, "t"), "alice")["budget_usd"] is None
    assert actions.set_budget(ws, "t", "20")["budget_usd"] == 20.0
    before = ws.store.paths.config("t").read_bytes()
    for bad in ("-1", "nan", "inf", "abc", ""):
        with pytest.raises(BadInput, match="US dollars"):
            actions.set_budget(ws, "t", bad)
    with pytest.raises(BadInput, match="unknown member 'bob'"):
        actions.set_budget(ws, "t", 1, member="bob")
    with pytest.raises(BadInput, match="--budget"):
        actions.create_team(ws, "u", budget_usd=-3)
    assert ws.store.paths.config("t").read_bytes() == before and not ws.store.team_exists("u")


def test_the_member_budget_is_checked_before_the_teams(ws: Workspace) -> None:
    config: dict[str, Any] = {"budget_usd": 20.0, "members": [
        {"name": "alice", "budget_usd": 0.05, "usage": {"cost_usd": 0.0502}},
        {"name": "bob", "budget_usd": None, "usage": {"cost_usd": 3.0}}]}
    got = budget.reached(config, "alice", 1.0)
    assert got == budget.Reached("member", 0.0502, 0.05)
    assert got is not None and got.line() == "member budget reached: $0.05 of $0.05"
    assert budget.reached(config, "bob", 19.99) is None
    team = budget.reached(config, "bob", 20.03)
    assert team is not None and team.line() == "team budget reached: $20.03 of $20.00"
    config["budget_usd"] = None
    assert budget.reached(config, "bob", 1e9) is None


# -- the quiet lead --------------------------------------------------------------------------
def _members(*statuses: str) -> list[dict[str, Any]]:
    return [{"name": f"m{i}", "kind": "teammate", "status": s} for i, s in enumerate(statuses)]


def test_idle_notifications_wake_the_lead_only_when_the_team_is_quiet() -> None:
    idle = [{"type": "idle_notification"}]
    mail = [{"type": "idle_notification"}, {"type": "message"}]
    working = _members("idle", "active")
    live = {"m0", "m1"}
    assert not policy.mail_wakes_lead(idle, working, live, "quiet")
    assert policy.mail_wakes_lead(idle, working, live, "each")
    assert policy.mail_wakes_lead(mail, working, live, "quiet")  # other mail: at once
    assert not policy.mail_wakes_lead([], _members("idle"), live, "each")
    for quiet in (_members("idle", "sleeping"), _members("idle", "paused", "shutdown")):
        assert policy.mail_wakes_lead(idle, quiet, live, "quiet")
    for busy in ("starting", "active", "waiting"):
        assert not policy.mail_wakes_lead(idle, _members("idle", busy), live, "quiet")
    # a status no process stands behind (a crash before teamd noticed) is no work
    assert policy.mail_wakes_lead(idle, working, {"m0"}, "quiet")


# -- the rate-limit headers ------------------------------------------------------------------
def test_a_used_up_family_holds_until_the_latest_reset() -> None:
    headers = {"anthropic-ratelimit-requests-remaining": "7",
               "anthropic-ratelimit-requests-reset": "2030-01-01T00:00:09Z",
               "anthropic-ratelimit-tokens-remaining": "0",
               "anthropic-ratelimit-tokens-reset": "2030-01-01T00:00:05.5Z",
               "anthropic-ratelimit-output-tokens-remaining": "0",
               "anthropic-ratelimit-output-tokens-reset": "2030-01-01T00:00:03+00:00"}
    assert retry_advice.limited_until(headers) == 1893456005.5
    assert retry_advice.limited_until({"anthropic-ratelimit-tokens-remaining": "0"}) is None
    assert retry_advice.limited_until({"anthropic-ratelimit-tokens-remaining": "0",
                                "anthropic-ratelimit-tokens-reset": "soon"}) is None
    assert retry_advice.limited_until({}) is None


def _post(server: ScriptedServer, agent: str = "alice") -> tuple[int, dict[str, str], Any]:
    body = json.dumps({"model": "m", "max_tokens": 10, "system": f"You are teammate "
                       f"'{agent}' in team 't'.", "messages": [
                           {"role": "user", "content": "hi"}]}).encode()
    request = urllib.request.Request(f"{server.url}/v1/messages", data=body,
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, dict(answer.headers), json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read())


def test_the_scripted_server_reports_usage_and_ratelimit_headers() -> None:
    with ScriptedServer({"rules": [
            {"agent": "alice", "times": 1, "reply": {"content": "x", "usage": {
                "input_tokens": 1_000_000, "output_tokens": 5}},
             "ratelimit": {"family": "tokens", "remaining": 0, "reset_in": 2.5},
             "headers": {"x-extra": "yes"}}]}) as server:
        sent = time.time()
        status, headers, reply = _post(server)
        assert status == 200 and reply["usage"]["input_tokens"] == 1_000_000
        assert reply["usage"]["output_tokens"] == 5 and headers["x-extra"] == "yes"
        until = retry_advice.limited_until({k.lower(): v for k, v in headers.items()})
        assert until is not None and sent + 2.5 - 0.1 <= until <= time.time() + 2.5 + 0.1
        status, headers, _ = _post(server)  # the rule is spent: no headers
        assert status == 200 and "anthropic-ratelimit-tokens-remaining" not in {
            k.lower() for k in headers}


def test_a_429_window_answers_everyone_until_it_ends() -> None:
    with ScriptedServer({"rules": [
            {"agent": "alice", "window": 1.0,
             "error": {"status": 429, "retry_after": 1}}]}) as server:
        assert _post(server, "bob")[0] == 200  # not the opener: the window is shut
        opened = time.monotonic()
        status, headers, _ = _post(server, "alice")
        assert status == 429 and headers["retry-after"] == "1"
        assert _post(server, "bob")[0] == 429  # open: every request, whoever sends it
        while time.monotonic() - opened < 1.05:
            time.sleep(0.05)
        assert _post(server, "alice")[0] == 200  # over: the rule is spent
        assert [r["status"] for r in server.requests] == [200, 429, 429, 200]
        wait_until(lambda: server.in_flight == 0, 5, "the last answer to be done")


@pytest.mark.parametrize("rule, says", [
    ({"window": 0, "error": 429}, "window: must be a number of seconds > 0"),
    ({"ratelimit": {"family": "Tokens"}}, "family"),
    ({"ratelimit": {"family": "tokens", "reset": 1}}, "unknown key 'reset'"),
    ({"headers": {"x": 1}}, "headers: must be an object of strings"),
])
def test_the_scripted_server_refuses_bad_new_rule_keys(rule: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        ScriptedServer({"rules": [rule]})
