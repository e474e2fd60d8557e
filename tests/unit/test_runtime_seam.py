"""The runtime seam (teamd.agent.runtime): a member drives any agent that implements
`Runtime`, and does what every member does around it — its inbox taken in exactly once,
a shutdown left unanswered approved for it — with none of the built-in loop's code. The
agent here is a real one of a kind: it records what it was given and ends its turn."""

from __future__ import annotations

import signal
from typing import Any

import psutil
import pytest

from teamd import actions, events, inbox, requests, roster
from teamd.agent.member import Member
from teamd.agent.runtime import Runtime, TurnOutcome
from teamd.files import Json
from teamd.layout import Workspace
from teamd.proc import EXIT_SHUTDOWN
from tests.harness import make_team, member

TEAM = "crew"


@pytest.fixture
def team(ws: Workspace) -> Workspace:
    make_team(ws, None, "alice", team=TEAM, prompt="work")
    return ws


class Recorder:
    """A runtime that takes the inbox in at each turn and ends the turn at once."""

    def __init__(self, m: Member) -> None:
        self.m = m
        self.turns: list[list[Json]] = []
        self.started = self.stopped = False

    def opening(self) -> str:
        return self.m.prompt

    def start(self) -> int | None:
        self.started = True
        return None

    def awaits_input(self) -> bool:
        return bool(self.turns)

    def take_turn(self) -> TurnOutcome:
        self.turns.append(self.m.take_in())
        return TurnOutcome(ended=True)

    def stop(self) -> None:
        self.stopped = True


def test_a_member_drives_any_runtime_through_the_seam(team: Workspace) -> None:
    me = psutil.Process()

    def as_if_forked(config: dict[str, Any]) -> None:  # what teamd records at a fork
        roster.get(config, "alice").update(pid=me.pid, pid_create_time=me.create_time(),
                                           status="starting")

    roster.update(team, TEAM, as_if_forked)
    hello = actions.send(team, TEAM, "alice", "hello")
    asked = actions.shutdown(team, TEAM, "alice", reason="done")
    assert not asked["answered"]  # alice is live: the request waits in her inbox
    rid = asked["request"]["request_id"]

    alice = Member(team, TEAM, "alice")
    agent = Recorder(alice)
    runtime: Runtime = agent  # it is one, as far as the type checker goes
    alice.runtime = runtime
    before = signal.getsignal(signal.SIGTERM)
    try:
        assert alice.run() == EXIT_SHUTDOWN
    finally:
        signal.signal(signal.SIGTERM, before)
        signal.set_wakeup_fd(-1)

    # one turn, given both messages in one batch; the agent ended it without answering,
    # and was stopped as the member left (a runtime's process goes with the member)
    assert agent.started and agent.stopped
    assert [[m["id"] for m in batch] for batch in agent.turns] == [
        [hello["id"], asked["message"]["id"]]]
    assert inbox.peek(team, TEAM, "alice") == []
    # recorded in the session exactly once, before the inbox was cut
    taken = [m["id"] for r in alice.session.records if r["type"] == "inbox"
             for m in r["messages"]]
    assert taken == [hello["id"], asked["message"]["id"]]
    # the member approved the shutdown for it, and says so to whoever asked
    record = requests.get(team, TEAM, rid)
    assert (record["status"], record["answer_reason"]) == (
        "approved", "ended its turn without answering")
    m = member(team, TEAM, "alice")
    assert (m["desired"], m["status"]) == ("stopped", "stopping")
    moved = [(e["from"], e["to"]) for e in events.read(team, TEAM, "alice")
             if e["event"] == "status"]
    assert moved == [("starting", "stopping")]
