"""`teamctl attach` and `teamctl transcript` (issue 8): a member's conversation as a person
reads it, followed live through a kill -9 and a compaction — a real `teamd run`, the real SDK
over HTTP to the scripted server, the real console script."""

from __future__ import annotations

import json
import os
import signal
import time
from functools import partial
from pathlib import Path

import pytest

from teamctl.transcript import Renderer, history, render
from teamd import actions, files
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests import harness
from tests.harness import (
    TEAM,
    attached,
    live_pid,
    running_teamd,
    tool_use,
    wait_until,
)
from tests.helpers_proc import clean_env, teamctl

T = 30.0
wait_status = partial(harness.wait_status, timeout=T)


@pytest.mark.timeout(180)
def test_attach_follows_a_member_through_a_kill_and_a_compaction(
        ws: Workspace, server: ScriptedServer, tmp_path: Path) -> None:
    big = {"input_tokens": 100, "cache_read_input_tokens": 30000,
           "cache_creation_input_tokens": 30000}
    server.add_rule({"agent": "alice", "contains": "LOOK-a1", "times": 1, "reply": {"content": [
        {"type": "text", "text": "Let me look around."},
        tool_use("bash", command="echo HELLO-FROM-BASH"),
        tool_use("read_file", path="no-such-file.txt")]}})
    server.add_rule({"agent": "alice", "tool_result": "bash",
                     "reply": {"content": "The shell said hello."}})
    server.add_rule({"agent": "alice", "contains": "AFTER-KILL-a1",
                     "reply": {"content": "Back after the kill."}})
    server.add_rule({"agent": "alice", "contains": "BIG-CTX-a1",
                     "reply": {"content": "Noted.", "usage": big}})
    server.add_rule({"agent": "alice", "contains": "Your context is nearly full",
                     "reply": {"content": "SUMMARY-a1: looked around, survived a kill."}})
    server.add_rule({"agent": "alice", "contains": "AFTER-COMPACT-a1",
                     "reply": {"content": "Still me after compaction."}})
    workdir = tmp_path / "work"
    workdir.mkdir()
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "alice", "Wait for work from the lead.", cwd=str(workdir))
    with running_teamd(ws, server.url, compact_threshold=50000, backoff_initial=0.1):
        out = attached(ws, "alice")
        attach = out.proc
        out.wait_for("» Wait for work from the lead.")  # the first prompt
        wait_status(ws, "alice", "idle")
        actions.send(ws, TEAM, "alice", "LOOK-a1 what is there?")
        out.wait_for("✉ lead → alice: LOOK-a1 what is there?")
        out.wait_for("alice: Let me look around.")
        out.wait_for("⚙ bash: echo HELLO-FROM-BASH")
        out.wait_for("↳ HELLO-FROM-BASH")
        out.wait_for("⚙ read_file: no-such-file.txt")
        out.wait_for("✗ ")  # the failed read, with its reason
        out.wait_for("alice: The shell said hello.")
        wait_status(ws, "alice", "idle")

        pid = live_pid(ws, TEAM, "alice")
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: (live_pid(ws, TEAM, "alice") or pid) != pid, T, "a new alice")
        actions.send(ws, TEAM, "alice", "AFTER-KILL-a1 still there?")
        out.wait_for("alice: Back after the kill.")

        wait_status(ws, "alice", "idle")
        actions.send(ws, TEAM, "alice", "BIG-CTX-a1 remember this")
        out.wait_for("alice: Noted.")
        wait_status(ws, "alice", "idle")
        actions.send(ws, TEAM, "alice", "AFTER-COMPACT-a1 who are you?")
        line = out.wait_for("── compacted at 60100 tokens")
        assert "transcripts/alice-" in line
        out.wait_for("SUMMARY-a1: looked around, survived a kill.")
        out.wait_for("alice: Still me after compaction.")

        # nothing shown twice across the restart and the compaction
        assert sum("alice: The shell said hello." in x for x in out.lines) == 1
        assert sum("LOOK-a1 what is there?" in x for x in out.lines) == 1

        done = teamctl(ws.root, "delete", TEAM, env=clean_env(), timeout=60)
        assert done.returncode == 0, done.stderr
        assert attach.wait(T) == 0
        out.thread.join(T)
        assert out.lines[-1] == f"-- team {TEAM} was deleted --"
        assert attach.stderr is not None and attach.stderr.read() == b""

    # the post-mortem: the archived session still reads as the same conversation
    later = teamctl(ws.root, "transcript", TEAM, "alice", env=clean_env())
    assert later.returncode == 0 and b"was deleted" in later.stderr
    text = later.stdout.decode()
    for want in ("alice: Let me look around.", "⚙ bash: echo HELLO-FROM-BASH",
                 "alice: Back after the kill.", "── compacted", "Still me after compaction."):
        assert want in text
    tail = teamctl(ws.root, "transcript", TEAM, "alice", "-n", "1", env=clean_env())
    # its last record: the request to shut down that ended it
    assert tail.stdout.decode().splitlines() == [
        x for x in text.splitlines() if "[shutdown_request]" in x]


def test_transcript_shows_the_saved_history_when_the_session_starts_compacted(
        ws: Workspace) -> None:
    actions.create_team(ws, TEAM)
    actions.spawn(ws, TEAM, "bob", "work")
    saved = ws.store.paths.transcripts_dir(TEAM) / "bob-20250101T000000.000000.jsonl"
    files.atomic_write_bytes(saved, b"".join(files.dumps_line(t) for t in [
        {"role": "user", "content": [{"type": "text", "text":
                                      '<teammate-message sender="lead" type="message">'
                                      "EARLY-b1</teammate-message>"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "EARLY-REPLY-b1"},
                                          {"type": "tool_use", "id": "t1", "name": "bash",
                                           "input": {"command": "ls"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": "a.txt\nb.txt", "is_error": False}]}]))
    files.append_jsonl(ws.store.paths.session(TEAM, "bob"), [
        {"type": "compaction", "summary": "SUMMARY-b1", "ts": 1.0,
         "transcript": str(saved.relative_to(ws.root)), "carry": []},
        {"type": "assistant", "content": [{"type": "text", "text": "LATE-b1"}], "ts": 2.0}])
    records = history(ws, TEAM, "bob")
    lines = [x for r in records for x in render(Renderer("bob", None), r)]
    text = "\n".join(lines)
    order = ["✉ lead → bob: EARLY-b1", "bob: EARLY-REPLY-b1", "⚙ bash: ls", "↳ a.txt",
             "── compacted", "SUMMARY-b1", "bob: LATE-b1"]
    positions = [text.index(x) for x in order]
    assert positions == sorted(positions), text
    done = teamctl(ws.root, "transcript", TEAM, "bob", env=clean_env())
    assert done.returncode == 0 and "EARLY-REPLY-b1" in done.stdout.decode()
    assert json.loads(json.dumps(records[0]))["type"] == "turn"
    assert teamctl(ws.root, "transcript", TEAM, "nobody").returncode == 2


def test_thinking_reads_apart_from_what_the_member_says() -> None:
    """A thinking block shows as `(thinking) …`, one that was not shown (display omitted)
    or was redacted says so; what the member says stays its own line."""
    record = {"type": "assistant", "ts": time.time(), "content": [  # today: no date shown
        {"type": "thinking", "thinking": "First the tests,\nthen the fix.", "signature": "s"},
        {"type": "thinking", "thinking": "", "signature": "t"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "Fixing it."}]}
    lines = [line[9:] for line in Renderer("bob", None).record(record)]
    assert lines == ["(thinking) First the tests,", "           then the fix.",
                     "(thinking) (not shown)", "(thinking) (redacted)", "bob: Fixing it."]
