"""Text the product did not write never reaches the operator's terminal raw (issue 19,
CONTRACT §9): a model reply, a tool's output, a message, a task, a request and an error
holding an OSC 52 clipboard write, a screen clear and a right-to-left override are shown
escaped by every human view, and kept exactly by --json.

The hostile text takes the real road: a scripted model replies with it, a real member
runs `printf` of it in /bin/sh, sends it to the lead, and the views are the installed
`teamctl` run as a subprocess (its stdout a pipe: no colour, so any escape is the text's).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from teamd import actions, files, requests, roster
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import (
    TEAM,
    Reader,
    T,
    journal,
    lead_got,
    make_team,
    running_teamd,
    tool_use,
    wait_status,
)
from tests.helpers_proc import TEAMCTL, clean_env, teamctl

#: an OSC 52 clipboard write (ended by BEL), a screen clear, a C1 CSI and a bidi override
HOSTILE = "look\x1b]52;c;aGFja2Vk\x07 here\x1b[2J then \u202eevil\x9b31m end"
#: what must never be printed raw: C0 but tab and newline, DEL, C1, the bidi controls
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
SHOWN = r"look\x1b]52;c;aGFja2Vk\x07 here\x1b[2J then \u202eevil\x9b31m end"


@pytest.fixture
def script() -> dict[str, Any]:
    """alice's one working turn: says the text, runs `printf` of it, sends it to the lead."""
    return {"rules": [{"agent": "alice", "contains": "GO", "times": 1, "reply": {"content": [
        {"type": "text", "text": HOSTILE},
        tool_use("bash", command=f"printf '%s\\n' '{HOSTILE}'"),
        tool_use("SendMessage", recipient="lead", content=HOSTILE)]}}],
        "default": {"content": [{"type": "text", "text": "done"}]}}


def holds(value: Any, text: str) -> int:
    """How many strings inside `value` (JSON-like) hold `text`."""
    if isinstance(value, dict):
        return sum(holds(v, text) for v in value.values())
    if isinstance(value, list):
        return sum(holds(v, text) for v in value)
    return int(isinstance(value, str) and text in value)


def view(ws: Workspace, *args: str) -> str:
    """A human view's standard output, checked: exit 0 and nothing raw in it."""
    done = teamctl(ws.root, *args, env=clean_env())
    assert done.returncode == 0, (args, done.stderr)
    out = done.stdout.decode()
    assert not RAW.search(out), (args, out)
    return out


def json_of(ws: Workspace, *args: str) -> Any:
    done = teamctl(ws.root, *args, "--json", env=clean_env())
    assert done.returncode == 0, (args, done.stderr)
    return json.loads(done.stdout)


def json_lines(ws: Workspace, *args: str) -> list[Any]:
    done = teamctl(ws.root, *args, "--json", env=clean_env())
    assert done.returncode == 0, (args, done.stderr)
    return [json.loads(line) for line in done.stdout.decode().splitlines()]


def test_every_view_shows_control_characters_escaped_and_json_keeps_them(
        ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    make_team(ws, workdir, "alice", prompt="GO")
    actions.add_task(ws, TEAM, HOSTILE, HOSTILE, [])
    rid = requests.open_request(ws, TEAM, "plan_approval", "alice", "lead",
                                plan=HOSTILE)["request_id"]
    with running_teamd(ws, server.url):
        lead_got(ws, lambda m: m["content"] == HOSTILE, "alice's message to the lead")
        wait_status(ws, "alice", "idle")
        # the fault happened: the raw text is in the journal, the session and the inbox
        assert holds(journal(ws, TEAM), HOSTILE) >= 2  # the message, the command
        # the reply, the command, its output, the message
        assert holds(files.read_jsonl(ws.store.paths.session(TEAM, "alice")).records, HOSTILE) >= 4

        attach = subprocess.Popen([str(TEAMCTL), "--root", str(ws.root), "attach", TEAM,
                                   "alice"], stdout=subprocess.PIPE, env=clean_env())
        reader = Reader(attach)
        reader.wait_for("✉ alice → lead")
        attach.send_signal(signal.SIGINT)
        assert attach.wait(T) == 0
        reader.thread.join(T)
        attached = "\n".join(reader.lines)
        assert not RAW.search(attached), attached
        assert attached.count(SHOWN) >= 3  # the reply, the command, the message (+ output)

    transcript = view(ws, "transcript", TEAM, "alice")
    assert f"alice: {SHOWN}" in transcript and SHOWN in transcript.split("↳")[1]
    logs = view(ws, "logs", TEAM, "--full")
    assert f"alice → lead: {SHOWN}" in logs
    assert "tool bash" in logs and r"\x1b]52" in logs.split("tool bash")[1]
    assert SHOWN in view(ws, "logs")  # -g, --full or not: never raw
    assert SHOWN in view(ws, "logs", "-g", "clipboard|aGFja2Vk", "--full")
    inbox = view(ws, "inbox", TEAM, "--peek")
    assert f"alice → lead: {SHOWN}" in inbox
    shown_task = view(ws, "task", "show", TEAM, "1")
    assert f"subject:     {SHOWN}" in shown_task and shown_task.rstrip().endswith(SHOWN)
    assert SHOWN[:30] in view(ws, "task", "list", TEAM)
    assert r"\x1b]52" in view(ws, "board", TEAM)
    assert SHOWN[:30] in view(ws, "requests", TEAM)

    def broken(config: dict[str, Any]) -> None:
        roster.get(config, "alice")["last_error"] = HOSTILE

    roster.update(ws, TEAM, broken)
    status = view(ws, "status", TEAM)
    assert SHOWN[:20] in status

    # --json keeps the exact text, escapes and all
    [alice] = json_of(ws, "status", TEAM)["teams"][0]["members"]
    assert alice["last_error"] == HOSTILE
    records = json_lines(ws, "logs", TEAM)
    assert any(r["event"] == "message" and r["message"]["content"] == HOSTILE for r in records)
    assert any(r["event"] == "tool_call" and holds(r["input"], HOSTILE) for r in records)
    assert [m["content"] for m in json_lines(ws, "inbox", TEAM, "--peek")
            if m["sender"] == "alice" and m["type"] == "message"] == [HOSTILE]
    task = json_of(ws, "task", "show", TEAM, "1")
    assert (task["subject"], task["description"]) == (HOSTILE, HOSTILE)
    assert [r["plan"] for r in json_of(ws, "requests", TEAM)
            if r["request_id"] == rid] == [HOSTILE]
    # the person's inbox, drained: printed escaped, then gone
    drained = view(ws, "inbox", TEAM)
    assert f"alice → lead: {SHOWN}" in drained
    assert teamctl(ws.root, "inbox", TEAM, "--json", env=clean_env()).stdout == b""
