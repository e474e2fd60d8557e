"""Bad input through the real console script: exit 2, exactly one line on stderr, and
nothing created or changed anywhere under the root (paths, modes and contents compared).

Every case runs `teamctl` as a real process on its own copy of one prepared root; the
processes run a few at a time in a module fixture, and each case is then checked on its own.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from teamd import actions, board, requests, settings
from teamd.errors import BadInput
from teamd.layout import Workspace, validate_member_name, validate_name
from tests.helpers_proc import clean_env, snapshot, teamctl

LIMIT = 256 * 1024


@dataclass(frozen=True)
class Case:
    id: str
    args: tuple[str | bytes, ...]
    match: str
    stdin: bytes | None = None


CASES = [
    # -- names ---------------------------------------------------------------------------
    Case("team-dotdot", ("create", "../x"), r"invalid team name '\.\./x'"),
    Case("team-upper", ("create", "A"), "invalid team name 'A'"),
    Case("team-empty", ("create", ""), "invalid team name ''"),
    Case("team-49", ("create", "a" * 49), "invalid team name"),
    Case("team-48-ok-but-slash", ("create", "a/b"), "invalid team name 'a/b'"),
    Case("team-argv-not-utf8", ("create", b"t\xff"), "invalid team name"),
    Case("member-dotdot", ("spawn", "t", "../x", "--prompt", "p"), "invalid member name"),
    Case("member-upper", ("spawn", "t", "A", "--prompt", "p"), "invalid member name 'A'"),
    Case("member-empty", ("spawn", "t", "", "--prompt", "p"), "invalid member name ''"),
    Case("member-49", ("spawn", "t", "b" * 49, "--prompt", "p"), "invalid member name"),
    Case("member-slash", ("spawn", "t", "x/y", "--prompt", "p"), "invalid member name"),
    Case("member-reserved", ("spawn", "t", "teamd", "--prompt", "p"), "reserved"),
    Case("send-team-dotdot", ("send", "../x", "alice", "hi"), "invalid"),
    Case("send-member-dotdot", ("send", "t", "../x", "hi"), "invalid"),
    Case("send-member-slash", ("send", "t", "a/b", "hi"), "invalid"),
    Case("send-member-49", ("send", "t", "c" * 49, "hi"), "invalid"),
    Case("send-member-argv-not-utf8", ("send", "t", b"\xfe", "hi"), "invalid"),
    Case("send-sender-upper", ("send", "t", "alice", "hi", "--sender", "A"), "invalid sender"),
    Case("inbox-member-dotdot", ("inbox", "t", "../x"), "invalid|unknown"),
    Case("tasks-team-slash", ("task", "list", "a/b"), "invalid team name"),
    # -- unknown team, member, task, request ---------------------------------------------
    Case("unknown-team-send", ("send", "nope", "alice", "hi"), "unknown team 'nope'"),
    Case("unknown-team-broadcast", ("broadcast", "nope", "hi"), "unknown team 'nope'"),
    Case("unknown-team-spawn", ("spawn", "nope", "x", "--prompt", "p"), "unknown team"),
    Case("unknown-team-task-add", ("task", "add", "nope", "x"), "unknown team 'nope'"),
    Case("unknown-team-task-list", ("task", "list", "nope"), "unknown team 'nope'"),
    Case("unknown-team-task-show", ("task", "show", "nope", "1"), "unknown team 'nope'"),
    Case("unknown-team-inbox", ("inbox", "nope"), "unknown team 'nope'"),
    Case("unknown-team-status", ("status", "nope"), "unknown team 'nope'"),
    Case("unknown-team-logs", ("logs", "nope"), "unknown team 'nope'"),
    Case("unknown-team-requests", ("requests", "nope"), "unknown team 'nope'"),
    Case("unknown-team-delete", ("delete", "nope"), "unknown team 'nope'"),
    Case("unknown-team-shutdown", ("shutdown", "nope", "alice"), "unknown team 'nope'"),
    Case("unknown-member-send", ("send", "t", "ghost", "hi"), "unknown recipient 'ghost'"),
    Case("unknown-member-sender", ("send", "t", "alice", "hi", "--sender", "ghost"),
         "unknown sender 'ghost'"),
    Case("unknown-member-inbox", ("inbox", "t", "ghost"), "unknown member 'ghost'"),
    Case("unknown-member-logs", ("logs", "t", "ghost"), "unknown member 'ghost'"),
    Case("unknown-member-shutdown", ("shutdown", "t", "ghost"), "unknown member 'ghost'"),
    Case("unknown-member-stop", ("stop", "t", "ghost", "--force"), "unknown member 'ghost'"),
    Case("unknown-member-restart", ("restart", "t", "ghost"), "unknown member 'ghost'"),
    Case("unknown-member-owner", ("task", "update", "t", "1", "--owner", "ghost"),
         "unknown member 'ghost'"),
    Case("unknown-task-show", ("task", "show", "t", "99"), "unknown task #99"),
    Case("unknown-task-update", ("task", "update", "t", "99", "--status", "completed"),
         "unknown task #99"),
    Case("unknown-task-fresh-board", ("task", "update", "fresh", "1", "--status", "completed"),
         "unknown task #1"),
    Case("unknown-request-approve", ("approve", "t", "plan-nope"), "unknown request"),
    Case("unknown-request-reject", ("reject", "t", "plan-nope", "--feedback", "x"),
         "unknown request"),
    Case("unknown-request-response", ("send", "t", "lead", "ok", "--type", "shutdown_response",
                                      "--request-id", "shutdown-nope", "--approve",
                                      "--sender", "alice"), "unknown request"),
    Case("bad-request-id", ("approve", "t", "../x"), "invalid request id"),
    # -- content -------------------------------------------------------------------------
    Case("content-too-big", ("send", "t", "alice", "-"), "262145 bytes; the limit",
         stdin=b"x" * (LIMIT + 1)),
    Case("content-too-big-broadcast", ("broadcast", "t", "-"), "limit",
         stdin=b"y" * (LIMIT + 1)),
    Case("content-too-big-multibyte", ("send", "t", "alice", "-"), "limit",
         stdin="é".encode() * (LIMIT // 2 + 1)),
    Case("content-stdin-not-utf8", ("send", "t", "alice", "-"), "not valid UTF-8",
         stdin=b"caf\xe9 \xff\xfe"),
    Case("content-stdin-truncated-utf8", ("broadcast", "t", "-"), "not valid UTF-8",
         stdin=b"ok \xc3"),
    Case("content-argv-not-utf8", ("send", "t", "alice", b"bad \xff bytes"), "UTF-8"),
    Case("content-stdin-nul", ("send", "t", "alice", "-"), "NUL", stdin=b"a\x00b"),
    Case("subject-argv-not-utf8", ("task", "add", "t", b"\xff"), "UTF-8"),
    # -- dependencies --------------------------------------------------------------------
    Case("blocked-by-missing", ("task", "add", "t", "x", "--blocked-by", "99"),
         "unknown task #99"),
    Case("blocked-by-missing-fresh", ("task", "add", "fresh", "x", "--blocked-by", "1"),
         "unknown task #1"),
    Case("blocked-by-itself", ("task", "update", "t", "1", "--blocked-by", "1"), "itself"),
    Case("blocked-by-missing-update", ("task", "update", "t", "2", "--blocked-by", "1,99"),
         "unknown task #99"),
    Case("blocked-by-cycle", ("task", "update", "t", "1", "--blocked-by", "2"), "cycle"),
    Case("blocked-by-not-ids", ("task", "add", "t", "x", "--blocked-by", "one"), "task ids"),
    # -- protocol and usage --------------------------------------------------------------
    Case("answered-otherwise", ("reject", "t", "plan-done", "--feedback", "no"),
         "already approved"),
    Case("to-oneself", ("send", "t", "lead", "hi"), "oneself"),
    Case("stop-without-force", ("stop", "t", "alice"), "--force"),
    Case("task-id-not-int", ("task", "show", "t", "abc"), "not a valid integer"),
    Case("missing-argument", ("send", "t", "alice"), "Missing argument"),
    Case("unknown-status", ("task", "update", "t", "1", "--status", "done"),
         "unknown task status"),
    Case("unknown-type", ("send", "t", "alice", "x", "--type", "gossip"),
         "unknown message type"),
    Case("init-twice", ("init",), "already exists"),
    Case("create-existing", ("create", "t"), "already exists"),
    Case("create-over-a-left-board", ("create", "old"),
         r"team 'old': the board of a deleted team is left over in \S*/\.tasks/old;"),
    # -- a team being deleted takes no new work ------------------------------------------
    Case("deleting-send", ("send", "gone", "alice", "hi"), "team 'gone' is being deleted"),
    Case("deleting-broadcast", ("broadcast", "gone", "hi"), "team 'gone' is being deleted"),
    Case("deleting-spawn", ("spawn", "gone", "carol", "--prompt", "p"),
         "team 'gone' is being deleted"),
    Case("deleting-task-add", ("task", "add", "gone", "x"), "team 'gone' is being deleted"),
]


def prepare(root: Path) -> None:
    """The one starting state every case gets a copy of."""
    ws = Workspace.at(root)
    settings.write_defaults(ws)
    actions.create_team(ws, "t")
    for name in ("alice", "bob"):
        actions.spawn(ws, "t", name, "work")
    board.create(ws, "t", "one")
    board.create(ws, "t", "two", blocked_by=[1])
    requests.open_request(ws, "t", "plan_approval", "alice", "lead", plan="p",
                          request_id="plan-done")
    requests.answer(ws, "t", "plan-done", True)
    actions.send(ws, "t", "alice", "hello")
    actions.send(ws, "t", "lead", "hi lead", sender="bob")
    actions.create_team(ws, "fresh")
    actions.create_team(ws, "gone")
    actions.spawn(ws, "gone", "alice", "work")
    actions.begin_delete(ws, "gone")
    # a board a crash left behind when its team went first (CONTRACT §17)
    left = root / ".tasks" / "old"
    left.mkdir(mode=0o700)
    (left / "1.json").write_text('{"id": 1, "subject": "from a deleted team"}')


@dataclass
class Outcome:
    done: subprocess.CompletedProcess[bytes]
    before: dict[str, tuple[str, int, bytes | None]]
    after: dict[str, tuple[str, int, bytes | None]]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    base = tmp_path_factory.mktemp("bad-input")
    template = base / "template"
    template.mkdir(mode=0o700)
    prepare(template)
    env = clean_env()
    good = Case("control", ("send", "t", "alice", "a good message"), "")

    def run(case: Case) -> Outcome:
        root = base / case.id
        shutil.copytree(template, root, symlinks=True)
        before = snapshot(root)
        done = teamctl(root, *case.args, input=case.stdin, env=env)
        return Outcome(done, before, snapshot(root))

    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(run, [*CASES, good]))
    return {case.id: out for case, out in zip([*CASES, good], results, strict=True)}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_exits_2_with_one_line_and_changes_nothing(
        outcomes: dict[str, Outcome], case: Case) -> None:
    out = outcomes[case.id]
    stderr = out.done.stderr.decode("utf-8", "replace")
    assert out.done.returncode == 2, (out.done.returncode, stderr)
    assert stderr.endswith("\n") and stderr.count("\n") == 1, stderr
    assert stderr.startswith("teamctl: error: "), stderr
    assert re.search(case.match, stderr), stderr
    assert out.done.stdout == b""
    assert out.after == out.before, sorted(
        set(out.after.items()) ^ set(out.before.items()), key=str)[:5]


def test_the_control_case_does_change_the_tree(outcomes: dict[str, Outcome]) -> None:
    """The snapshot comparison can fail: a good command run the same way changes things."""
    out = outcomes["control"]
    assert out.done.returncode == 0, out.done.stderr
    assert out.done.stderr == b""
    assert out.after != out.before
    changed = {k for k in out.after if out.after[k] != out.before.get(k)}
    assert {"t/alice_inbox.jsonl", "t/events.jsonl"} <= {k.removeprefix(".teams/")
                                                         for k in changed}


@pytest.mark.parametrize("name", ["a\x00b", "\x00", "lead\x00", "../x", "A", "", "a" * 49,
                                  "a/b"])
def test_names_with_nul_and_the_rest_are_refused_by_the_library(ws: Workspace,
                                                                name: str) -> None:
    """NUL cannot travel through argv: the library refuses it before touching a file."""
    prepare(ws.root)
    before = snapshot(ws.root)
    for attempt in (lambda: validate_name(name), lambda: validate_member_name(name),
                    lambda: actions.create_team(ws, name),
                    lambda: actions.spawn(ws, "t", name, "p"),
                    lambda: actions.send(ws, "t", name, "hi"),
                    lambda: actions.send(ws, name, "alice", "hi"),
                    lambda: board.create(ws, name, "x")):
        with pytest.raises(BadInput):
            attempt()
    assert snapshot(ws.root) == before
