"""The CLI's small promises (issue 19, CONTRACT §9): shell completion of names, `logs` as
journalctl is used (--full, dates, --since/--until, -g, every team, removed members),
`inbox --type/--no-idle` and its Ctrl-C, argument help, `teamctl config`, an empty `send`,
a root that is not there, member process titles, a shutdown asked without a reason, and
"did you mean". Every one through the installed `teamctl` (or `teamd`) as a subprocess."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from teamd import actions, board, events, files, inbox, requests, roster
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import (
    Reader,
    T,
    make_team,
    running_teamd,
    wait_status,
)
from tests.helpers_proc import TEAMCTL, clean_env, teamctl

TEAM = "shop"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def team(ws: Workspace) -> str:
    return make_team(ws, None, "alice", "bob", team=TEAM, prompt="work")


def run(ws: Workspace, *args: str, env: dict[str, str] | None = None,
        stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return teamctl(ws.root, *args, env=env or clean_env(), input=stdin)


def out(done: subprocess.CompletedProcess[bytes]) -> list[str]:
    assert done.returncode == 0, done.stderr
    return done.stdout.decode().splitlines()


def emit_at(ws: Workspace, ts: float, team: str = TEAM, member: str = "alice",
            **fields: Any) -> None:
    files.append_jsonl(ws.store.paths.events(team), [{"ts": ts, "event": "tick", "member": member,
                                          **fields}])


# -- completion ----------------------------------------------------------------------------
def complete(line: str, shell: str, env: dict[str, str] | None = None) -> list[str]:
    """What the real completion entry point offers for `line` (the cursor at its end), as
    typer's bash and zsh scripts ask it."""
    words = line.split(" ")
    extra = {"COMP_WORDS": line, "COMP_CWORD": str(len(words) - 1)} if shell == "bash" \
        else {"_TYPER_COMPLETE_ARGS": line}
    done = subprocess.run([str(TEAMCTL)], env={**(env or clean_env()), **extra,
                                               "_TEAMCTL_COMPLETE": f"complete_{shell}"},
                          capture_output=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode()
    if shell == "bash":
        return text.split()
    # zsh: _arguments '*: :(("alice" "bob":"help"))', or _files for nothing
    return [part.split('"')[1] for part in text.split("\n") if part.count('"') >= 2] \
        if "_arguments" in text else []


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_offers_teams_members_tasks_and_requests(
        ws: Workspace, team: str, shell: str) -> None:
    actions.create_team(ws, "other")
    board.create(ws, TEAM, "the login page")
    rid = requests.open_request(ws, TEAM, "plan_approval", "alice", "lead",
                                plan="p")["request_id"]
    at = f"teamctl --root {ws.root}"
    assert complete(f"{at} status ", shell) == ["other", TEAM]
    assert complete(f"{at} board s", shell) == [TEAM]
    assert complete(f"{at} send {TEAM} ", shell) == ["alice", "bob", "lead"]
    assert complete(f"{at} send {TEAM} alice hi --sender ", shell) == ["alice", "bob", "lead"]
    # an option waiting for its value: click gives up on the line, completion does not
    assert complete(f"{at} budget {TEAM} 3 --member ", shell) == ["alice", "bob"]
    assert complete(f"{at} budget {TEAM} --member b", shell) == ["bob"]
    assert complete(f"{at} task add {TEAM} x --owner ", shell) == ["alice", "bob"]
    assert complete(f"{at} task update {TEAM} 1 --owner a", shell) == ["alice"]
    assert complete(f"{at} task show {TEAM} ", shell) == ["1"]
    assert complete(f"{at} approve {TEAM} ", shell) == [rid]
    assert complete(f"{at} logs {TEAM} alice ", shell) == ["bob"]
    assert complete(f"{at} inbox {TEAM} ", shell) == ["alice", "bob", "lead"]
    # the root from the environment when the line names none; nothing from a wrong one
    env = {**clean_env(), "TEAMD_ROOT": str(ws.root)}
    assert complete(f"teamctl send {TEAM} a", shell, env) == ["alice"]
    assert complete(f"teamctl --root {ws.root}/nowhere status ", shell, env) == []


# -- logs ------------------------------------------------------------------------------------
def test_logs_full_prints_values_whole_and_dates_lines_not_from_today(
        ws: Workspace, team: str) -> None:
    long = "word " * 60 + "THE-END"
    actions.send(ws, TEAM, "alice", long)
    cut = [x for x in out(run(ws, "logs", TEAM)) if "lead → alice" in x]
    assert len(cut) == 1 and cut[0].endswith("…") and "THE-END" not in cut[0]
    for flag in ("--full", "-l"):
        whole = [x for x in out(run(ws, "logs", TEAM, flag)) if "lead → alice" in x]
        assert whole[0].endswith("THE-END"), whole
    emit_at(ws, time.time() - 3 * 86400, n="old")
    old = [x for x in out(run(ws, "logs", TEAM)) if " tick " in x]
    day = time.strftime("%Y-%m-%d", time.localtime(time.time() - 3 * 86400))
    assert old[0].startswith(f"{day} ") and "n=\"old\"" in old[0]
    today = next(x for x in out(run(ws, "logs", TEAM)) if "lead → alice" in x)
    assert today[2] == ":" and today[:8].replace(":", "").isdigit()  # HH:MM:SS only


def test_logs_since_and_until_filter_and_do_not_stop_at_an_out_of_order_line(
        ws: Workspace, team: str) -> None:
    now = time.time()
    for ts, n in ((now - 600, "10m ago"), (now - 60, "1m ago"), (now - 7200, "stepped back"),
                  (now - 30, "30s ago"), (now - 5, "5s ago")):
        emit_at(ws, ts, n=n)

    def ticks(*args: str) -> list[str]:
        return [json.loads(x)["n"] for x in out(run(ws, "logs", TEAM, "--json", *args))
                if '"tick"' in x]

    assert ticks("--since", "2m") == ["1m ago", "30s ago", "5s ago"]
    assert ticks("--since", "2m", "-n", "2") == ["30s ago", "5s ago"]
    assert ticks("--since", "2m", "-n", "3") == ["1m ago", "30s ago", "5s ago"]
    assert ticks("--until", "45s") == ["10m ago", "1m ago", "stepped back"]
    assert ticks("--since", "5m", "--until", "20s") == ["1m ago", "30s ago"]
    assert ticks("--until", "45s", "-n", "1") == ["stepped back"]
    clock = time.strftime("%H:%M:%S", time.localtime(now - 45))
    if time.localtime(now - 45)[:3] == time.localtime(now)[:3]:
        assert ticks("--until", clock) == ["10m ago", "1m ago", "stepped back"]
    bad = run(ws, "logs", TEAM, "--until", "soonish")
    assert bad.returncode == 2 and b"--until 'soonish'" in bad.stderr
    both = run(ws, "logs", TEAM, "--until", "1m", "-f")
    assert both.returncode == 2 and b"--follow" in both.stderr


def test_logs_grep_matches_the_printed_line_and_whole_field_values(
        ws: Workspace, team: str) -> None:
    actions.send(ws, TEAM, "alice", "the schema is ready " + "x" * 200 + " NEEDLE")
    actions.send(ws, TEAM, "bob", "nothing to see")
    events.emit(ws, TEAM, "tool_call", member="bob", tool="bash", input={"command": "ls"},
                ok=False, ms=3, error="exit code 2")
    # the needle is past the cut of the printed line: found in the whole value
    assert [x for x in out(run(ws, "logs", TEAM, "-g", "NEEDLE"))] == \
        [x for x in out(run(ws, "logs", TEAM)) if "lead → alice" in x]
    # a regular expression over the printed line (its words, not only field values)
    failed = out(run(ws, "logs", TEAM, "--grep", r"FAILED: exit code \d"))
    assert len(failed) == 1 and "tool bash" in failed[0]
    # a whole field value: bob joining, the message to bob (journaled by lead), bob's call
    assert [json.loads(x)["member"] for x in out(run(ws, "logs", TEAM, "-g", "^bob$",
                                                      "--json"))] == ["bob", "lead", "bob"]
    assert out(run(ws, "logs", TEAM, "-g", "NEEDLE", "-n", "5", "alice"))[0].endswith("…")
    bad = run(ws, "logs", TEAM, "-g", "(unclosed")
    assert bad.returncode == 2 and b"regular expression" in bad.stderr


def test_logs_with_no_team_interleaves_every_team_by_time(ws: Workspace, team: str) -> None:
    actions.create_team(ws, "api")
    actions.spawn(ws, "api", "carol", "work")
    now = time.time()
    for i, (where, who) in enumerate([(TEAM, "alice"), ("api", "carol"), (TEAM, "bob"),
                                      ("api", "carol"), (TEAM, "alice")]):
        emit_at(ws, now + i, team=where, member=who, n=i)
    lines = [x for x in out(run(ws, "logs")) if " tick " in x]
    assert [int(x.rsplit("n=", 1)[1]) for x in lines] == [0, 1, 2, 3, 4]
    assert [x.split()[1] for x in lines] == [TEAM, "api", TEAM, "api", TEAM]
    shown = [json.loads(x) for x in out(run(ws, "logs", "--json")) if '"tick"' in x]
    assert [(r["team"], r["n"]) for r in shown] == [(TEAM, 0), ("api", 1), (TEAM, 2),
                                                    ("api", 3), (TEAM, 4)]
    last = [json.loads(x) for x in out(run(ws, "logs", "--json", "-n", "3"))]
    assert [(r["team"], r["n"]) for r in last] == [(TEAM, 2), ("api", 3), (TEAM, 4)]
    assert [r["n"] for r in (json.loads(x) for x in out(
        run(ws, "logs", "--json", "-g", "carol"))) if r["event"] == "tick"] == [1, 3]


def test_logs_follow_of_every_team_prints_what_each_appends_and_ends_on_ctrl_c(
        ws: Workspace, team: str) -> None:
    actions.create_team(ws, "api")
    proc = subprocess.Popen([str(TEAMCTL), "--root", str(ws.root), "logs", "-f", "-n", "1"],
                            stdout=subprocess.PIPE, env=clean_env())
    reader = Reader(proc)
    reader.wait_for("team_created")  # api's: the last event of them all, then following

    # the history is printed once every team's is read: both are being followed now
    emit_at(ws, time.time(), team=TEAM, n=100)
    reader.wait_for("n=100")
    emit_at(ws, time.time(), team="api", member="carol", n=200)
    reader.wait_for("n=200")
    proc.send_signal(signal.SIGINT)
    assert proc.wait(T) == 0
    reader.thread.join(T)
    follow = [x for x in reader.lines if "tick" in x]
    assert {x.split()[1] for x in follow} == {TEAM, "api"}


def test_logs_and_transcript_of_a_removed_member(ws: Workspace, team: str) -> None:
    actions.send(ws, TEAM, "bob", "before you go")
    files.append_jsonl(ws.store.paths.session(TEAM, "bob"), [
        {"type": "assistant", "ts": time.time(),
         "content": [{"type": "text", "text": "bob's last words"}]}])
    actions.stop(ws, TEAM, "bob")
    actions.remove_member(ws, TEAM, "bob")
    assert "bob" not in roster.names(roster.load(ws, TEAM))
    logs = out(run(ws, "logs", TEAM, "bob"))
    assert any("lead → bob: before you go" in x for x in logs)
    assert any("member_removed" in x for x in logs)
    done = run(ws, "transcript", TEAM, "bob")
    assert any("bob: bob's last words" in x for x in out(done))
    assert b"bob was removed from team shop" in done.stderr
    attached = run(ws, "attach", TEAM, "bob")  # nothing more will come: it returns
    assert any("bob's last words" in x for x in out(attached))
    unknown = run(ws, "logs", TEAM, "bobby")
    assert unknown.returncode == 2 and b"unknown member 'bobby'" in unknown.stderr
    assert run(ws, "transcript", TEAM, "carol").returncode == 2


# -- inbox -----------------------------------------------------------------------------------
def test_inbox_type_and_no_idle_filter_what_is_printed_and_still_drain_everything(
        ws: Workspace, team: str) -> None:
    actions.send(ws, TEAM, "lead", "alice is idle", type_="idle_notification", sender="alice")
    actions.send(ws, TEAM, "lead", "a question", sender="bob")
    actions.send(ws, TEAM, "lead", "my plan", type_="plan_approval_request", sender="alice")

    def shown(*args: str) -> list[str]:
        return [json.loads(x)["content"] for x in out(run(ws, "inbox", TEAM, "--peek",
                                                          "--json", *args))]

    assert shown("--no-idle") == ["a question", "my plan"]
    assert shown("--type", "plan_approval_request") == ["my plan"]
    assert shown("--type", "message", "--type", "idle_notification") == ["alice is idle",
                                                                          "a question"]
    bad = run(ws, "inbox", TEAM, "--type", "mesage")
    assert bad.returncode == 2 and b"did you mean 'message'" in bad.stderr
    drained = out(run(ws, "inbox", TEAM, "--no-idle"))
    assert len(drained) == 2 and not any("alice is idle" in x for x in drained)
    assert inbox.peek(ws, TEAM, "lead") == []  # drained whole, the idle one too


def test_inbox_follow_ends_on_ctrl_c_with_exit_0(ws: Workspace, team: str) -> None:
    proc = subprocess.Popen([str(TEAMCTL), "--root", str(ws.root), "inbox", TEAM, "--follow"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_env())
    reader = Reader(proc)
    actions.send(ws, TEAM, "lead", "ping", sender="alice")
    reader.wait_for("alice → lead: ping")
    proc.send_signal(signal.SIGINT)
    assert proc.wait(T) == 0
    assert proc.stderr is not None and b"Traceback" not in proc.stderr.read()


# -- help, config, the small ones ----------------------------------------------------------
def test_argument_help_shows_in_help_and_in_the_reference(ws: Workspace) -> None:
    send = out(run(ws, "send", "--help"))
    assert any(x.split() == ["CONTENT", "Text,", "or", "-", "to", "read", "standard",
                             "input.", "[required]"] for x in send), send
    assert any(x.strip().startswith("TEAM") and "Team name." in x for x in send)
    reference = (REPO / "docs" / "cli.md").read_text()
    assert "CONTENT  Text, or - to read standard input." in reference
    assert "## teamctl config" in reference


def test_config_says_what_is_in_force_and_where_it_came_from(ws: Workspace) -> None:
    (ws.root / "teamd.toml").write_text('idle_timeout = 5\nmodel = "claude-haiku-5"\n')
    env = {**clean_env(), "TEAMD_MODEL": "claude-opus-5-5", "ANTHROPIC_API_KEY": "sk-SECRET"}
    done = run(ws, "config", "--json", env=env)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["idle_timeout"] == {"value": 5, "source": "file"}
    assert doc["model"] == {"value": "claude-opus-5-5", "source": "env"}
    assert doc["stop_timeout"] == {"value": 20, "source": "default"}
    assert doc["ANTHROPIC_API_KEY"]["source"] == "env"
    plain = run(ws, "config", env=env)
    assert b"SECRET" not in plain.stdout + done.stdout + plain.stderr
    assert ["idle_timeout", "5", "file"] in [x.split() for x in out(plain)]
    (ws.root / "teamd.toml").write_text("idle_timout = 5\n")
    bad = run(ws, "config")
    assert bad.returncode == 2 and bad.stdout == b""
    assert b"'idle_timout'" in bad.stderr and b"did you mean 'idle_timeout'" in bad.stderr


def test_an_empty_message_is_refused_and_nothing_is_written(ws: Workspace, team: str) -> None:
    before = (ws.store.paths.events(TEAM).read_bytes(), inbox.peek(ws, TEAM, "alice"))
    for args, stdin in ((["send", TEAM, "alice", ""], None),
                        (["send", TEAM, "alice", "  \n"], None),
                        (["send", TEAM, "alice", "-"], b""),
                        (["broadcast", TEAM, "-"], b"\n")):
        done = run(ws, *args, stdin=stdin)
        assert done.returncode == 2 and b"empty" in done.stderr, args
        assert len(done.stderr.decode().strip().splitlines()) == 1
    assert (ws.store.paths.events(TEAM).read_bytes(), inbox.peek(ws, TEAM, "alice")) == before


def test_a_root_that_is_not_there_is_bad_input_but_init_makes_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    for args in (["status"], ["logs"], ["config"], ["task", "list", "t"]):
        done = teamctl(missing, *args, env=clean_env())
        assert done.returncode == 2, args
        assert b"no such directory" in done.stderr and str(missing).encode() in done.stderr
    env = {**clean_env(), "TEAMD_ROOT": str(missing)}
    assert subprocess.run([str(TEAMCTL), "status"], env=env, capture_output=True,
                          check=False).returncode == 2
    assert not missing.exists()
    assert teamctl(missing, "init", env=clean_env()).returncode == 0
    assert (missing / "teamd.toml").is_file()
    assert teamctl(missing, "status", env=clean_env()).returncode == 0


def test_did_you_mean_after_an_unknown_team_member_command_or_setting(
        ws: Workspace, team: str) -> None:
    for args, hint in ((["status", "shpo"], b"did you mean 'shop'"),
                       (["send", TEAM, "alcie", "hi"], b"did you mean 'alice'"),
                       (["logs", TEAM, "bbo"], b"did you mean 'bob'"),
                       (["stauts"], b"Did you mean 'status'"),
                       (["inbox", TEAM, "--type", "plan_aproval_request"],
                        b"did you mean 'plan_approval_request'")):
        done = run(ws, *args)
        assert done.returncode == 2 and hint in done.stderr, (args, done.stderr)
    env = {**clean_env(), "TEAMD_IDLE_TIMEOUT": "soon"}
    done = run(ws, "config", env=env)
    assert done.returncode == 2 and b"TEAMD_IDLE_TIMEOUT" in done.stderr
    (ws.root / "teamd.toml").write_text('lead_wake_on_idle = "eahc"\n')
    done = run(ws, "config")
    assert done.returncode == 2 and b"did you mean 'each'" in done.stderr


def test_member_processes_are_titled_and_a_shutdown_without_reason_shows_a_dash(
        ws: Workspace, server: ScriptedServer) -> None:
    make_team(ws, None, "alice", "bob", team=TEAM)
    with running_teamd(ws, server.url, idle_timeout=60):
        for name in ("alice", "bob"):
            wait_status(ws, name, "idle", team=TEAM)
        titles = {}
        for name in ("alice", "bob"):
            proc = psutil.Process(roster.get(roster.load(ws, TEAM), name)["pid"])
            titles[name] = ([part for part in proc.cmdline() if part], proc.name())
        assert titles == {"alice": ([f"teamd: alice@{TEAM}"], f"teamd: alice@{TEAM}"),
                          "bob": ([f"teamd: bob@{TEAM}"], f"teamd: bob@{TEAM}")}
        ps = subprocess.run(["ps", "-o", "args=", "-p", str(roster.get(
            roster.load(ws, TEAM), "bob")["pid"])], capture_output=True, text=True, check=True)
        assert ps.stdout.strip() == f"teamd: bob@{TEAM}"
        done = run(ws, "shutdown", TEAM, "alice", "--wait", "--timeout", str(T))
        assert done.returncode == 0, done.stderr
    [record] = requests.list_requests(ws, TEAM)
    assert record["reason"] is None and record["answer_reason"] == "idle"
    rows = [x.split() for x in out(run(ws, "requests", TEAM))[1:]]
    assert rows[0][1:5] == ["shutdown", "lead", "alice", "approved"]
    assert rows[0][-1] == "-", rows

