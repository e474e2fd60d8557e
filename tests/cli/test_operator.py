"""The operator's day (issue 8): `delete` beside a running supervisor, Ctrl-C in a wait,
`logs` like journalctl, team-wide verbs, completion and help — through the real console
script where exit codes, signals and memory matter."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import psutil
import pytest

from teamd import actions, board, events, files, requests, roster
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import Reader, make_live, make_team, running_teamd, wait_until
from tests.helpers_proc import TEAMCTL, clean_env, teamctl

TEAM = "t"
T = 20.0


# -- helpers -----------------------------------------------------------------------------
@pytest.fixture
def team(ws: Workspace) -> str:
    return make_team(ws, None, "alice", "bob", "carol", team=TEAM, prompt="work")


def run(ws: Workspace, *args: str, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[bytes]:
    return teamctl(ws.root, *args, env=env or clean_env())


def out_lines(done: subprocess.CompletedProcess[bytes]) -> list[str]:
    return done.stdout.decode().splitlines()


def popen(ws: Workspace, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([str(TEAMCTL), "--root", str(ws.root), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_env())


def emit_at(ws: Workspace, ts: float, event: str, member: str | None = None,
            **fields: object) -> None:
    rec: files.Json = {"ts": ts, "event": event, **fields}
    if member:
        rec["member"] = member
    files.append_jsonl(ws.store.paths.events(TEAM), [rec])


# -- delete beside a running supervisor -------------------------------------------------------
@pytest.mark.timeout(240)
def test_delete_with_a_supervisor_running_never_tracebacks(ws: Workspace) -> None:
    with ScriptedServer({"rules": []}) as srv, running_teamd(ws, srv.url):
        for i in range(20):
            assert run(ws, "create", "t2").returncode == 0
            if i % 5 == 0:  # now and then a live member to shut down first
                assert run(ws, "spawn", "t2", "alice", "--prompt", "wait").returncode == 0
                wait_until(lambda: roster.is_live(roster.get(roster.load(ws, "t2"),
                                                             "alice")), T, "alice up")
            done = run(ws, "delete", "t2")
            err = done.stderr.decode()
            assert done.returncode == 0 and "Traceback" not in err and not err, (i, err)
            assert out_lines(done)[-1].startswith("deleted team t2")
            assert (
                not ws.store.paths.team_dir("t2").exists()
                and not ws.store.paths.tasks_dir("t2").exists()
            )
    archives = ws.store.paths.archives("t2")
    assert len(archives) == 20  # every round kept its post-mortem
    for folder in archives:
        journal = files.read_jsonl(folder / "events.jsonl").records
        assert journal[0]["event"] == "team_created"
        assert journal[-1]["event"] == "team_deleted"
    # no half-removed team folder anywhere
    assert sorted(p.name for p in ws.store.paths.teams_dir.iterdir()
                  if p.name not in ("teamd.lock", "teamd.json")) == [".archive"]


# -- Ctrl-C in a wait ----------------------------------------------------------------------
@pytest.mark.parametrize("args,ready", [
    (["shutdown", TEAM, "alice", "--wait"], "asked alice to shut down"),
    (["delete", TEAM], "asked alice to shut down"),
    (["stop", TEAM, "alice", "--force"], "stopping alice"),
    (["down", TEAM, "--wait"], "asked alice to shut down"),
])
def test_ctrl_c_in_a_wait_exits_130_saying_what_is_pending(
        ws: Workspace, team: str, live_process: psutil.Process, args: list[str],
        ready: str) -> None:
    make_live(ws, TEAM, "alice", live_process, "active")  # live, and nobody will ever answer for it
    proc = popen(ws, *args)
    reader = Reader(proc)
    reader.wait_for(ready)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(T) == 130
    assert proc.stderr is not None
    err = proc.stderr.read().decode().strip().splitlines()
    assert len(err) == 1 and "interrupted" in err[0], err
    assert "Traceback" not in err[0]
    assert "alice" in err[0]
    pending = requests.list_requests(ws, TEAM, pending_only=True)
    if args[0] != "stop":
        assert [r["recipient"] for r in pending] == ["alice"]
        assert pending[0]["request_id"] in err[0] and "pending" in err[0]
    if args[0] == "delete":
        assert roster.load(ws, TEAM)["state"] == "deleting"  # it stays deleting
    assert live_process.is_running()


# -- logs ---------------------------------------------------------------------------------
def test_logs_n_counts_the_events_shown_after_the_name_filter(ws: Workspace, team: str
                                                               ) -> None:
    for i in range(30):
        events.emit(ws, TEAM, "tick", member=("alice", "bob", "carol")[i % 3], n=i)
    done = run(ws, "logs", TEAM, "-n", "5", "--json")
    assert [json.loads(x)["n"] for x in out_lines(done)] == [25, 26, 27, 28, 29]
    done = run(ws, "logs", TEAM, "alice", "bob", "-n", "5", "--json")
    shown = [json.loads(x) for x in out_lines(done)]
    assert [r["n"] for r in shown] == [22, 24, 25, 27, 28]
    assert {r["member"] for r in shown} == {"alice", "bob"}
    # the plain view: one line per event, the member's name on it
    plain = out_lines(run(ws, "logs", TEAM, "carol", "-n", "2"))
    assert len(plain) == 2 and all(" carol " in x and "tick" in x for x in plain)
    assert out_lines(run(ws, "logs", TEAM, "-n", "0")) == []
    assert run(ws, "logs", TEAM, "nobody").returncode == 2


def test_logs_messages_count_for_sender_and_recipient(ws: Workspace, team: str) -> None:
    actions.send(ws, TEAM, "alice", "hello alice")
    shown = [json.loads(x) for x in out_lines(run(ws, "logs", TEAM, "alice", "--json"))]
    assert any(r["event"] == "message" and r["message"]["content"] == "hello alice"
               for r in shown)


def test_logs_since_takes_iso_clock_times_and_ages(ws: Workspace, team: str) -> None:
    now = time.time()
    emit_at(ws, now - 3 * 3600, "tick", "alice", n="3h ago")
    emit_at(ws, now - 1800, "tick", "alice", n="30m ago")
    emit_at(ws, now - 30, "tick", "alice", n="30s ago")

    def shown(since: str) -> list[str]:
        done = run(ws, "logs", TEAM, "alice", "--since", since, "--json")
        assert done.returncode == 0, done.stderr
        return [json.loads(x)["n"] for x in out_lines(done) if '"tick"' in x]

    assert shown("10m") == ["30s ago"]
    assert shown("2h") == ["30m ago", "30s ago"]
    assert shown("90s") == ["30s ago"]
    iso = datetime.fromtimestamp(now - 3600).isoformat(timespec="seconds")
    assert shown(iso) == ["30m ago", "30s ago"]
    if datetime.fromtimestamp(now - 3600).date() == datetime.fromtimestamp(now).date():
        clock = datetime.fromtimestamp(now - 3600).strftime("%H:%M")
        assert shown(clock) == ["30m ago", "30s ago"]
    bad = run(ws, "logs", TEAM, "--since", "yesterday-ish")
    assert bad.returncode == 2 and b"--since" in bad.stderr
    # -n and --since together: the last N of those since
    assert [json.loads(x)["n"] for x in out_lines(
        run(ws, "logs", TEAM, "alice", "--since", "2h", "-n", "1", "--json"))] == ["30s ago"]


def test_logs_is_quieter_by_default_and_shows_tool_errors(ws: Workspace, team: str) -> None:
    events.emit(ws, TEAM, "model_call", member="alice", model="m", input_tokens=1)
    actions.send(ws, TEAM, "lead", "alice is idle", type_="idle_notification", sender="alice")
    events.emit(ws, TEAM, "tool_call", member="alice", tool="bash", input={"command": "x"},
                ok=False, ms=3, error="exit code 127: x: not found")
    quiet = run(ws, "logs", TEAM).stdout.decode()
    assert "model_call" not in quiet and "alice is idle" not in quiet
    assert "FAILED: exit code 127: x: not found" in quiet
    loud = run(ws, "logs", TEAM, "-v").stdout.decode()
    assert "model_call" in loud and "alice is idle" in loud


def test_logs_reads_rotated_files_oldest_first(ws: Workspace, team: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    env = {**clean_env(), "TEAMD_EVENTS_MAX_BYTES": "400", "TEAMD_EVENTS_KEEP": "100"}
    with monkeypatch.context() as patch:
        patch.setenv("TEAMD_EVENTS_MAX_BYTES", "400")
        patch.setenv("TEAMD_EVENTS_KEEP", "100")
        for i in range(60):
            events.emit(ws, TEAM, "tick", member="alice", n=i)
    assert len(list(ws.store.paths.team_dir(TEAM).glob("events.*.jsonl"))) > 5
    ticks = [json.loads(x)["n"] for x in out_lines(run(ws, "logs", TEAM, "--json", env=env))
             if '"tick"' in x]
    assert ticks == list(range(60))
    last = [json.loads(x)["n"] for x in out_lines(run(ws, "logs", TEAM, "-n", "25", "--json",
                                                      env=env))]
    assert last == list(range(35, 60))  # -n reaches back across rotated files


def test_logs_follow_starts_at_the_end_and_ends_when_the_team_is_deleted(
        ws: Workspace, team: str) -> None:
    for i in range(10):
        events.emit(ws, TEAM, "tick", member="alice", n=i)
    plain = popen(ws, "logs", TEAM, "alice", "-f")
    last2 = popen(ws, "logs", TEAM, "alice", "-n", "2", "-f")
    plain_out, last2_out = Reader(plain), Reader(last2)
    last2_out.wait_for("n=9")
    # both are following by now? the -n one has shown its history; the plain one shows
    # none, so wait until it has the journal open: a marker event it must print
    wait_until(lambda: emit_and_seen(ws, plain_out), T, "the follower to be reading")
    events.emit(ws, TEAM, "tick", member="alice", n=100)
    events.emit(ws, TEAM, "tick", member="bob", n=200)
    plain_out.wait_for("n=100")
    last2_out.wait_for("n=100")
    actions.begin_delete(ws, TEAM)
    assert actions.finish_delete(ws, TEAM)
    assert plain.wait(T) == 0 and last2.wait(T) == 0
    for reader in (plain_out, last2_out):
        reader.thread.join(T)
        assert reader.lines[-1] == f"-- team {TEAM} was deleted --"
        assert not any("n=200" in x for x in reader.lines)  # bob's: filtered out
    assert not any(re.search(r"n=[0-9]$", x) for x in plain_out.lines)  # no history
    ticks = [x for x in last2_out.lines if "tick" in x]
    assert ["n=8" in ticks[0], "n=9" in ticks[1]] == [True, True]


def emit_and_seen(ws: Workspace, reader: Reader) -> bool:
    events.emit(ws, TEAM, "probe", member="alice")
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        if any("probe" in x for x in reader.lines):
            return True
        time.sleep(0.02)
    return False


def test_logs_of_a_deleted_team_reads_its_latest_archive(ws: Workspace, team: str) -> None:
    events.emit(ws, TEAM, "tick", member="alice", n="first life")
    actions.remove_team(ws, TEAM)
    actions.create_team(ws, TEAM)
    events.emit(ws, TEAM, "tick", n="second life")
    actions.remove_team(ws, TEAM)
    done = run(ws, "logs", TEAM, "--json")
    assert done.returncode == 0
    shown = [json.loads(x) for x in out_lines(done)]
    assert [r.get("n") for r in shown if r["event"] == "tick"] == ["second life"]
    assert shown[-1]["event"] == "team_deleted"
    assert (
        b"was deleted" in done.stderr
        and str(ws.store.paths.archives(TEAM)[-1]).encode() in done.stderr
    )
    assert run(ws, "logs", "never-was").returncode == 2


@pytest.mark.timeout(180)
def test_logs_n_reads_only_the_tail_of_a_large_journal(ws: Workspace, team: str) -> None:
    # ~40 MB of small events, written in one go (as a busy team's journal would hold)
    line = b'{"ts":1.0,"event":"tick","member":"alice","n":%d,"pad":"' + b"x" * 120 + b'"}\n'
    with open(ws.store.paths.events(TEAM), "ab") as f:
        for chunk in range(0, 250_000, 10_000):
            f.write(b"".join(line % i for i in range(chunk, chunk + 10_000)))
    size = ws.store.paths.events(TEAM).stat().st_size
    assert size > 40_000_000
    # follow keeps the process alive after its history: /proc says how much it read
    proc = popen(ws, "logs", TEAM, "-n", "100", "--json", "-f")
    reader = Reader(proc)
    reader.wait_for('"n":249999')
    io = Path(f"/proc/{proc.pid}/io").read_text()
    read_bytes = int(re.search(r"rchar: (\d+)", io).group(1))  # type: ignore[union-attr]
    rss = psutil.Process(proc.pid).memory_info().rss
    proc.send_signal(signal.SIGINT)
    assert proc.wait(T) == 0  # Ctrl-C ends a follow: exit 0
    assert len([x for x in reader.lines if '"tick"' in x]) == 100
    assert read_bytes < size / 4, read_bytes  # the tail, not the journal
    assert rss < 150 * 2**20, rss
    # a full read streams too: its peak memory does not grow with the journal (a whole-file
    # read of these 40 MB takes several hundred MB). Measured from a small parent: a child
    # spawned straight from pytest inherits pytest's own peak in its ru_maxrss.
    # Every team's journals interleaved (issue 19) stream the same way.
    actions.create_team(ws, "other")
    for which in ([TEAM], []):
        done = subprocess.run([sys.executable, "-c", PEAK_RSS, str(TEAMCTL), "--root",
                               str(ws.root), "logs", *which], capture_output=True, text=True,
                              env=clean_env(), timeout=T * 6)
        code, peak_kib = map(int, done.stdout.split())
        assert code == 0, done.stderr
        assert peak_kib * 1024 < 100 * 2**20, (which, peak_kib)


#: runs argv[1:] as a child with stdout to /dev/null; prints its exit code and peak RSS (KiB)
PEAK_RSS = """
import os, sys
pid = os.fork()
if pid == 0:
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


# -- team-wide verbs -------------------------------------------------------------------------
def test_down_up_restart_and_remove_a_whole_team(ws: Workspace, team: str) -> None:
    board.create(ws, TEAM, "bob's task", owner="bob")
    board.claim(ws, TEAM, "bob", 1)
    done = run(ws, "down", TEAM, "--wait")
    assert done.returncode == 0, done.stderr
    config = roster.load(ws, TEAM)
    assert {(m["desired"], m["status"]) for m in config["members"]} == {("stopped", "shutdown")}
    answered = requests.list_requests(ws, TEAM)
    assert sorted(r["recipient"] for r in answered) == ["alice", "bob", "carol"]
    assert {r["status"] for r in answered} == {"approved"}
    done = run(ws, "up", TEAM)
    assert done.returncode == 0 and b"alice, bob, carol" in done.stdout
    config = roster.load(ws, TEAM)
    assert {(m["desired"], m["status"]) for m in config["members"]} == {("running", "pending")}
    assert out_lines(run(ws, "up", TEAM)) == ["every member is already up"]
    before = {m["name"]: m["restart_requested_at"] for m in config["members"]}
    assert run(ws, "restart", TEAM).returncode == 0
    after = {m["name"]: m["restart_requested_at"] for m in roster.load(ws, TEAM)["members"]}
    assert all(after[n] > before[n] for n in before)
    board.claim(ws, TEAM, "bob", 1)
    done = run(ws, "remove", TEAM, "bob")
    assert done.returncode == 0, done.stderr
    assert roster.names(roster.load(ws, TEAM)) == ["alice", "carol"]
    assert board.get(ws, TEAM, 1)["owner"] is None  # released
    assert board.get(ws, TEAM, 1)["status"] == "pending"
    assert [e["member"] for e in events.read(ws, TEAM) if e["event"] == "member_removed"] \
        == ["bob"]
    assert run(ws, "remove", TEAM, "bob").returncode == 2


def test_remove_of_a_live_member_times_out_without_removing_it(
        ws: Workspace, team: str, live_process: psutil.Process) -> None:
    make_live(ws, TEAM, "alice", live_process, "active")
    done = run(ws, "remove", TEAM, "alice", "--timeout", "0.5")
    assert done.returncode == 1 and b"timed out" in done.stderr
    assert "alice" in roster.names(roster.load(ws, TEAM))


def test_task_add_owner_gives_the_task_from_the_start(ws: Workspace, team: str) -> None:
    done = run(ws, "task", "add", TEAM, "the login page", "--owner", "alice", "--json")
    task = json.loads(done.stdout)
    assert task["owner"] == "alice" and task["status"] == "pending"
    created = [e for e in events.read(ws, TEAM) if e["event"] == "task_created"]
    assert created[-1]["owner"] == "alice"
    bad = run(ws, "task", "add", TEAM, "x", "--owner", "nobody")
    assert bad.returncode == 2 and board.list_tasks(ws, TEAM) == [task]


# -- help and completion -------------------------------------------------------------------
def test_completion_offers_teams_members_tasks_and_requests(ws: Workspace, team: str) -> None:
    actions.create_team(ws, "other")
    board.create(ws, TEAM, "first")
    rid = actions.shutdown(ws, TEAM, "alice")["request"]["request_id"]
    assert rid  # answered for alice at once (no process), so not pending: not offered

    def complete(line: str) -> list[str]:
        words = line.split(" ")
        env = {**clean_env(), "_TEAMCTL_COMPLETE": "complete_bash", "COMP_WORDS": line,
               "COMP_CWORD": str(len(words) - 1)}
        done = subprocess.run([str(TEAMCTL)], env=env, capture_output=True, timeout=30,
                              check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout.decode().split()

    root = str(ws.root)
    assert complete(f"teamctl --root {root} logs ") == ["other", TEAM]
    assert complete(f"teamctl --root {root} attach {TEAM} ") == ["alice", "bob", "carol"]
    assert complete(f"teamctl --root {root} logs {TEAM} alice ") == ["bob", "carol"]
    assert complete(f"teamctl --root {root} shutdown {TEAM} c") == ["carol"]
    assert complete(f"teamctl --root {root} task show {TEAM} ") == ["1"]
    assert complete(f"teamctl --root {root} sta") == ["status"]
    assert complete(f"teamctl --root {root} logs nope ") == []


def test_help_version_and_bare_teamctl(ws: Workspace) -> None:
    bare = subprocess.run([str(TEAMCTL)], capture_output=True, timeout=30, check=False)
    assert bare.returncode == 0 and b"Usage: teamctl" in bare.stdout + bare.stderr
    version = run(ws, "--version")
    assert version.returncode == 0 and re.fullmatch(rb"teamctl \d+\.\d+\.\d+\n", version.stdout)
    listing = run(ws, "-h").stdout.decode().split("Commands:")[1]
    commands = re.findall(r"^  (\w+) ", listing, re.M)
    assert {"up", "down", "remove", "attach", "transcript", "logs"} <= set(commands)
    for name in commands:
        args = ["task", "add"] if name == "task" else [name]
        done = run(ws, *args, "-h")
        assert done.returncode == 0
        assert b"Example" in done.stdout, name  # every command teaches by example
    wrong = run(ws, "stauts")
    assert wrong.returncode == 2 and b"Did you mean 'status'" in wrong.stderr


def test_a_removed_member_spawned_again_starts_afresh(ws: Workspace, team: str) -> None:
    """CONTRACT §4/§6: `remove` takes a member out for good. The same name spawned again
    starts with its own prompt and no history, and a plan the old one left pending is
    answered `rejected` (`removed`) and blocks nothing of the new one."""
    def submit(plan: str) -> dict[str, object]:
        return {"content": [{"type": "tool_use", "name": "SubmitPlan", "input": {"plan": plan}}]}

    with ScriptedServer({"rules": [
        {"agent": "dave", "contains": "old prompt", "reply": submit("old plan")},
        {"agent": "dave", "contains": "new prompt", "reply": submit("new plan")},
    ], "default": {"content": [{"type": "text", "text": "Waiting."}]}}) as server:
        actions.spawn(ws, TEAM, "dave", "the old prompt", plan_mode=True)

        def plans() -> list[files.Json]:
            return [r for r in requests.list_requests(ws, TEAM)
                    if r["kind"] == "plan_approval" and r["sender"] == "dave"]

        def idle_with(count: int) -> bool:
            dave = roster.find(roster.load(ws, TEAM), "dave")
            return len(plans()) == count and dave is not None and dave["status"] == "idle"

        with running_teamd(ws, server.url, idle_timeout=60):
            wait_until(lambda: idle_with(1), T, "the old plan pending, dave idle")
            [old] = plans()
            assert old["status"] == "pending"
            done = run(ws, "remove", TEAM, "dave", "--timeout", str(T))
            assert done.returncode == 0, done.stderr
            old = requests.get(ws, TEAM, old["request_id"])
            assert (old["status"], old["answer_reason"]) == ("rejected", "removed")
            # the old history and inbox are set aside, for a person to read
            assert not ws.store.paths.session(TEAM, "dave").exists()
            assert not ws.store.paths.inbox(TEAM, "dave").exists()
            [kept] = list(ws.store.paths.removed_dir(TEAM).iterdir())
            assert kept.name.startswith("dave-") and kept.stat().st_mode & 0o777 == 0o700
            assert "the old prompt" in (kept / "session.jsonl").read_text()
            done = run(ws, "spawn", TEAM, "dave", "--prompt", "the new prompt", "--plan-mode")
            assert done.returncode == 0, done.stderr
            wait_until(lambda: idle_with(2), T, "the new plan submitted, dave idle")
        new = [r for r in plans() if r["request_id"] != old["request_id"]]
        assert [(r["status"], r["plan"]) for r in new] == [("pending", "new plan")]
        first = next(r for r in server.requests if r["agent"] == "dave"
                     and "the new prompt" in json.dumps(r["body"]["messages"]))
        assert "the old prompt" not in json.dumps(first["body"]["messages"])
        session = files.read_jsonl(ws.store.paths.session(TEAM, "dave")).records
        assert session[0]["content"][0]["text"] == "the new prompt"
        assert not any("the old prompt" in json.dumps(rec) or "old plan" in json.dumps(rec)
                       for rec in session)
    assert run(ws, "transcript", TEAM, "dave").returncode == 0
