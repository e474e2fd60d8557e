"""Text is never HTML (CONTRACT §16): a message, a task subject, a tool's output and the
model's own reply holding `<script>` and `<img onerror=…>` show as the characters they
are, on the team page and the member page of a real team at work. Nothing runs: the test
listens for dialogs (each payload calls `alert`) and for console and page errors (the
page's CSP would also complain of an inline script it blocked)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from teamd import actions, board, files
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import TEAM, make_team, running_teamd, tool_use, wait_status, wait_until
from tests.web.webkit import Web, open_page

SCRIPT = '<script>alert("script")</script>'
IMG = "<img src=x onerror=alert('img')>"
T = 20.0


def test_hostile_text_renders_as_text(ws: Workspace, server: ScriptedServer, workdir: Path,
                                      web: Web, browser: Any) -> None:
    command = f"printf '%s\\n' \"{IMG}\" '{SCRIPT}'"
    server.add_rule({"agent": "alice", "contains": "HOSTILE-GO", "times": 1,
                     "reply": {"content": [tool_use("bash", command=command)]}})
    server.add_rule({"agent": "alice", "tool_result": "bash",
                     "reply": {"content": f"<b>said</b> {SCRIPT}"}})
    make_team(ws, workdir, "alice")
    board.create(ws, TEAM, f"subject {SCRIPT} {IMG}")
    with running_teamd(ws, server.url):
        wait_status(ws, "alice", "idle")
        actions.send(ws, TEAM, "alice", f"HOSTILE-GO {IMG} {SCRIPT}")
        wait_until(lambda: "<b>said</b>" in str(files.read_jsonl(
            ws.store.paths.session(TEAM, "alice")).records), T, "alice's reply")
        wait_status(ws, "alice", "idle")
        team = open_page(browser, web, f"/t/{TEAM}")
        member = open_page(browser, web, f"/t/{TEAM}/m/alice")
    card = team.page.locator('[data-task="1"] .subject').inner_text()
    assert card == f"#1 subject {SCRIPT} {IMG}"
    journal = team.page.locator(".journal").inner_text()
    assert SCRIPT in journal and IMG in journal
    talk = member.page
    said_in = talk.locator('[data-kind="message_in"]').filter(has_text="HOSTILE-GO")
    assert f"HOSTILE-GO {IMG} {SCRIPT}" in said_in.inner_text()
    output = talk.locator('[data-kind="tool_result"]').last.inner_text()
    assert f"{IMG}\n{SCRIPT}" in output
    reply = talk.locator('[data-kind="text"]').filter(has_text="said")
    assert f"alice: <b>said</b> {SCRIPT}" in reply.inner_text()
    for watched in (team, member):
        page = watched.page
        assert page.locator("main img, main script, main b").count() == 0
        assert watched.dialogs == [] and watched.errors == [], (watched.dialogs,
                                                               watched.errors)
