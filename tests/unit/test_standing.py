"""A member's own status writes (`teamd.agent.standing`, CONTRACT §4): once it has approved
its shutdown (`stopping`), nothing it does on the way out writes another status — a Claude
Code member's forwarder, in its own thread, may still refuse a last call at a budget."""

from __future__ import annotations

from pathlib import Path

from teamd import actions
from teamd.agent.forwarder import Forwarder
from teamd.agent.loop import Member
from teamd.layout import Workspace
from teamd.states import Status
from tests.harness import TEAM, make_live, make_team, member


def test_a_member_leaving_writes_no_other_status(ws: Workspace, workdir: Path) -> None:
    make_team(ws, workdir, "coder")
    make_live(ws, TEAM, "coder", status="active")
    actions.set_budget(ws, TEAM, "0.01", member="coder")
    fwd = Forwarder(Member(ws, TEAM, "coder"), upstream="http://127.0.0.1:9")
    fwd.m.standing.update(status=Status.STOPPING)
    # spent: a call the forwarder is asked for now is refused, as at any budget reached
    fwd.m.standing.update(usage_add={"input_tokens": 1}, cost_add=1.0)
    assert fwd.held() is not None
    left = member(ws, TEAM, "coder")
    assert left["status"] == "stopping"  # not moved back to `paused`
    assert left["last_error"].startswith("member budget reached")
    # before it leaves, the same refusal pauses it
    fwd.m.standing.status = Status.ACTIVE
    make_live(ws, TEAM, "coder", status="active")
    assert fwd.held() is not None and member(ws, TEAM, "coder")["status"] == "paused"
