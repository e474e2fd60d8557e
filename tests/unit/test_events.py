"""teamd.events: the journal, its rotation and following it (CONTRACT §7)."""

from __future__ import annotations

import threading

import pytest

from teamd import events, files
from teamd.layout import Workspace

TEAM = "t"


def test_emit_appends_one_line_with_ts_event_member(ws: Workspace, team: str) -> None:
    rec = events.emit(ws, team, "spawned", member="alice", pid=123)
    assert set(rec) == {"ts", "event", "member", "pid"} and rec["pid"] == 123
    anon = events.emit(ws, team, "team_deleting")
    assert "member" not in anon
    lines = ws.store.paths.events(team).read_bytes().splitlines()
    assert lines[0].startswith(b'{"ts":')  # team_created comes first
    assert events.read(ws, team)[-2:] == [rec, anon]
    assert [r["event"] for r in events.read(ws, team)] == ["team_created", "spawned",
                                                          "team_deleting"]


def test_read_filters_by_member(ws: Workspace, team: str) -> None:
    events.emit(ws, team, "spawned", member="alice", pid=1)
    events.emit(ws, team, "spawned", member="bob", pid=2)
    events.emit(ws, team, "message", member="lead",
                message={"sender": "lead", "recipient": "alice", "content": "x"})
    events.emit(ws, team, "message", member="bob",
                message={"sender": "bob", "recipient": "lead", "content": "y"})
    alice = events.read(ws, team, "alice")
    assert [(r["event"], r["member"]) for r in alice] == [("spawned", "alice"),
                                                          ("message", "lead")]
    assert len(events.read(ws, team, "bob")) == 2


def _emit_numbered(ws: Workspace, count: int) -> None:
    for i in range(count):
        events.emit(ws, TEAM, "tick", n=i, pad="x" * 40)


def _numbers(ws: Workspace, name: str) -> list[int]:
    return [r["n"] for r in files.read_jsonl(ws.store.paths.team_dir(TEAM) / name).records
            if r["event"] == "tick"]


def test_rotation_at_max_bytes_keeps_events_keep(ws: Workspace, team: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAMD_EVENTS_MAX_BYTES", "1000")
    monkeypatch.setenv("TEAMD_EVENTS_KEEP", "3")
    _emit_numbered(ws, 200)
    folder = ws.store.paths.team_dir(team)
    names = sorted(p.name for p in folder.glob("events*.jsonl"))
    assert names == ["events.1.jsonl", "events.2.jsonl", "events.3.jsonl", "events.jsonl"]
    kept = [n for name in ("events.3.jsonl", "events.2.jsonl", "events.1.jsonl",
                           "events.jsonl") for n in _numbers(ws, name)]
    # the newest events, in order, none lost between the kept files
    assert kept == list(range(kept[0], 200))
    assert kept[0] > 0  # the oldest ones were rotated out
    for name in ("events.1.jsonl", "events.2.jsonl", "events.3.jsonl"):
        size = (folder / name).stat().st_size
        assert 1000 <= size < 1000 + 200, (name, size)  # rotated once it passed the limit
        assert files.parse_lines((folder / name).read_bytes()).clean
    assert ws.store.paths.events(team).stat().st_size < 1000 + 200
    assert events.read(ws, team)[-1]["n"] == 199


def test_rotation_limits_come_from_teamd_toml(ws: Workspace, team: str) -> None:
    ws.settings_file.write_text("events_max_bytes = 300\nevents_keep = 1\n")
    _emit_numbered(ws, 50)
    names = sorted(p.name for p in ws.store.paths.team_dir(team).glob("events*.jsonl"))
    assert names == ["events.1.jsonl", "events.jsonl"]


def test_keep_zero_truncates(ws: Workspace, team: str,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAMD_EVENTS_MAX_BYTES", "300")
    monkeypatch.setenv("TEAMD_EVENTS_KEEP", "0")
    _emit_numbered(ws, 30)
    assert sorted(p.name for p in ws.store.paths.team_dir(team).glob("events*.jsonl")) == [
        "events.jsonl"
    ]
    assert ws.store.paths.events(team).stat().st_size < 300 + 200
    assert events.read(ws, team)[-1]["n"] == 29


def test_a_broken_teamd_toml_does_not_lose_journal_entries(ws: Workspace,
                                                           team: str) -> None:
    ws.settings_file.write_text("this is = = not toml")
    events.emit(ws, team, "tick", n=1)
    assert events.read(ws, team)[-1]["n"] == 1


def test_emit_for_a_vanished_team_creates_no_folder(ws: Workspace) -> None:
    ws.store.paths.teams_dir.mkdir(mode=0o700)
    events.emit(ws, "ghost", "exited", member="a", code=0)
    assert not ws.store.paths.team_dir("ghost").exists()


class Writer:
    """Emits events from a thread until stopped, so a follower always has something new."""

    def __init__(self, ws: Workspace, emit: object) -> None:
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(emit,), daemon=True)

    def _run(self, emit: object) -> None:
        i = 0
        while not self.stop.is_set():
            emit(i)  # type: ignore[operator]
            i += 1

    def __enter__(self) -> Writer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)


@pytest.mark.timeout(60)
def test_follow_sees_every_new_event_across_rotations(ws: Workspace, team: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAMD_EVENTS_MAX_BYTES", "2000")
    monkeypatch.setenv("TEAMD_EVENTS_KEEP", "1000")  # far more than the follower can lag
    want = 800
    follower = events.follow(ws, team, poll=0.05)
    got: list[int] = []
    with Writer(ws, lambda i: events.emit(ws, TEAM, "tick", n=i, pad="y" * 30)):
        while len(got) < want:
            rec = next(follower)
            if rec["event"] == "tick":
                got.append(rec["n"])
    follower.close()
    # from wherever it joined, every event after it, in order: none lost at a rotation
    assert got == list(range(got[0], got[0] + want))
    assert len(list(ws.store.paths.team_dir(team).glob("events.*.jsonl"))) >= 10  # it did rotate


@pytest.mark.timeout(60)
def test_follow_filters_by_member(ws: Workspace, team: str) -> None:
    follower = events.follow(ws, team, member="bob", poll=0.05)

    def emit(i: int) -> None:
        events.emit(ws, TEAM, "spawned", member="alice", pid=i)
        events.emit(ws, TEAM, "spawned", member="bob", pid=i)

    with Writer(ws, emit):
        seen = [next(follower) for _ in range(20)]
    follower.close()
    assert {r["member"] for r in seen} == {"bob"}
    pids = [r["pid"] for r in seen]
    assert pids == list(range(pids[0], pids[0] + 20))


@pytest.mark.timeout(60)
def test_follow_from_start_gives_history_then_new_without_a_gap(ws: Workspace,
                                                                team: str) -> None:
    _emit_numbered(ws, 5)
    follower = events.follow(ws, team, poll=0.05, from_start=True)
    assert next(follower)["event"] == "team_created"
    assert [next(follower)["n"] for _ in range(5)] == [0, 1, 2, 3, 4]
    with Writer(ws, lambda i: events.emit(ws, TEAM, "tick", n=5 + i)):
        assert [next(follower)["n"] for _ in range(50)] == list(range(5, 55))
    follower.close()


def test_a_stream_skips_garbage_and_says_so(ws: Workspace, team: str) -> None:
    events.emit(ws, team, "tick", n=1)
    with open(ws.store.paths.events(team), "ab") as fh:
        fh.write(b"\x00\xff not json\n[1, 2]\n\n")
    events.emit(ws, team, "tick", n=2)
    bad: list[bytes] = []
    got = [r.get("n") for r in events.stream(ws, team, on_bad=bad.append)
           if r["event"] == "tick"]
    assert got == [1, 2]
    assert bad == [b"\x00\xff not json", b"[1, 2]"]  # an empty line is no garbage
