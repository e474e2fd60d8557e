"""One bad file hides no team (issue 19, CONTRACT §9): with one team's `config.json`
corrupted by hand, `teamctl status` shows every other team and one line for the broken
one, then exits 1; `teamctl logs` still reads that team's journal. The real console
script; the file is left as it was (nothing repairs a person's file behind their back)."""

from __future__ import annotations

import json

from teamd import actions
from teamd.layout import Workspace
from tests.harness import make_team
from tests.helpers_proc import teamctl_text

BROKEN = b'{"schema": 2, "name": "beta", "members": [{"name": "x", '


def test_status_shows_the_other_teams_and_one_line_for_the_broken_one(
        ws: Workspace) -> None:
    make_team(ws, None, "alice", team="alpha")
    make_team(ws, None, "bob", team="beta")
    make_team(ws, None, "carol", team="gamma")
    actions.send(ws, "beta", "bob", "before the hand edit")
    ws.store.paths.config("beta").write_bytes(BROKEN)  # the fault: a roster that does not parse

    done = teamctl_text(ws.root, "status")
    assert done.returncode == 1, done.stderr
    out = done.stdout
    for team, name in (("alpha", "alice"), ("gamma", "carol")):
        assert f"team {team} (active)" in out and f"\n{name} " in out
    broken = [line for line in out.splitlines() if "beta" in line]
    assert len(broken) == 1, out
    assert broken[0].startswith("team beta: cannot be read: ")
    assert str(ws.store.paths.config("beta")) in broken[0] and "not valid JSON" in broken[0]
    assert "bob" not in out

    as_json = teamctl_text(ws.root, "status", "--json")
    assert as_json.returncode == 1
    doc = json.loads(as_json.stdout)
    assert [t["name"] for t in doc["teams"]] == ["alpha", "gamma"]
    assert [u["name"] for u in doc["unreadable"]] == ["beta"]
    # one team asked for by name: that team's error, as before
    one = teamctl_text(ws.root, "status", "beta")
    assert one.returncode == 1 and "not valid JSON" in one.stderr
    assert teamctl_text(ws.root, "status", "alpha").returncode == 0
    assert ws.store.paths.config("beta").read_bytes() == BROKEN  # left for a person to repair


def test_logs_reads_the_journal_of_a_team_whose_roster_is_unreadable(
        ws: Workspace) -> None:
    make_team(ws, None, "bob", team="beta")
    actions.send(ws, "beta", "bob", "before the hand edit")
    ws.store.paths.config("beta").write_bytes(BROKEN)

    done = teamctl_text(ws.root, "logs", "beta")
    assert done.returncode == 0, done.stderr
    assert "team_created" in done.stdout and "before the hand edit" in done.stdout
    notes = done.stderr.splitlines()
    assert len(notes) == 1 and notes[0].startswith("note: the roster of team beta cannot be "
                                                   "read (")
    # names cannot be checked against the roster: they filter all the same
    only = teamctl_text(ws.root, "logs", "beta", "bob", "--json")
    assert only.returncode == 0
    records = [json.loads(line) for line in only.stdout.splitlines()]
    assert records and all(r.get("member") == "bob" or r["event"] == "message"
                           for r in records)
    assert teamctl_text(ws.root, "logs", "nosuch").returncode == 2  # unknown is still unknown


WRONG_SHAPES = [
    b'{"schema": 2, "name": "beta", "state": "active", "members": 5}',
    b'{"schema": 2, "name": "beta", "state": "active", "members": [{"role": "no name"}]}',
    b'{"schema": 2, "name": "beta", "members": [{"name": "bob"}]}',  # no state
    b'{"schema": 2, "name": "beta", "state": "active", "members": [{"name": "\\u001b[2J"}]}',
    b'[1, 2, 3]',
]


def test_a_roster_that_parses_but_is_no_roster_is_one_line_too(ws: Workspace) -> None:
    """Valid JSON of the wrong shape (members not a list, a member with no or a bad name,
    no state, not an object) is refused in one line naming the file — never a traceback,
    never a team silently left out — by status, status --json and logs."""
    make_team(ws, None, "alice", team="alpha")
    make_team(ws, None, "bob", team="beta")
    for shape in WRONG_SHAPES:
        ws.store.paths.config("beta").write_bytes(shape)
        done = teamctl_text(ws.root, "status")
        assert done.returncode == 1 and "Traceback" not in done.stderr, (shape, done.stderr)
        broken = [line for line in done.stdout.splitlines() if "beta" in line]
        assert len(broken) == 1 and str(ws.store.paths.config("beta")) in broken[0], (
            shape,
            done.stdout,
        )
        assert broken[0].startswith("team beta: cannot be read: "), (shape, broken)
        assert "team alpha (active)" in done.stdout
        doc = json.loads(teamctl_text(ws.root, "status", "--json").stdout)
        assert [u["name"] for u in doc["unreadable"]] == ["beta"], shape
        logs = teamctl_text(ws.root, "logs", "beta")
        assert logs.returncode == 0 and "team_created" in logs.stdout, (shape, logs.stderr)
        every = teamctl_text(ws.root, "logs")
        assert every.returncode == 0 and "Traceback" not in every.stderr, (shape, every.stderr)
