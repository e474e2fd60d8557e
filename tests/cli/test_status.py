"""`teamctl status` and `teamctl board` as a person and a script see them (issue 8): run as
the real console script in a real terminal (a pty of a fixed width), columns aligned on what
shows, colours per status and member, none at all with NO_COLOR; "did you mean"; the note
on a message to a stopped member; the release of a departed member's task.

The members here have no process: their statuses are written to the roster as teamd would
write them, which is all `status` reads.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import signal
import struct
import subprocess
import termios
import time
from pathlib import Path
from typing import Any

import pytest

from teamd import actions, board, files, inbox, requests, roster
from teamd.agent.session import Session
from teamd.layout import Workspace
from teamd.store.files.paths import Paths
from tests.harness import cells, strip
from tests.helpers_proc import TEAMCTL, clean_env, teamctl

TEAM = "crew"


# -- a terminal --------------------------------------------------------------------------
class Term:
    """`teamctl` in a pty of `cols` columns: what it wrote, as raw bytes."""

    def __init__(self, root: Path, *args: str, cols: int = 200,
                 env: dict[str, str] | None = None) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, cols, 0, 0))
        base = {k: v for k, v in clean_env().items() if k not in ("COLUMNS", "LINES",
                                                                   "NO_COLOR")}
        base["TERM"] = "xterm-256color"
        self.proc = subprocess.Popen([str(TEAMCTL), "--root", str(root), *args],
                                     stdin=slave, stdout=slave, stderr=slave,
                                     env={**base, **(env or {})}, start_new_session=True)
        os.close(slave)
        self.master = master
        self.out = b""

    def read(self, until: float) -> bool:
        """Read what is there until `until` (monotonic); False once the terminal closed."""
        while True:
            left = until - time.monotonic()
            if left <= 0:
                return True
            ready, _, _ = select.select([self.master], [], [], left)
            if not ready:
                return True
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # EIO: every writer closed its end
                return False
            if not chunk:
                return False
            self.out += chunk

    def wait_for(self, text: bytes, times: int = 1, timeout: float = 20) -> None:
        """Read until `text` was shown `times` times (or fail, at the deadline)."""
        deadline = time.monotonic() + timeout
        while self.out.count(text) < times:
            if time.monotonic() >= deadline or not self.read(min(deadline,
                                                                 time.monotonic() + 0.2)):
                assert self.out.count(text) >= times, f"{text!r} not shown:\n{self.text}"

    def finish(self, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        while self.read(deadline) and time.monotonic() < deadline:
            pass
        code = self.proc.wait(timeout)
        os.close(self.master)
        return code

    @property
    def text(self) -> str:
        return self.out.decode(errors="replace").replace("\r\n", "\n")


def run_term(root: Path, *args: str, **kw: Any) -> tuple[int, str]:
    term = Term(root, *args, **kw)
    code = term.finish()
    return code, term.text


# -- a team in every state ---------------------------------------------------------------
def set_member(ws: Workspace, name: str, **fields: Any) -> None:
    def change(config: dict[str, Any]) -> None:
        roster.get(config, name).update(fields)

    roster.update(ws, TEAM, change)


@pytest.fixture
def team(ws: Workspace) -> Workspace:
    actions.create_team(ws, TEAM)
    for name in ("alice", "bob", "carol", "dave"):
        actions.spawn(ws, TEAM, name, "work", plan_mode=name == "carol")
    board.create(ws, TEAM, "design the schema")
    board.create(ws, TEAM, "build the resolvers", blocked_by=[1])
    board.create(ws, TEAM, "ship it", blocked_by=[1, 2])
    board.update(ws, TEAM, 1, status="in_progress", owner="dave")
    set_member(ws, "alice", status="failed", restarts=6,
               last_error="exit code 1; 6 restarts within 60s")
    set_member(ws, "bob", status="backoff", restarts=1,
               last_error="killed by SIGKILL; restart 1 in 2 s")
    set_member(ws, "dave", status="shutdown", desired="stopped",
               usage={"input_tokens": 1200, "output_tokens": 340,
                      "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0,
                      "cost_usd": 0.0123})
    actions.send(ws, TEAM, "lead", "PLAN: read, then write", type_="plan_approval_request",
                 sender="carol")
    return ws


def test_status_columns_align_in_a_terminal_with_colours(team: Workspace) -> None:
    code, text = run_term(team.root, "status", TEAM, cols=200)
    assert code == 0, text
    assert "\x1b[31mfailed" in text and "\x1b[33mbackoff" in text  # red, yellow
    assert "\x1b[36malice" in text and "\x1b[33mbob" in text  # names in member colours
    [rid] = [r["request_id"] for r in requests.list_requests(team, TEAM, pending_only=True)]
    alice, bob, carol, dave = (cells(text, n) for n in ("alice", "bob", "carol", "dave"))
    assert (alice["STATUS"], alice["RESTARTS"], alice["LAST ERROR"]) == (
        "failed", "6", "exit code 1; 6 restarts within 60s")
    assert (bob["STATUS"], bob["LAST ERROR"]) == ("backoff", "killed by SIGKILL; restart 1 in 2 s")
    assert (carol["STATUS"], carol["TASK"], carol["NOTES"]) == (
        "pending", "-", f"plan gate closed, plan pending {rid}")
    assert (dave["STATUS"], dave["TASK"], dave["TOKENS"], dave["COST"], dave["PID"]) == (
        "shutdown", "#1", "1.2k/340", "$0.0123", "-")
    # every line fits the terminal: the last column is cut, not wrapped
    assert all(len(line) <= 200 for line in strip(text).splitlines())
    narrow_code, narrow = run_term(team.root, "status", TEAM, cols=100)
    assert narrow_code == 0
    assert all(len(line) <= 100 for line in strip(narrow).splitlines()
               if not line.startswith(("supervisor", "team ")))
    assert cells(narrow, "alice")["LAST ERROR"].startswith("exit code")


def test_no_color_means_no_escape_code_in_any_command(team: Workspace) -> None:
    runs = [("status",), ("status", TEAM), ("board", TEAM), ("task", "list", TEAM),
            ("requests", TEAM), ("logs", TEAM), ("inbox", TEAM, "--peek"), ("--help",),
            ("send", TEAM, "alice", "hello"), ("status", "shop")]
    for args in runs:
        code, text = run_term(team.root, *args, env={"NO_COLOR": "1"})
        assert code in (0, 2), (args, text)
        assert "\x1b" not in text, (args, text)
    # and the same commands do colour a terminal without it (the test can fail)
    assert "\x1b[" in run_term(team.root, "status", TEAM)[1]
    assert "\x1b[" in run_term(team.root, "board", TEAM)[1]


def test_status_and_board_pipe_without_escapes(team: Workspace) -> None:
    for args in (("status",), ("board", TEAM)):
        done = teamctl(team.root, *args)
        assert done.returncode == 0 and b"\x1b" not in done.stdout


def test_status_json_has_the_live_fields_and_markers(team: Workspace) -> None:
    doc = json.loads(teamctl(team.root, "status", TEAM, "--json").stdout)
    members = {m["name"]: m for m in doc["teams"][0]["members"]}
    for m in members.values():
        for key in ("live", "uptime", "cpu_percent", "pss", "plan_gate", "pending_requests",
                    "current_task", "status", "last_error", "usage", "color", "desired"):
            assert key in m, key
        assert m["live"] is False and m["uptime"] is None and m["pss"] is None
    assert members["carol"]["plan_gate"] == "closed"
    assert [r["kind"] for r in members["carol"]["pending_requests"]] == ["plan_approval"]
    assert members["alice"]["plan_gate"] is None and members["alice"]["pending_requests"] == []
    assert members["alice"]["last_error"] == "exit code 1; 6 restarts within 60s"
    assert members["dave"]["current_task"] == 1 and members["dave"]["usage"]["cost_usd"] == 0.0123
    # approved: the gate opens and the request is no longer pending
    rid = members["carol"]["pending_requests"][0]["request_id"]
    actions.answer_request(team, TEAM, rid, True, only="plan_approval")
    doc = json.loads(teamctl(team.root, "status", TEAM, "--json").stdout)
    carol = next(m for m in doc["teams"][0]["members"] if m["name"] == "carol")
    assert (carol["plan_gate"], carol["pending_requests"]) == ("open", [])


def test_a_plan_approved_before_the_member_joined_does_not_open_its_gate(
        team: Workspace) -> None:
    [rid] = [r["request_id"] for r in requests.list_requests(team, TEAM, pending_only=True)]
    actions.answer_request(team, TEAM, rid, True, only="plan_approval")
    assert requests.plan_approved(team, TEAM, "carol", since=None)
    joined = time.time() + 1  # as if carol were removed and spawned again
    set_member(team, "carol", joined_at=joined)
    assert not requests.plan_approved(team, TEAM, "carol", since=joined)
    doc = json.loads(teamctl(team.root, "status", TEAM, "--json").stdout)
    carol = next(m for m in doc["teams"][0]["members"] if m["name"] == "carol")
    assert carol["plan_gate"] == "closed"


# -- the board ---------------------------------------------------------------------------
def test_board_by_column_with_owners_and_blockers(team: Workspace) -> None:
    board.update(team, TEAM, 1, status="completed")
    board.claim(team, TEAM, "bob", 2)
    board.create(team, TEAM, "write the docs")
    doc = json.loads(teamctl(team.root, "board", TEAM, "--json").stdout)
    cols = doc["columns"]
    assert [t["id"] for t in cols["pending"]] == [3, 4]
    assert [t["id"] for t in cols["in_progress"]] == [2]
    assert [t["id"] for t in cols["completed"]] == [1]
    three, four = cols["pending"]
    assert (three["waiting_on"], three["claimable"]) == ([2], False)
    assert (four["waiting_on"], four["claimable"]) == ([], True)
    assert cols["in_progress"][0]["owner"] == "bob" and cols["in_progress"][0]["blocks"] == [3]
    code, text = run_term(team.root, "board", TEAM, cols=120)
    assert code == 0
    lines = strip(text).splitlines()
    header = next(line for line in lines if line.startswith("PENDING"))
    at = {title: header.index(title) for title in ("PENDING (2)", "IN PROGRESS (1)",
                                                   "COMPLETED (1)")}
    col = {key: [line[at[title]:].split("   ")[0].strip() for line in lines
                 if len(line) > at[title]]
           for key, title in (("pending", "PENDING (2)"), ("in_progress", "IN PROGRESS (1)"),
                              ("completed", "COMPLETED (1)"))}
    assert "#3 ship it" in col["pending"] and "blocked by #2" in col["pending"]
    assert "#4 write the docs" in col["pending"] and "ready, unowned" in col["pending"]
    assert "#2 build the resolvers" in col["in_progress"] and "@bob" in col["in_progress"]
    assert "blocks #3" in col["in_progress"]
    assert "#1 design the schema" in col["completed"]


def test_watch_views_end_on_ctrl_c_with_exit_0(team: Workspace) -> None:
    for args, env, marker in (
            (("status", TEAM, "--watch"), {}, b"NAME"),
            (("board", TEAM, "--watch"), {}, b"PENDING"),
            (("status", TEAM, "--watch"), {"NO_COLOR": "1"}, b"NAME")):
        term = Term(team.root, *args, env=env)
        term.wait_for(marker)
        set_member(team, "bob", status="idle")  # a roster change: a new frame
        term.wait_for(marker, times=term.out.count(marker) + 1)
        term.proc.send_signal(signal.SIGINT)
        assert term.finish() == 0, term.text
        if env.get("NO_COLOR"):
            assert "\x1b" not in term.text
        else:
            assert "\x1b[" in term.text


# -- errors that help --------------------------------------------------------------------
def test_unknown_team_and_member_say_where_and_suggest(team: Workspace) -> None:
    done = teamctl(team.root, "status", "crw")
    assert done.returncode == 2
    assert done.stderr.decode() == (f"teamctl: error: unknown team 'crw' in {team.root} "
                                    "(teams: crew); did you mean 'crew'?\n")
    done = teamctl(team.root, "board", "shop")
    assert done.returncode == 2
    assert done.stderr.decode() == (f"teamctl: error: unknown team 'shop' in {team.root} "
                                    "(teams: crew)\n")
    done = teamctl(team.root, "send", TEAM, "alcie", "hi")
    assert done.returncode == 2
    assert done.stderr.decode() == ("teamctl: error: unknown recipient 'alcie' in team 'crew' "
                                    "(members: alice, bob, carol, dave); did you mean "
                                    "'alice'?\n")
    done = teamctl(team.root, "shutdown", TEAM, "bobb")
    assert "did you mean 'bob'?" in done.stderr.decode() and done.returncode == 2


# -- send to a stopped member ------------------------------------------------------------
def test_send_to_a_shutdown_or_failed_member_is_delivered_with_a_note(team: Workspace) -> None:
    for name, state in (("dave", "shutdown"), ("alice", "failed")):
        done = teamctl(team.root, "send", TEAM, name, f"hello {name}")
        assert done.returncode == 0
        assert done.stderr.decode().splitlines() == [
            f"note: {name} is {state}: the message waits in its inbox until it is started "
            f"again (`teamctl restart {TEAM} {name}`)"]
        assert [m["content"] for m in inbox.peek(team, TEAM, name)] == [f"hello {name}"]
    done = teamctl(team.root, "send", TEAM, "carol", "hello carol")  # pending: no note
    assert done.returncode == 0 and done.stderr == b""


# -- the roster's current_task follows a release -----------------------------------------
def test_release_clears_current_task_in_the_roster(team: Workspace) -> None:
    set_member(team, "dave", status="idle", desired="running", current_task=1)
    actions.shutdown(team, TEAM, "dave")  # no live process: answered on its behalf
    dave = roster.get(roster.load(team, TEAM), "dave")
    assert (dave["status"], dave["current_task"]) == ("shutdown", None)
    one = board.get(team, TEAM, 1)
    assert (one["status"], one["owner"]) == ("pending", None)


# -- a shutdown request answered by the harness is never shown to the model -------------
def test_hidden_inbox_records_are_known_but_never_shown(tmp_path: Path) -> None:
    files.ensure_dir(Paths(tmp_path).sessions_dir("crew"))
    store = Workspace(tmp_path).store
    session = Session.load(store, "crew", "alice")
    session.append({"type": "user", "content": [{"type": "text", "text": "prompt"}]})
    session.append({"type": "assistant", "content": [{"type": "text", "text": "ok"}]})
    ask = inbox.make("shutdown_request", "lead", "alice", "stop", request_id="shutdown-1",
                     reason="stop")
    session.append({"type": "inbox", "messages": [ask], "hidden": True})
    again = Session.load(store, "crew", "alice")
    assert ask["id"] in again.known_ids
    assert again.ends_with_reply()  # nothing for the model to answer
    assert "shutdown_request" not in json.dumps(again.messages("I am alice"))
    msg = inbox.make("message", "lead", "alice", "NEWS-1")
    again.append({"type": "inbox", "messages": [msg]})
    assert not again.ends_with_reply()
    shown = json.dumps(again.messages("I am alice"))
    assert "NEWS-1" in shown and "shutdown_request" not in shown
    assert files.read_jsonl(Paths(tmp_path).session("crew", "alice")).clean
