"""The first hour without an API key (issue 19, CONTRACT §9, §10): `spawn` says in one line
that nothing reaches Claude and what to run instead; `teamd.json` records whether the
running teamd has a key (never the key), and `status` says when it has none; a member with
no key and no `ANTHROPIC_BASE_URL` makes no call that could only fail — its `last_error`
says no key is set, once, instead of retrying a name lookup for ever.

Real `teamd`, real forked member, the real `teamctl` console script; no model server at
all (nothing may be sent anywhere)."""

from __future__ import annotations

import json

from teamd import actions, files
from teamd.layout import Workspace
from tests.harness import Teamd, events_of, lead_inbox, member, wait_status, wait_until
from tests.helpers_proc import clean_env, teamctl, teamctl_text

TEAM = "crew"
NO_KEY = "no ANTHROPIC_API_KEY is set for teamd, so nothing reaches Claude"


def test_without_a_key_spawn_and_status_say_so_and_the_member_does_not_retry(
        ws: Workspace) -> None:
    env = {**clean_env(), "PYTHONUNBUFFERED": "1"}  # no key, no base URL
    actions.create_team(ws, TEAM)
    # no supervisor yet: this shell has no key
    done = teamctl_text(ws.root, "spawn", TEAM, "early", "--prompt", "p")
    warned = [line for line in done.stderr.splitlines() if "ANTHROPIC_API_KEY" in line]
    assert done.returncode == 0 and len(warned) == 1, done.stderr
    assert warned[0].startswith("warning: no ANTHROPIC_API_KEY is set in this shell")
    assert "nothing reaches Claude" in warned[0]
    assert "python -m teamd.scripted --scenario walkthrough" in warned[0]
    actions.remove_member(ws, TEAM, "early")

    daemon = Teamd(ws, env)
    try:
        record = files.read_json(ws.store.paths.supervisor_info)
        assert record is not None and record["api_key_set"] is False
        # the running teamd has no key: that is what spawn says, whatever this shell has
        done = teamctl(ws.root, "spawn", TEAM, "alice", "--prompt", "Say hello.",
                       env={**env, "ANTHROPIC_API_KEY": "only-in-this-shell"})
        assert done.returncode == 0
        warned = [line for line in done.stderr.decode().splitlines()
                  if "reaches Claude" in line]
        assert warned == [f"warning: the running teamd (pid {daemon.pid}) has no "
                          "API key: nothing reaches Claude; to run offline, point "
                          "teamd at the scripted model instead (ANTHROPIC_BASE_URL; `python "
                          "-m teamd.scripted --scenario walkthrough`, see the README's "
                          "\"Using it\")"]
        # the member says why it makes no call, and waits for its next message
        wait_until(lambda: NO_KEY in (member(ws, TEAM, "alice")["last_error"] or ""), 30,
                   "alice's last_error to say no key is set")
        wait_status(ws, "alice", "idle")
        calls = events_of(ws, "alice", "model_call")
        assert len(calls) == 1 and NO_KEY in calls[0]["error"]  # the fault: no key, no call
        told = wait_until(lambda: [m for m in lead_inbox(ws) if NO_KEY in m["content"]], 20,
                          "the lead to be told once")
        assert len(told) == 1
        # not retried: only a new message makes it try again (and be refused again)
        actions.send(ws, TEAM, "alice", "Try again.")
        wait_until(lambda: len(events_of(ws, "alice", "model_call")) == 2, 20,
                   "the second call, for the new message")
        assert member(ws, TEAM, "alice")["status"] == "idle"
        assert len([m for m in lead_inbox(ws) if NO_KEY in m["content"]]) == 1
        # status says so, above the table; --json has the field
        shown = teamctl_text(ws.root, "status")
        assert shown.returncode == 0
        lines = shown.stdout.splitlines()
        assert lines[0].startswith(f"supervisor: pid {daemon.pid}")
        assert lines[1].startswith(f"warning: the running teamd (pid {daemon.pid}) has no "
                                   "API key: nothing reaches Claude")
        doc = json.loads(teamctl_text(ws.root, "status", "--json").stdout)
        assert doc["supervisor"]["api_key_set"] is False
    finally:
        daemon.stop()
