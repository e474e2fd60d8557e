"""Take the README's screenshots of `teamctl web` from a real run: a team at work on the
scripted model (the walk-through's scenario, plus a long tool output and a `git push` that
waits for the person's answer) under a real `teamd`, the real `teamctl web`, and Debian's
Chromium (headless, through Playwright). Writes web-teams.png, web-team.png and
web-member.png (tests/web/test_web_screenshots.py runs it into a temporary folder).

    python scripts/web_screenshots.py               # into docs/
    python scripts/web_screenshots.py --out /tmp/x
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from teamd import actions, board, requests  # noqa: E402
from teamd.layout import Workspace  # noqa: E402
from teamd.scripted import ScriptedServer  # noqa: E402
from tests.harness import running_teamd, wait_until  # noqa: E402
from tests.web.webkit import chromium, open_page, running_web, why_no_browser  # noqa: E402

TEAM = "webapp"
TASKS = ["Analyze REST endpoints", "Design GraphQL schema", "Write the resolvers",
         "Port the login page", "Load-test the gateway"]


def scenario() -> dict[str, Any]:
    shipped = resources.files("teamd.scripted") / "scenarios" / "walkthrough.json"
    walk = json.loads(shipped.read_text())
    ours = [
        {"agent": "backend", "contains": "LIST-ROUTES", "times": 1, "reply": {"content": [
            {"type": "text", "text": "Listing the REST routes before I touch the schema."},
            {"type": "tool_use", "name": "bash",
             "input": {"command": "seq -f 'GET /api/v1/items/%g' 1 24"}}]}},
        {"agent": "backend", "tool_result": "bash", "times": 1, "reply": {"content": [
            {"type": "text", "text": "24 item routes: one `items(id)` query covers them."},
            {"type": "tool_use", "name": "SendMessage", "input": {
                "recipient": "lead", "content": "24 REST item routes map to one query."}}]}},
        {"agent": "frontend", "contains": "SHIP-IT", "times": 1, "reply": {"content": [
            {"type": "tool_use", "name": "bash", "input": {"command": "git push origin main"}}]}},
    ]
    return {"rules": [*ours, *walk["rules"]], "default": walk["default"]}


def stage(ws: Workspace, url: str, work: Path) -> None:
    """The team, its board and its members, at work until a request waits for the person."""
    ws.settings_file.write_text('[permissions]\nask = ["bash(git push*)"]\n')
    actions.create_team(ws, TEAM, "Move the app to GraphQL", budget_usd=0.5)
    for i, subject in enumerate(TASKS, start=1):
        board.create(ws, TEAM, subject, blocked_by=[i - 1] if i in (2, 3) else [])
    for name, role in (("analyst", "analyst"), ("backend", "backend engineer"),
                       ("frontend", "frontend engineer")):
        actions.spawn(ws, TEAM, name, f"Handle the {role} tasks", role=role, cwd=str(work))
    actions.set_budget(ws, TEAM, "0.05", member="backend")


def wait_for_work(ws: Workspace) -> None:
    wait_until(lambda: board.get(ws, TEAM, 3)["status"] == "completed", 60, "the chain done")
    actions.send(ws, TEAM, "backend", "LIST-ROUTES for the schema, please")
    actions.send(ws, TEAM, "frontend", "SHIP-IT when the login page works")
    wait_until(lambda: requests.list_requests(ws, TEAM, pending_only=True), 60,
               "the push to wait for an answer")
    review = actions.add_task(ws, TEAM, "Review the schema with design", owner="frontend")
    actions.add_task(ws, TEAM, "Document the new API", blocked_by=[review["id"]])


def shoot(out: Path) -> list[Path]:
    reason = why_no_browser()
    if reason:
        raise SystemExit(f"web_screenshots: {reason}")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="teamd-shots-") as tmp, \
            ScriptedServer(scenario()) as server:
        root, work = Path(tmp) / "ws", Path(tmp) / "work"
        root.mkdir()
        work.mkdir()
        ws = Workspace.at(root)
        stage(ws, server.url, work)
        with running_teamd(ws, server.url), running_web(ws) as web, chromium() as browser:
            wait_for_work(ws)
            shots = []
            for name, path, height in (("web-teams.png", "/", 520),
                                       ("web-team.png", f"/t/{TEAM}", 1100),
                                       ("web-member.png", f"/t/{TEAM}/m/backend", 900)):
                page = open_page(browser, web, path, width=1360, height=height).page
                page.wait_for_selector("#live >> text=live")
                if "/m/" in path:  # the latest steps: the long output folded among them
                    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
                shots.append(out / name)
                page.screenshot(path=str(shots[-1]))
            return shots


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs")
    for path in shoot(parser.parse_args().out):
        print(path)


if __name__ == "__main__":
    main()
