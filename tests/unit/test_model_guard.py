"""The member's guard on its model calls (`model.make_client(guard=…)`, CONTRACT §15): it
runs at each write of a request's bytes to the socket, so a guard that refuses — the
host's lease lost — stops the request before a byte of it reaches the model, and a
process stopped anywhere before that write checks again once it runs. Real HTTP to the
scripted server."""

from __future__ import annotations

import pytest

from teamd.agent import model
from teamd.scripted import ScriptedServer
from teamd.store.errors import LeaseLost

PARAMS = {"model": "claude-sonnet-4-5", "max_tokens": 16,
          "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def env(server: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-real-key")


def test_the_guard_runs_at_each_write_and_a_refusal_sends_nothing(
        env: None, server: ScriptedServer) -> None:
    calls: list[int] = []
    refuse = False

    def guard() -> None:
        calls.append(1)
        if refuse:
            raise LeaseLost("host h1 lost its lease")

    client = model.make_client(30, guard=guard)
    model.call(client, **PARAMS)
    assert len(server.requests) == 1 and len(calls) >= 2  # headers and body: each guarded
    first = len(calls)
    refuse = True
    with pytest.raises(LeaseLost):
        model.call(client, **PARAMS)  # the same connection, kept alive: guarded too
    assert len(server.requests) == 1 and len(calls) == first + 1
