"""A member's life from the page (CONTRACT §16, Actions), against a real `teamd`: restart
(the roster's menu), shut down (the member page's button: the handshake), stop and remove
(the menu, after the page's confirmation). Each does what its command does: the roster and
the processes say so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.sync_api import Page

from teamd import roster
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import (
    TEAM,
    gone,
    live_pid,
    make_team,
    member,
    running_teamd,
    wait_status,
    wait_until,
)
from tests.web.webkit import Web, open_page

T = 30.0


def menu(page: Page, name: str, action: str) -> None:
    page.locator(f'tr[data-member="{name}"] select[name=member-action]').select_option(action)
    page.wait_for_selector(f"#flash >> text=/{action}: done/", timeout=T * 1000)


def test_restart_shutdown_stop_and_remove_from_the_page(
        ws: Workspace, server: ScriptedServer, workdir: Path, web: Web, browser: Any) -> None:
    make_team(ws, workdir, "alice", "bob", "carol")
    with running_teamd(ws, server.url):
        for name in ("alice", "bob", "carol"):
            wait_status(ws, name, "idle")
        watched = open_page(browser, web, f"/t/{TEAM}")
        page = watched.page

        first = live_pid(ws, TEAM, "alice")
        menu(page, "alice", "restart")
        assert member(ws, TEAM, "alice")["restart_requested_at"] is not None
        wait_until(lambda: live_pid(ws, TEAM, "alice") not in (None, first), T,
                   "alice restarted")

        talk = open_page(browser, web, f"/t/{TEAM}/m/bob").page
        bob = live_pid(ws, TEAM, "bob")
        talk.get_by_role("button", name="Shut down").click()
        talk.wait_for_selector("#flash >> text=/shutdown: done/", timeout=T * 1000)
        wait_status(ws, "bob", "shutdown")
        assert member(ws, TEAM, "bob")["desired"] == "stopped"  # it approved, and left
        assert bob is not None and wait_until(lambda: gone(bob), T, "bob's process gone")

        carol = live_pid(ws, TEAM, "carol")
        menu(page, "carol", "stop")  # waits, as `teamctl stop --force`, until it is gone
        assert member(ws, TEAM, "carol")["desired"] == "stopped"
        assert carol is not None and gone(carol)
        menu(page, "carol", "remove")
        assert roster.find(roster.load(ws, TEAM), "carol") is None
        page.wait_for_selector('tr[data-member="carol"]', state="detached")
        assert page.locator('tr[data-member="alice"]').count() == 1
    assert watched.dialogs == ["stop carol?", "remove carol?"]
    assert not watched.errors, watched.errors
