"""Thinking kept byte for byte, end to end (issue 20; CONTRACT.md section 6, "Today's
models"): a real `teamd run`, the real SDK over HTTP to the scripted server — which refuses
with a 400, as the API does, a tool loop whose thinking was dropped or altered — through a
tool loop with thinking before every call, a kill -9 in the middle of it, a compaction in
the middle of it, and a kill -9 during the call after that compaction (resumed from the
compaction record). `attach` and `transcript` show the thinking, dimmed."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from teamd import actions, events, files
from teamd.agent import context
from teamd.agent.session import INTERRUPTED
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests import harness
from tests.harness import TEAM, attached, live_pid, procs_with, running_teamd, tool_use, wait_until
from tests.helpers_proc import TEAMCTL, clean_env, teamctl

T = 30.0
wait_status = partial(harness.wait_status, timeout=T)
BIG = {"input_tokens": 100, "cache_read_input_tokens": 30000, "cache_creation_input_tokens": 30000}


def step(thought: str, command: str, **reply: Any) -> dict[str, Any]:
    return {"thinking": thought, "content": [tool_use("bash", command=command)], **reply}


def thoughts(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The thinking blocks of a request's assistant turns, in order."""
    return [b for m in messages if m["role"] == "assistant" for b in m["content"]
            if b.get("type") in ("thinking", "redacted_thinking")]


def kill(ws: Workspace, name: str) -> None:
    pid = live_pid(ws, TEAM, name)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: (live_pid(ws, TEAM, name) or pid) != pid, T, f"a new {name}")


def in_a_terminal(ws: Workspace, *env: tuple[str, str]) -> str:
    """`teamctl transcript` run on a terminal (a pty): what a person sees, colours included."""
    main, sub = pty.openpty()
    proc = subprocess.Popen([str(TEAMCTL), "--root", str(ws.root), "transcript", TEAM, "alice"],
                            stdout=sub, stderr=subprocess.PIPE, env={**clean_env(), **dict(env)})
    os.close(sub)
    out = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # EIO: the other end is closed
            break
        if not chunk:
            break
        out += chunk
    os.close(main)
    assert proc.wait(T) == 0
    return out.decode()


@pytest.mark.timeout(180)
def test_thinking_survives_a_tool_loop_a_kill_a_compaction_and_a_resume(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    # first, so the summary request (appended to the last results) finds it
    server.add_rule({"agent": "alice", "contains": "Your context is nearly full",
                     "reply": {"thinking": "THINK-S what matters", "content": "SUMMARY-t1"}})
    server.add_rule({"agent": "alice", "contains": "LOOP-t1",
                     "reply": step("THINK-1 list first", "echo ONE-t1")})
    server.add_rule({"agent": "alice", "contains": "ONE-t1",
                     "reply": step("THINK-2 then wait", "sleep 60; echo TWO-t1")})
    server.add_rule({"agent": "alice", "contains": INTERRUPTED,
                     "reply": step("THINK-3 again, quicker", "echo THREE-t1", usage=BIG)})
    server.add_rule({"name": "slow", "agent": "alice", "contains": "THREE-t1", "times": 1,
                     "delay": 60, "reply": {"content": "never sent"}})
    server.add_rule({"agent": "alice", "contains": "THREE-t1",
                     "reply": {"thinking": "THINK-4 all done", "content": "LOOP-DONE-t1"}})
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "alice", "Wait for work from the lead.", cwd=str(workdir))
    with running_teamd(ws, server.url, compact_threshold=50000, backoff_initial=0.1):
        out = attached(ws, "alice")
        wait_status(ws, "alice", "idle")
        actions.send(ws, TEAM, "alice", "LOOP-t1 look around")
        # kill -9 in the middle of the tool loop, while its second call runs
        wait_until(lambda: procs_with("TWO-t1"), T, "the slow bash call to run")
        kill(ws, "alice")
        # resumed: the interrupted call answered, the loop goes on; a compaction in the
        # middle of it, then a kill -9 during the call that follows the compaction
        slow = server.wait_for(lambda r: r["rule"] == "slow", T)
        kill(ws, "alice")
        out.wait_for("alice: LOOP-DONE-t1")
        wait_status(ws, "alice", "idle")
        for thought in ("THINK-1 list first", "THINK-2 then wait", "THINK-3 again, quicker",
                        "THINK-4 all done"):
            out.wait_for(f"(thinking) {thought}")
        out.proc.kill()

    requests = [r for r in server.requests if r["agent"] == "alice"]
    # the server, which refuses dropped or altered thinking, accepted every request
    assert [r["status"] for r in requests] == [200] * len(requests)
    # readable thinking asked for on every call, the summary call included; nothing the
    # current models refuse
    for r in requests:
        body = r["body"]
        assert body["thinking"] == context.THINKING
        assert not {"temperature", "top_p", "top_k"} & set(body)
        assert body.get("tool_choice", {"type": "auto"})["type"] in ("auto", "none")
    summary = next(r for r in requests if "Your context is nearly full" in r["last_user_text"])
    assert summary["body"]["tool_choice"] == {"type": "none"}

    # the compaction summarised what came before the loop and carried the loop over whole
    replies = {b["thinking"]: b for r in requests for b in r["reply"] or []
               if b["type"] == "thinking"}
    after = [r for r in requests if r["n"] > summary["n"]]
    assert after and after[0]["body"] == slow["body"]  # the resumed call: the same request
    messages = after[-1]["body"]["messages"]
    assert "SUMMARY-t1" in harness.turn_text(messages[0]) and \
        "LOOP-t1 look around" in harness.turn_text(messages[0])
    assert "Nothing to do." not in str(messages)  # the turn before the loop: summarised
    # every reply of the loop sent back with its thinking exactly as the server sent it
    kept = thoughts(messages)
    assert kept == [replies[t] for t in ("THINK-1 list first", "THINK-2 then wait",
                                         "THINK-3 again, quicker")]
    assert [b["name"] for m in messages if m["role"] == "assistant" for b in m["content"]
            if b["type"] == "tool_use"] == ["bash"] * 3
    # the session keeps them byte for byte too, and the journal says what happened
    session = files.read_jsonl(ws.store.paths.session(TEAM, "alice")).records
    assert session[-1]["content"][0] == replies["THINK-4 all done"]
    journal = list(events.stream(ws, TEAM))
    assert [e for e in journal if e["event"] == "compacted"]
    calls = [e for e in journal if e["event"] == "model_call" and e.get("error") is None]
    assert {"THINK-4 all done", "THINK-S what matters"} <= {c.get("thinking") for c in calls}
    assert all(c["stop_reason"] in ("tool_use", "end_turn") for c in calls)

    # transcript on a terminal: the thinking dimmed, apart from what alice says; NO_COLOR:
    # no escape code at all
    shown = in_a_terminal(ws)
    assert "\x1b[2m(thinking) THINK-1 list first\x1b[0m" in shown
    said = next(line for line in shown.splitlines() if "LOOP-DONE-t1" in line)
    assert "\x1b[2m" not in said.split("alice")[1]  # what alice says is not dimmed
    plain = in_a_terminal(ws, ("NO_COLOR", "1"))
    assert "\x1b" not in plain and "(thinking) THINK-2 then wait" in plain
    # logs -v: each model call with what the model thought
    logged = teamctl(ws.root, "logs", TEAM, "alice", "-v", env=clean_env())
    assert logged.returncode == 0 and b"(thinking) THINK-4 all done" in logged.stdout
    assert b"(thinking)" not in teamctl(ws.root, "logs", TEAM, "alice", env=clean_env()).stdout


def test_effort_is_sent_when_set_for_the_member_or_by_the_setting(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "alice", "Wait for work.", cwd=str(workdir), effort="low")
    actions.spawn(ws, TEAM, "bob", "Wait for work.", cwd=str(workdir))
    assert harness.member(ws, TEAM, "alice")["effort"] == "low"
    with running_teamd(ws, server.url, effort="max", max_tokens=200_000) as daemon:
        wait_status(ws, "alice", "idle")
        wait_status(ws, "bob", "idle")
        warned = [line for line in daemon.output().splitlines()
                  if "max_tokens 200000 is above the output limit" in line]
    sent = {r["agent"]: r["body"] for r in server.requests}
    assert sent["alice"]["output_config"] == {"effort": "low"}
    assert sent["bob"]["output_config"] == {"effort": "max"}
    # capped at the 5.x models' output limit, said in one line when teamd started
    assert sent["alice"]["max_tokens"] == sent["bob"]["max_tokens"] == 128_000
    assert len(warned) == 1, warned
