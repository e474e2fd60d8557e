"""The roster split (issue 10, CONTRACT §4): what each member should be in `config.json`,
what it is in `members/{name}.json`; readers see the two merged; a status write touches one
member's file only; person and lead steps write back only what changed, `config.json`
first; a schema-1 roster is migrated once, whole or not at all, by whoever reads it first.

Real files, real locks, real processes (a second interpreter writing while this one holds
a lock; a process that dies half-way through a migration)."""

from __future__ import annotations

import copy
import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from teamd import actions, board, files, roster
from teamd.errors import TeamdError
from teamd.files import Json
from teamd.layout import Workspace
from teamd.states import Status, Writer, transition
from tests.helpers_proc import clean_env, teamctl

TEAM = "crew"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def team(ws: Workspace, tmp_path: Path) -> Workspace:
    actions.create_team(ws, TEAM)
    for name in ("alice", "bob"):
        actions.spawn(ws, TEAM, name, f"{name}'s work", cwd=str(tmp_path))
    return ws


def status_file(ws: Workspace, name: str) -> Json:
    doc = files.read_json(ws.store.paths.member_status(TEAM, name))
    assert doc is not None, name
    return doc


def in_another_process(ws: Workspace, code: str) -> subprocess.CompletedProcess[str]:
    """Run `code` (with `ws`, `roster`, `TEAM` bound) in a fresh interpreter."""
    prelude = ("from teamd import roster\nfrom teamd.layout import Workspace\n"
               f"ws = Workspace.at({str(ws.root)!r})\nTEAM = {TEAM!r}\n")
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)],
                          cwd=REPO, env=clean_env(), capture_output=True, text=True,
                          timeout=60, check=False)


# -- the layout ----------------------------------------------------------------------------
def test_spec_and_status_sit_apart_and_merge_back(team: Workspace) -> None:
    config = files.read_json(team.store.paths.config(TEAM))
    assert config is not None and config["schema"] == 2
    for entry in config["members"]:
        assert not set(entry) & set(roster.STATUS_FIELDS), entry
        assert {"name", "agent_id", "kind", "role", "prompt", "model", "plan_mode_required",
                "cwd", "color", "desired", "joined_at", "budget_usd", "worktree"} <= set(entry)
    alice = status_file(team, "alice")
    assert alice["schema"] == 2 and alice["name"] == "alice" and alice["status"] == "pending"
    assert alice["usage"]["cost_usd"] == 0.0 and alice["restarts"] == 0
    merged = roster.get(roster.load(team, TEAM), "alice")
    assert merged == {**roster.find(config, "alice"),  # type: ignore[dict-item]
                      **{k: v for k, v in alice.items() if k not in ("schema", "name")}}
    # modes: the folder 0700, each status file and its lock 0600
    folder = team.store.paths.members_dir(TEAM)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for path in folder.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert {p.name for p in folder.iterdir()} >= {"alice.json", "alice.json.lock", "bob.json"}


def test_jq_reads_the_status_files(team: Workspace) -> None:
    if shutil.which("jq") is None:
        pytest.skip("jq is not installed")
    roster.update_status(team, TEAM, "bob", lambda m: m.update(status="idle", current_task=3))
    paths = sorted(str(p) for p in team.store.paths.members_dir(TEAM).glob("*.json"))
    done = subprocess.run(["jq", "-s", "map({name, status, current_task})", *paths],
                          capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == [
        {"name": "alice", "status": "pending", "current_task": None},
        {"name": "bob", "status": "idle", "current_task": 3}]


def test_one_only_reads_the_team_as_that_member_sees_it(team: Workspace) -> None:
    roster.update_status(team, TEAM, "bob", lambda m: m.update(status="idle"))
    seen = roster.load(team, TEAM, only="bob")
    assert [m["name"] for m in seen["members"]] == ["bob"]
    assert seen["members"][0]["status"] == "idle" and seen["name"] == TEAM
    assert roster.load(team, TEAM, only="nobody")["members"] == []


# -- the hot path --------------------------------------------------------------------------
def test_a_status_write_touches_one_file_and_never_parses_config_json(
        team: Workspace) -> None:
    config_before = team.store.paths.config(TEAM).read_bytes()
    bob_before = team.store.paths.member_status(TEAM, "bob").read_bytes()
    # a config.json that does not parse: the hot path must not need it
    team.store.paths.config(TEAM).write_bytes(config_before[:40])
    moved = roster.update_status(team, TEAM, "alice",
                                 lambda m: transition(m, Status.ACTIVE, Writer.MEMBER))
    assert moved == ("pending", "active")
    assert status_file(team, "alice")["status"] == "active"
    assert team.store.paths.config(TEAM).read_bytes() == config_before[:40]  # untouched
    assert team.store.paths.member_status(TEAM, "bob").read_bytes() == bob_before
    team.store.paths.config(TEAM).write_bytes(config_before)
    assert roster.get(roster.load(team, TEAM), "alice")["status"] == "active"


def test_a_status_write_for_someone_not_in_the_team_writes_nothing(team: Workspace) -> None:
    called: list[Json] = []
    assert roster.update_status(team, TEAM, "carol", called.append) is None
    assert roster.update_member(team, TEAM, "carol", lambda m, c: called.append(m)) is None
    assert called == [] and not team.store.paths.member_status(TEAM, "carol").exists()


def test_a_status_write_goes_on_while_a_person_holds_the_roster(team: Workspace) -> None:
    """The hot path takes the member's lock only; the person's step, writing back after
    it, changes only what it changed itself and keeps the member's own write."""
    with roster.locked(team, TEAM) as config:
        done = in_another_process(team, """
            def count(m):
                m["usage"]["input_tokens"] += 5
                m["status"] = "active"
            roster.update_status(ws, TEAM, "alice", count)
        """)
        assert done.returncode == 0, done.stderr
        assert status_file(team, "alice")["usage"]["input_tokens"] == 5  # done meanwhile
        alice = roster.get(config, "alice")
        alice["desired"] = "stopped"
        alice["last_error"] = "stopped by a person"
    merged = roster.get(roster.load(team, TEAM), "alice")
    assert merged["desired"] == "stopped" and merged["last_error"] == "stopped by a person"
    assert merged["usage"]["input_tokens"] == 5 and merged["status"] == "active"


def test_update_member_sees_the_spec_and_writes_only_the_status_file(
        team: Workspace) -> None:
    config_before = team.store.paths.config(TEAM).read_bytes()

    def change(m: Json, config: Json) -> str:
        m["desired"] = "ignored"  # a spec field: not this path's to write
        m["pid"] = 4242
        return str(config["state"])

    assert roster.update_member(team, TEAM, "bob", change) == "active"
    assert team.store.paths.config(TEAM).read_bytes() == config_before
    bob = roster.get(roster.load(team, TEAM), "bob")
    assert (bob["pid"], bob["desired"]) == (4242, "running")


# -- a person's step writes back only what changed -----------------------------------------
def test_a_spec_change_rewrites_config_json_only(team: Workspace) -> None:
    statuses = {n: team.store.paths.member_status(TEAM, n).read_bytes() for n in ("alice", "bob")}
    inode = team.store.paths.member_status(TEAM, "alice").stat().st_ino
    actions.set_budget(team, TEAM, 3, member="alice")
    assert roster.get(roster.load(team, TEAM), "alice")["budget_usd"] == 3.0
    assert {n: team.store.paths.member_status(TEAM, n).read_bytes() for n in statuses} == statuses
    assert team.store.paths.member_status(TEAM, "alice").stat().st_ino == inode  # not even replaced


def test_a_live_change_rewrites_only_that_member(team: Workspace) -> None:
    config_before = team.store.paths.config(TEAM).read_bytes()
    bob_inode = team.store.paths.member_status(TEAM, "bob").stat().st_ino
    roster.update(team, TEAM, lambda c: roster.get(c, "alice").update(last_error="x"))
    assert team.store.paths.config(TEAM).read_bytes() == config_before
    assert team.store.paths.member_status(TEAM, "bob").stat().st_ino == bob_inode
    assert status_file(team, "alice")["last_error"] == "x"


def test_a_shutdown_on_behalf_writes_both_files(team: Workspace) -> None:
    done = actions.shutdown(team, TEAM, "bob", reason="done")
    assert done["answered"]
    spec = roster.find(files.read_json(team.store.paths.config(TEAM)) or {}, "bob")
    assert spec is not None and spec["desired"] == "stopped" and "status" not in spec
    assert status_file(team, "bob")["status"] == "shutdown"


def test_a_member_added_and_removed_takes_its_status_file_along(
        team: Workspace, tmp_path: Path) -> None:
    actions.spawn(team, TEAM, "carol", "work", cwd=str(tmp_path))
    assert status_file(team, "carol")["status"] == "pending"
    actions.remove_member(team, TEAM, "carol")
    assert not team.store.paths.member_status(TEAM, "carol").exists()
    assert roster.find(roster.load(team, TEAM), "carol") is None


def test_a_missing_status_file_reads_as_pending_and_a_stray_one_is_ignored(
        team: Workspace) -> None:
    roster.update_status(team, TEAM, "bob", lambda m: m.update(status="idle", restarts=2))
    team.store.paths.member_status(TEAM, "bob").unlink()
    files.write_json(team.store.paths.member_status(TEAM, "ghost"), {"schema": 2, "name": "ghost",
                                                         "status": "idle"})
    config = roster.load(team, TEAM)
    assert roster.names(config) == ["alice", "bob"]
    bob = roster.get(config, "bob")
    assert (bob["status"], bob["restarts"], bob["pid"]) == ("pending", 0, None)
    # a status write for it starts from those defaults, through the roster
    roster.update_status(team, TEAM, "bob", lambda m: m.update(status="starting"))
    assert status_file(team, "bob")["status"] == "starting"
    assert status_file(team, "bob")["usage"]["output_tokens"] == 0


# -- migration from schema 1 ---------------------------------------------------------------
def schema_1(ws: Workspace, *, spent_usd: float | None = None) -> Json:
    """A schema-1 team written by hand, in the shape the cost issue left it: every member's
    live fields in its config.json entry, no members/ folder."""
    for folder in (
        ws.store.paths.team_dir(TEAM),
        ws.store.paths.requests_dir(TEAM),
        ws.store.paths.sessions_dir(TEAM),
        ws.store.paths.tasks_dir(TEAM),
    ):
        files.ensure_dir(folder)
    usage = {"input_tokens": 1200, "output_tokens": 340, "cache_read_input_tokens": 5000,
             "cache_creation_input_tokens": 800, "cost_usd": 0.25}
    config: Json = {
        "schema": 1, "name": TEAM, "description": "by hand", "created_at": 1763675000.0,
        "state": "active", "budget_usd": 20.0, "repo": None, "worktrees": False,
        "members": [
            {"name": "backend", "agent_id": f"backend@{TEAM}", "kind": "teammate",
             "role": "backend engineer", "prompt": "Handle the backend",
             "model": "claude-sonnet-5-5", "plan_mode_required": False, "cwd": "/tmp",
             "color": "cyan", "desired": "running", "status": "sleeping", "pid": None,
             "pid_create_time": None, "joined_at": 1763675001.0, "restarts": 3,
             "started_at": 1763675100.5, "restart_at": None,
             "last_exit": {"code": 75, "signal": None, "at": 1763675200.0},
             "last_error": "model API: 529 overloaded", "current_task": 7,
             "budget_usd": 5.0, "usage": usage, "restart_requested_at": 1763675050.0,
             "worktree": None},
            {"name": "lead", "agent_id": f"lead@{TEAM}", "kind": "lead", "role": "",
             "prompt": "Lead", "model": None, "plan_mode_required": False, "cwd": "/tmp",
             "color": "yellow", "desired": "stopped", "status": "shutdown", "pid": None,
             "pid_create_time": None, "joined_at": 1763675002.0, "restarts": 0,
             "last_exit": None, "last_error": None, "current_task": None,
             "budget_usd": None,
             "usage": {**usage, "cost_usd": 0.5}},
        ]}
    if spent_usd is not None:
        config["spent_usd"] = spent_usd
    files.write_json(ws.store.paths.config(TEAM), config)
    return config


def assert_migrated(ws: Workspace, old: Json) -> None:
    """Read (migrating it if need be): the merged view is the schema-1 roster field for
    field, and schema 2 is on disk."""
    merged = roster.load(ws, TEAM)
    config = files.read_json(ws.store.paths.config(TEAM))
    assert config is not None and config["schema"] == 2 and "spent_usd" not in config
    for entry in config["members"]:
        assert not set(entry) & set(roster.STATUS_FIELDS)
    expected = {k: v for k, v in old.items() if k != "spent_usd"}
    assert merged == {**expected, "schema": 2}
    for m in old["members"]:
        on_disk = status_file(ws, m["name"])
        assert on_disk == {"schema": 2, "name": m["name"],
                           **{k: m[k] for k in roster.STATUS_FIELDS if k in m}}


def test_a_schema_1_roster_is_migrated_by_its_first_reader_keeping_everything(
        ws: Workspace) -> None:
    old = schema_1(ws)
    assert_migrated(ws, old)
    # spend.json did not exist: the members' costs summed
    assert files.read_json(ws.store.paths.spend(TEAM)) == {"schema": 1, "spent_usd": 0.75}
    assert stat.S_IMODE(ws.store.paths.members_dir(TEAM).stat().st_mode) == 0o700
    config_after = ws.store.paths.config(TEAM).read_bytes()
    roster.load(ws, TEAM)  # once: the next reader finds schema 2 and writes nothing
    assert ws.store.paths.config(TEAM).read_bytes() == config_after


def test_migration_takes_the_schema_1_spent_usd_and_keeps_an_existing_spend(
        ws: Workspace) -> None:
    old = schema_1(ws, spent_usd=3.5)
    assert_migrated(ws, old)
    assert files.read_json(ws.store.paths.spend(TEAM)) == {"schema": 1, "spent_usd": 3.5}
    ws2 = Workspace.at(ws.root / "other")
    ws2.root.mkdir()
    schema_1(ws2)
    files.write_json(ws2.store.paths.spend(TEAM), {"schema": 1, "spent_usd": 9.0})
    roster.load(ws2, TEAM)
    assert files.read_json(ws2.store.paths.spend(TEAM)) == {"schema": 1, "spent_usd": 9.0}


def test_a_hot_path_write_migrates_too(ws: Workspace) -> None:
    old = schema_1(ws)
    roster.update_status(ws, TEAM, "backend", lambda m: m.update(status="starting"))
    assert status_file(ws, "backend")["status"] == "starting"
    assert status_file(ws, "backend")["usage"] == old["members"][0]["usage"]
    assert files.read_json(ws.store.paths.config(TEAM))["schema"] == 2  # type: ignore[index]


def test_a_migration_that_fails_half_way_leaves_schema_1_whole(ws: Workspace) -> None:
    """The second member's file cannot be written (a folder stands where it goes): the
    first is written, config.json is not touched; once the obstacle is gone, the next
    reader migrates it all."""
    old = schema_1(ws)
    before = ws.store.paths.config(TEAM).read_bytes()
    blocker = ws.store.paths.member_status(TEAM, "lead")
    blocker.mkdir(parents=True)
    with pytest.raises(OSError):
        roster.load(ws, TEAM)
    assert ws.store.paths.config(TEAM).read_bytes() == before  # schema 1, whole
    assert ws.store.paths.member_status(TEAM, "backend").is_file()  # it did get that far
    assert not ws.store.paths.spend(TEAM).exists()
    blocker.rmdir()
    assert_migrated(ws, old)


def test_a_process_killed_before_config_json_is_replaced_leaves_schema_1_whole(
        ws: Workspace) -> None:
    """A real death at the last step: every status file and spend.json are written, and
    the process dies (os._exit, from an audit hook: os.replace raises "os.rename") as it
    is about to replace config.json.
    The next reader, here `teamctl status --json`, migrates again."""
    old = schema_1(ws)
    before = ws.store.paths.config(TEAM).read_bytes()
    done = in_another_process(ws, """
        import os, sys
        def die(event, args):
            if event == "os.rename" and str(args[1]).endswith("config.json"):
                os._exit(9)
        sys.addaudithook(die)
        roster.load(ws, TEAM)
    """)
    assert done.returncode == 9, done.stderr  # it died where it was meant to
    assert ws.store.paths.config(TEAM).read_bytes() == before
    assert {p.name for p in ws.store.paths.members_dir(TEAM).glob("*.json")} == {"backend.json",
                                                                     "lead.json"}
    assert files.read_json(ws.store.paths.spend(TEAM)) == {"schema": 1, "spent_usd": 0.75}
    shown = teamctl(ws.root, "status", TEAM, "--json")
    assert shown.returncode == 0, shown.stderr
    members = {m["name"]: m for t in json.loads(shown.stdout)["teams"] for m in t["members"]}
    assert members["backend"]["restarts"] == 3 and members["backend"]["usage"]["cost_usd"] \
        == 0.25 and members["backend"]["last_exit"]["code"] == 75
    assert_migrated(ws, old)


def test_status_json_shows_the_same_member_before_and_after_the_split(
        ws: Workspace) -> None:
    """`teamctl status --json` of a schema-1 team (migrated as it reads) and of the same
    team read again: the same members, field for field."""
    schema_1(ws)
    first = teamctl(ws.root, "status", TEAM, "--json")
    again = teamctl(ws.root, "status", TEAM, "--json")
    assert first.returncode == 0 and again.returncode == 0, first.stderr

    def members(out: bytes) -> list[Json]:
        shown = [copy.deepcopy(m) for t in json.loads(out)["teams"] for m in t["members"]]
        for m in shown:
            m.pop("uptime", None)
        return shown

    assert members(first.stdout) == members(again.stdout)
    backend = members(first.stdout)[0]
    assert (backend["status"], backend["restarts"], backend["desired"]) == \
        ("sleeping", 3, "running")


def test_a_roster_of_an_unknown_schema_is_refused(ws: Workspace) -> None:
    schema_1(ws)
    doc = files.read_json(ws.store.paths.config(TEAM)) or {}
    files.write_json(ws.store.paths.config(TEAM), {**doc, "schema": 3})
    with pytest.raises(TeamdError, match="schema 3"):
        roster.load(ws, TEAM)
    assert not ws.store.paths.members_dir(TEAM).exists()


# -- the teammate's current_task -----------------------------------------------------------
#: task files opened while `OPENED` is a list (an audit hook: what `current_task` reads)
OPENED: list[str] | None = None


def _count_task_opens(event: str, args: tuple[object, ...]) -> None:
    if OPENED is not None and event == "open" and f"/.tasks/{TEAM}/" in str(args[0]):
        OPENED.append(os.path.basename(str(args[0])))


sys.addaudithook(_count_task_opens)


def task_files_read(step: Callable[[], object]) -> tuple[object, list[str]]:
    global OPENED
    OPENED = []
    try:
        return step(), OPENED
    finally:
        OPENED = None


def test_current_task_reads_only_the_tasks_the_member_holds(team: Workspace) -> None:
    """Computed from the tasks the member's session says it took, reading only those
    files, whatever the size of the board; a task it let go is not read again until it
    is claimed again."""
    from teamd.agent.loop import Member

    for i in range(30):
        board.create(team, TEAM, f"task {i + 1}")
    alice = Member(team, TEAM, "alice")
    assert task_files_read(alice.standing.current_task) == (None, [])

    def take(task_id: int) -> None:
        alice.session.append({"type": "user", "claimed": task_id, "content": [
            {"type": "text", "text": f"<auto-claimed>Task #{task_id}</auto-claimed>"}]})

    assert board.claim(team, TEAM, "alice", 7) is not None
    take(7)
    assert board.claim(team, TEAM, "alice", 4) is not None
    take(4)
    assert task_files_read(alice.standing.current_task) == (4, ["4.json", "7.json"])
    board.update(team, TEAM, 4, status="completed", actor="alice")
    assert task_files_read(alice.standing.current_task) == (7, ["4.json", "7.json"])
    assert task_files_read(alice.standing.current_task) == (7, ["7.json"])  # 4 let go
    # taken up again (reopened, claimed once more): read again
    board.update(team, TEAM, 4, status="in_progress", actor="alice")
    take(4)
    assert task_files_read(alice.standing.current_task) == (4, ["4.json", "7.json"])


def test_a_reader_as_the_team_is_deleted_never_brings_its_folder_back(
        team: Workspace) -> None:
    """The team folder is renamed away (as `delete` does) at the very moment a reader goes
    to take the roster lock — an audit hook does it at the reader's first touch of the lock
    (creating its folder, or opening its file). The reader is told the team is unknown, and
    no `.teams/crew/` comes back (`filelock` alone would make the folder again)."""
    archived = team.store.paths.teams_dir / "crew-archived"
    done = in_another_process(
        team,
        f"""
        import os, sys
        from teamd.errors import BadInput
        team_dir = {str(team.store.paths.team_dir(TEAM))!r}
        lock = {str(team.store.paths.config(TEAM))!r} + ".lock"
        moved = []
        def delete_now(event, args):
            touches = (event == "os.mkdir" and str(args[0]) == team_dir) or (
                event == "open" and str(args[0]) == lock)
            if touches and not moved:
                moved.append(True)
                os.replace(team_dir, {str(archived)!r})
        sys.addaudithook(delete_now)
        try:
            roster.load(ws, TEAM)
        except BadInput as exc:
            print("refused:", exc)
        print("moved" if moved else "never touched")
    """,
    )
    assert done.returncode == 0, done.stderr
    assert "refused: unknown team 'crew'" in done.stdout and "moved" in done.stdout
    assert archived.is_dir() and not team.store.paths.team_dir(TEAM).exists()
