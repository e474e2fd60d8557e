"""`teamctl export TEAM DIR` and `teamctl import DIR` (CONTRACT §15): a team that really
worked — a real `teamd run`, the real SDK over HTTP to the scripted server, a bash tool call,
a compaction — copied out as files, into a second root, and out again: every file equal in
what `jq -S` shows. An import that would overwrite a team writes nothing at all.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from teamd import actions
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests import harness
from tests.harness import TEAM, asked, running_teamd, tool_use, wait_until
from tests.helpers_proc import ctl, snapshot, teamctl, teamctl_text

T = 30.0
BIG = {"input_tokens": 100, "cache_read_input_tokens": 30000,
       "cache_creation_input_tokens": 30000}


def as_jq(folder: Path, team: str) -> dict[str, Any]:
    """Every file of `team` under the files root `folder`, as `jq -S` reads it: a JSON
    document parsed, a JSONL file as its parsed lines (an empty one, like a drained inbox,
    shows nothing: as if there were none), anything else as its text."""
    out: dict[str, Any] = {}
    for base in (folder / ".teams" / team, folder / ".tasks" / team):
        for path in sorted(p for p in base.rglob("*") if p.is_file()):
            rel = str(path.relative_to(folder))
            if path.suffix in (".lock", ".tmp") or "/logs/" in f"/{rel}":
                continue  # a live root's own (a temp file: a write a kill cut short)
            text = path.read_text()
            if path.suffix == ".json":
                out[rel] = json.loads(text)
            elif path.suffix == ".jsonl" and text:  # an emptied inbox: as if none, to jq
                out[rel] = [json.loads(line) for line in text.splitlines()]
            elif path.suffix == ".jsonl":
                continue
            else:
                out[rel] = text
    return out


def assert_same(got: dict[str, Any], want: dict[str, Any]) -> None:
    """Equal, or the files that differ named with both sides."""
    differ = {rel: (got.get(rel), want.get(rel)) for rel in set(got) | set(want)
              if got.get(rel) != want.get(rel)}
    assert not differ, differ


def answered(ws: Workspace, text: str) -> bool:
    """alice's session has a reply after the message holding `text`."""
    records = ws.store.read_session(TEAM, "alice")
    asked = [i for i, r in enumerate(records) if text in json.dumps(r)]
    return bool(asked) and any(r["type"] == "assistant" for r in records[asked[0] + 1:])


def worked_team(ws: Workspace, server: ScriptedServer, workdir: Path) -> None:
    """A team with something of every kind a team keeps, made by really working."""
    server.add_rule({"agent": "alice", "contains": "LOOK-t1", "times": 1, "reply": {
        "content": [{"type": "text", "text": "Looking."}, tool_use("bash", command="echo HI")]}})
    server.add_rule({"agent": "alice", "tool_result": "bash", "reply": {"content": "Done."}})
    server.add_rule({"agent": "alice", "contains": "BIG-t1",
                     "reply": {"content": "Noted.", "usage": BIG}})
    server.add_rule({"agent": "alice", "contains": "Your context is nearly full",
                     "reply": {"content": "SUMMARY-t1: looked, said hi."}})
    actions.create_team(ws, TEAM, "a team that moves", budget_usd=5)
    actions.spawn(ws, TEAM, "alice", "Wait for work from the lead.", cwd=str(workdir))
    with running_teamd(ws, server.url, compact_threshold=50000, backoff_initial=0.1):
        ctl(ws, "send", TEAM, "alice", "LOOK-t1")
        wait_until(lambda: any(r["type"] == "assistant" and "Done." in json.dumps(r)
                               for r in ws.store.read_session(TEAM, "alice")), T,
                   "the answer after the bash run")
        harness.wait_status(ws, "alice", "idle", T)
        ctl(ws, "send", TEAM, "alice", "BIG-t1")
        wait_until(lambda: answered(ws, "BIG-t1"), T, "the big reply")
        harness.wait_status(ws, "alice", "idle", T)
        ctl(ws, "send", TEAM, "alice", "AFTER-t1")  # its call compacts first
        wait_until(lambda: ws.store.list_transcripts(TEAM), T, "a compaction's transcript")
        wait_until(lambda: answered(ws, "AFTER-t1"), T, "the answer after the compaction")
        harness.wait_status(ws, "alice", "idle", T)
    # and what a stopped team holds: a task board with an id handed out and never used,
    # a member not started (its inbox waiting), a pending request, an "always" rule,
    # teamd's paged record
    actions.spawn(ws, TEAM, "bob", "Review.", cwd=str(workdir), plan_mode=True)
    for subject in ("schema", "api", "ui"):
        ctl(ws, "task", "add", TEAM, subject, "--owner", "alice")
    ctl(ws, "task", "update", TEAM, "2", "--status", "completed")
    with ws.store.board_unit(TEAM):
        ws.store.next_task_id(TEAM)  # an id handed out, its task never written
    ctl(ws, "send", TEAM, "bob", "Please review api.")
    ctl(ws, "shutdown", TEAM, "bob", "--reason", "not needed today")
    ws.store.add_always(TEAM, "bash(git status*)")
    ws.store.write_paged(TEAM, {"schema": 1, "paged": ["m1", "m2"]})


@pytest.mark.timeout(180)
def test_export_import_export_round_trips_every_file(
        ws: Workspace, server: ScriptedServer, tmp_path: Path, workdir: Path) -> None:
    worked_team(ws, server, workdir)
    first, second, again = tmp_path / "first", tmp_path / "second", tmp_path / "again"
    original = as_jq(ws.root, TEAM)
    # the fixture really made every kind of record, or the equality below proves little
    team_dir, board = f".teams/{TEAM}/", f".tasks/{TEAM}/"
    for rel in ("config.json", "members/alice.json", "members/bob.json", "spend.json",
                "permissions.json", "person_needed.json", "events.jsonl", "bob_inbox.jsonl",
                "sessions/alice.jsonl"):
        assert team_dir + rel in original, (rel, sorted(original))
    for kind in (team_dir + "requests/", team_dir + "transcripts/alice-", board + "3.json"):
        assert any(rel.startswith(kind) for rel in original), (kind, sorted(original))
    assert original[f".tasks/{TEAM}/.highwatermark"].strip() == "4"

    done = json.loads(ctl(ws, "export", TEAM, str(first), "--json"))
    assert done["team"] == TEAM and done["to"] == str(first) and done["transcripts"] >= 1
    assert done["tasks"] == 3 and done["session_records"] > 0 and done["requests"] == 1
    assert_same(as_jq(first, TEAM), original)

    (tmp_path / "other").mkdir()
    imported = json.loads(ctl(tmp_path / "other", "import", str(first), "--json"))
    assert [d["team"] for d in imported] == [TEAM]
    ctl(tmp_path / "other", "export", TEAM, str(second))
    assert_same(as_jq(second, TEAM), original)
    # the imported team is the same team to every command: the ids go on from the mark
    other = Workspace.at(tmp_path / "other")
    assert ctl(other, "task", "add", TEAM, "next").strip().startswith("created task #5")
    assert ws.store.read_session(TEAM, "alice") == other.store.read_session(TEAM, "alice")
    shown = ctl(other, "transcript", TEAM, "alice")  # the history before the compaction too
    assert "LOOK-t1" in shown and "SUMMARY-t1" in shown, shown
    ctl(other, "export", TEAM, str(again))
    assert f"{TEAM}/5.json" in "\n".join(as_jq(again, TEAM))

    # a backup as section 2 lays it out: no lock file, no logs/, folders 0700, files 0600
    for path in first.rglob("*"):
        assert not path.name.endswith(".lock") and path.name != "logs", path
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))


def test_import_of_a_team_that_exists_writes_nothing(ws: Workspace, tmp_path: Path) -> None:
    # a files root with two teams; the target has the second already
    source = tmp_path / "source"
    source.mkdir()
    src = Workspace.at(source)
    for team in ("alpha", "beta"):
        actions.create_team(src, team)
        actions.spawn(src, team, "alice", "Work.", cwd=str(tmp_path))
        ctl(src, "send", team, "alice", f"hello {team}")
    actions.create_team(ws, "beta", "the one already here")
    before = snapshot(ws.root)
    result = teamctl(ws.root, "import", str(source))
    assert result.returncode == 2, result
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and "'beta' exists already" in lines[0], lines
    assert snapshot(ws.root) == before  # alpha, checked first and fine, is not there either
    assert not ws.store.team_exists("alpha")


def test_export_and_import_refuse_bad_input_and_change_nothing(ws: Workspace,
                                                               tmp_path: Path) -> None:
    actions.create_team(ws, TEAM)
    ctl(ws, "export", TEAM, str(tmp_path / "out"))
    before, out_before = snapshot(ws.root), snapshot(tmp_path / "out")
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = [(("export", "nope", str(tmp_path / "x")), "unknown team 'nope'"),
             (("export", TEAM, str(tmp_path / "out")), "already holds team"),
             (("import", str(tmp_path / "missing")), "no such directory"),
             (("import", str(empty)), "holds no team"),
             (("import", str(tmp_path / "out")), f"'{TEAM}' exists already")]
    for args, says in cases:
        result = teamctl_text(ws, *args)
        assert result.returncode == 2, (args, result)
        assert len(result.stderr.splitlines()) == 1 and says in result.stderr, (args, result)
    assert snapshot(ws.root) == before and snapshot(tmp_path / "out") == out_before
    assert not (tmp_path / "x").exists() and not list(empty.iterdir())


def test_a_big_team_says_how_far_the_copy_is_on_stderr(ws: Workspace, tmp_path: Path) -> None:
    actions.create_team(ws, TEAM)
    lines = [{"ts": 1763675000.0 + n, "event": "note", "n": n} for n in range(25_000)]
    ws.store.emit(TEAM, lines, max_bytes=1 << 40, keep=0)
    result = teamctl(ws.root, "export", TEAM, str(tmp_path / "out"))
    assert result.returncode == 0, result
    said = result.stderr.decode().splitlines()
    assert said == [f"teamctl: export {TEAM}: {n} journal lines" for n in (10_000, 20_000)]
    assert result.stdout.decode().count("\n") == 1  # the summary, on stdout
    exported = (tmp_path / "out" / ".teams" / TEAM / "events.jsonl").read_text().splitlines()
    assert [json.loads(line).get("n") for line in exported[-25_000:]] == list(range(25_000))


@pytest.mark.timeout(240)
def test_a_team_moves_into_postgresql_and_back_unchanged(
        ws: Workspace, server: ScriptedServer, tmp_path: Path, workdir: Path,
        pg_url: str) -> None:
    worked_team(ws, server, workdir)
    original = as_jq(ws.root, TEAM)
    out, back = tmp_path / "out", tmp_path / "back"
    ctl(ws, "export", TEAM, str(out))
    pg_root = tmp_path / "pg"
    pg_root.mkdir()
    imported = json.loads(ctl(pg_root, "--store", pg_url, "import", str(out), "--json"))
    assert imported[0]["to"] == pg_url and imported[0]["transcripts"] >= 1, imported
    assert not (pg_root / ".teams").exists()  # everything went into the database
    ctl(pg_root, "--store", pg_url, "export", TEAM, str(back))
    assert_same(as_jq(back, TEAM), original)
    # and it is the same team there: the board goes on from its high-water mark
    added = ctl(pg_root, "--store", pg_url, "task", "add", TEAM, "next")
    assert added.startswith("created task #5"), added
    # the conversation from before the compaction is found though its store changed
    shown = ctl(pg_root, "--store", pg_url, "transcript", TEAM, "alice")
    assert "LOOK-t1" in shown and "SUMMARY-t1" in shown, shown
    refused = teamctl(pg_root, "--store", pg_url, "import", str(out))
    assert refused.returncode == 2 and b"exists already" in refused.stderr, refused


@pytest.mark.timeout(240)
def test_an_imported_member_resumes_its_conversation_under_a_running_teamd(
        ws: Workspace, server: ScriptedServer, tmp_path: Path, workdir: Path) -> None:
    worked_team(ws, server, workdir)
    ctl(ws, "export", TEAM, str(tmp_path / "out"))
    target = Workspace.at(tmp_path / "target")
    target.root.mkdir()
    with running_teamd(target, server.url, backoff_initial=0.1):
        since = len(server.requests)
        ctl(target, "import", str(tmp_path / "out"))
        ctl(target, "send", TEAM, "alice", "AGAIN-t1")
        got = server.wait_for(asked("AGAIN-t1", "alice"), T, since=since)
        # the conversation came along: the summary that replaced its start, then its end
        sent = json.dumps(got["body"]["messages"])
        assert "SUMMARY-t1" in sent and "AFTER-t1" in sent, sent
        first = server.wait_for(lambda r: r["agent"] == "alice", T, since=since)
        assert "SUMMARY-t1" in json.dumps(first["body"]["messages"])  # never a blank start
