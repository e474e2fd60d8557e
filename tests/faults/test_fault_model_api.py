"""Model API faults (CONTRACT §12 "Retries and the shared back-off"): no crash loop, no busy
retry (the requests are counted against the back-off they should follow), statuses truthful
while it waits, and the work resumes, each message shown once.

Also proven elsewhere: a 429/529 burst with `retry-after` and the root backing off together
(tests/e2e/test_api_retries.py: test_a_burst_of_429_and_529_is_retried_by_the_harness,
test_a_second_member_does_not_send_while_the_root_is_rate_limited), a `retry-after` of an
hour capped at `retry_max_wait` (…_waits_retry_max_wait_in_the_open_and_a_shutdown_ends_it),
a response that never ends (test_a_response_that_never_ends_is_cut_after_api_timeout), an
invalid JSON body and a 400 not retried, the lead told once
(test_unmendable_answers_are_not_retried_and_the_lead_is_told_once)."""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

from teamd import inbox
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.faults.faultkit import (
    TEAM,
    Mail,
    T,
    assert_no_strays,
    assert_shown_once,
    assert_statuses_true,
    figure,
    idle,
)
from tests.harness import (
    Teamd,
    lead_says,
    live_pid,
    make_team,
    member,
    running_teamd,
    send_to_lead,
    wait_until,
)

SLACK = 0.05  # clock granularity between the member's wait and the server's stamp


def tries(server: ScriptedServer, agent: str, token: str) -> list[dict[str, Any]]:
    return [r for r in server.requests if r["agent"] == agent and token in r["last_user_text"]]


def gaps(records: list[dict[str, Any]]) -> list[float]:
    return [b["received_at"] - a["received_at"] for a, b in itertools.pairwise(records)]


def unharmed(ws: Workspace, daemon: Teamd, pids: dict[str, int | None], tmp_path: Path) -> None:
    for name, pid in pids.items():
        m = member(ws, TEAM, name)
        assert live_pid(ws, TEAM, name) == pid and m["restarts"] == 0, name
        assert m["last_error"] is None, m["last_error"]
    assert_statuses_true(ws, daemon)
    assert_no_strays(tmp_path, daemon)


def test_a_burst_of_500_429_529_follows_the_back_off(
        ws: Workspace, server: ScriptedServer, workdir: Path, tmp_path: Path) -> None:
    burst = [{"status": 500}, {"status": 429, "retry_after": 1}, {"status": 529},
             {"status": 500}]
    for error in burst:
        server.add_rule({"agent": "alice", "contains": "BURST", "times": 1, "error": error})
    server.add_rule({"agent": "alice", "contains": "BURST", "reply": send_to_lead("THROUGH")})
    make_team(ws, workdir, "alice")
    mail = Mail(ws)
    with running_teamd(ws, server.url, retry_max_wait=2) as daemon:
        idle(ws, "alice")
        pids = {"alice": live_pid(ws, TEAM, "alice")}
        sent = mail.send("alice", "BURST are you there?")
        server.wait_for(lambda r: r["agent"] == "alice" and r["status"] == 500, T)
        # while it waits the roster says so, and it is what it says: live and at work
        wait_until(lambda: "500 api, retrying at" in str(member(ws, TEAM, "alice")["last_error"]),
                   T, "the wait in last_error")
        assert member(ws, TEAM, "alice")["status"] == "active"
        wait_until(lambda: lead_says(ws, "THROUGH"), T, "the answer after the burst")
        idle(ws, "alice")
        unharmed(ws, daemon, pids, tmp_path)
        assert_shown_once(ws, server, mail.sent)
    got = tries(server, "alice", sent.token)
    assert [r["status"] for r in got] == [500, 429, 529, 500, 200]  # not one more
    # 1 s after the first 500, the 429's retry-after (1 s), then doubling capped at 2 s
    expected = [1, 1, 2, 2]
    measured = gaps(got)
    figure("requests for a burst of 4 errors", f"{len(got)}, gaps "
           f"{[round(g, 2) for g in measured]} s (expected at least {expected})")
    assert all(g >= e - SLACK for g, e in zip(measured, expected, strict=True)), measured
    assert len(lead_says(ws, "THROUGH")) == 1


def test_an_outage_longer_than_several_retries(
        ws: Workspace, server: ScriptedServer, workdir: Path, tmp_path: Path) -> None:
    """The 30 s outage of the issue, scaled down (8 s, `retry_max_wait` 2 s): the same shape,
    an outage that outlasts several retries of every member."""
    outage = 8.0
    down = server.add_rule({"error": {"status": 529}}, first=True)
    server.add_rule({"agent": "alice", "contains": "OUT-A", "reply": send_to_lead("A-BACK")})
    server.add_rule({"agent": "bob", "contains": "OUT-B", "reply": send_to_lead("B-BACK")})
    make_team(ws, workdir, "alice", "bob")
    mail = Mail(ws)
    with running_teamd(ws, server.url, retry_max_wait=2) as daemon:
        # the first prompt of each already meets the outage: they wait from the start
        start = time.time()
        server.wait_for(lambda r: r["agent"] == "bob", T)
        for name in ("alice", "bob"):
            wait_until(lambda n=name: "529 overloaded" in str(member(ws, TEAM, n)["last_error"])
                       or "rate limited" in str(member(ws, TEAM, n)["last_error"]), T,
                       f"{name} to say why it waits")
        a, b = mail.send("alice", "OUT-A still there?"), mail.send("bob", "OUT-B and you?")
        pids = {n: live_pid(ws, TEAM, n) for n in ("alice", "bob")}
        assert all(pids.values())
        wait_until(lambda: time.time() >= start + outage, T, "the outage to pass",
                   interval=0.1)
        assert_statuses_true(ws, daemon)  # live and `active` (waiting to retry) all along
        down.times = 0  # the API is back
        ended = time.time()
        wait_until(lambda: lead_says(ws, "A-BACK") and lead_says(ws, "B-BACK"), T,
                   "both answers once the API is back")
        idle(ws, "alice")
        idle(ws, "bob")
        unharmed(ws, daemon, pids, tmp_path)
        assert_shown_once(ws, server, mail.sent)
    failed = {n: [r for r in server.requests if r["agent"] == n and r["status"] == 529]
              for n in ("alice", "bob")}
    span = ended - start
    figure("outage", f"{span:.1f} s; failed requests alice {len(failed['alice'])}, "
           f"bob {len(failed['bob'])}")
    for name, got in failed.items():
        # several retries each, and no busy retry: at most one try per second of the
        # outage (the first wait is 1 s, then 2 s), plus the first
        assert 3 <= len(got) <= span / 1.0 + 2, (name, len(got))
        assert all(g >= 1 - SLACK for g in gaps(got)), (name, gaps(got))
    told = [m for m in inbox.peek(ws, TEAM, "lead") if "cannot reach the model" in m["content"]]
    assert len({m["sender"] for m in told}) == len(told)  # each told the lead at most once
    assert len(lead_says(ws, "A-BACK")) == 1 and len(lead_says(ws, "B-BACK")) == 1
    assert a.token and b.token


def test_a_reply_cut_mid_stream_is_retried(ws: Workspace, server: ScriptedServer,
                                           workdir: Path, tmp_path: Path) -> None:
    server.add_rule({"agent": "alice", "contains": "CUT", "times": 2, "cut": True,
                     "reply": send_to_lead("HALF-A-REPLY")})
    server.add_rule({"agent": "alice", "contains": "CUT", "reply": send_to_lead("WHOLE")})
    make_team(ws, workdir, "alice")
    mail = Mail(ws)
    with running_teamd(ws, server.url) as daemon:
        idle(ws, "alice")
        pids = {"alice": live_pid(ws, TEAM, "alice")}
        sent = mail.send("alice", "CUT speak up")
        wait_until(lambda: lead_says(ws, "WHOLE"), T, "the whole reply")
        idle(ws, "alice")
        unharmed(ws, daemon, pids, tmp_path)
        assert_shown_once(ws, server, mail.sent)
    got = tries(server, "alice", sent.token)
    figure("requests for 2 cut replies", f"{len(got)}, gaps {[round(g, 2) for g in gaps(got)]}")
    assert len(got) == 3 and all(g >= e - SLACK for g, e in zip(gaps(got), [1, 2],
                                                                 strict=True))
    assert len(lead_says(ws, "HALF-A-REPLY")) == 0 and len(lead_says(ws, "WHOLE")) == 1
