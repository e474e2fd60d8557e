"""teamd.layout: name validation and the workspace's paths (CONTRACT §2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from teamd.errors import BadInput
from teamd.layout import Workspace, resolve_root, validate_member_name, validate_name

GOOD = ["a", "0", "backend", "rest-to-graphql", "team_1", "9lives", "a" * 48, "a-_-b"]
BAD = ["", "A", "Backend", "../x", "..", ".", "a/b", "/abs", "a\x00b", "\x00", "a" * 49,
       "-lead", "_x", "a b", " a", "a\n", "é", "a.b", "a\\b"]


@pytest.mark.parametrize("name", GOOD)
def test_valid_names_pass(name: str) -> None:
    assert validate_name(name) == name
    assert validate_member_name(name) == name


@pytest.mark.parametrize("name", BAD)
def test_invalid_names_are_refused(name: str) -> None:
    with pytest.raises(BadInput, match="invalid"):
        validate_name(name)
    with pytest.raises(BadInput):
        validate_member_name(name)


def test_refusal_is_one_clear_line_naming_the_input() -> None:
    with pytest.raises(BadInput) as info:
        validate_name("a\x00b\nc", "team name")
    text = str(info.value)
    assert "\n" not in text and "\x00" not in text
    assert "team name" in text and r"'a\x00b\nc'" in text


def test_non_strings_are_refused() -> None:
    for value in (None, 3, b"abc", ["a"]):
        with pytest.raises(BadInput):
            validate_name(value)  # type: ignore[arg-type]


def test_teamd_is_reserved_as_a_member_name_but_lead_is_not() -> None:
    assert validate_name("teamd") == "teamd"  # a valid team name
    with pytest.raises(BadInput, match="reserved"):
        validate_member_name("teamd")
    assert validate_member_name("lead") == "lead"


def test_paths_follow_the_contract(tmp_path: Path) -> None:
    ws = Workspace.at(tmp_path)
    r = tmp_path
    assert ws.settings_file == r / "teamd.toml"
    assert ws.store.paths.supervisor_lock == r / ".teams" / "teamd.lock"
    assert ws.store.paths.supervisor_info == r / ".teams" / "teamd.json"
    assert ws.store.paths.config("t") == r / ".teams" / "t" / "config.json"
    assert ws.store.paths.inbox("t", "lead") == r / ".teams" / "t" / "lead_inbox.jsonl"
    assert ws.store.paths.inbox("t", "backend") == r / ".teams" / "t" / "backend_inbox.jsonl"
    assert (
        ws.store.paths.request("t", "shutdown-ab12") == r / ".teams/t/requests/shutdown-ab12.json"
    )
    assert ws.store.paths.session("t", "bob") == r / ".teams/t/sessions/bob.jsonl"
    assert ws.store.paths.transcripts_dir("t") == r / ".teams/t/transcripts"
    assert ws.member_log("t", "bob") == r / ".teams/t/logs/bob.log"
    assert ws.store.paths.events("t") == r / ".teams/t/events.jsonl"
    assert ws.store.paths.task("t", 7) == r / ".tasks/t/7.json"
    assert ws.store.paths.highwatermark("t") == r / ".tasks/t/.highwatermark"


def test_every_path_validates_its_names(tmp_path: Path) -> None:
    ws = Workspace.at(tmp_path)
    for call in (
        lambda: ws.store.paths.team_dir("../x"),
        lambda: ws.store.paths.config("A"),
        lambda: ws.store.paths.inbox("t", "../../etc"),
        lambda: ws.store.paths.inbox("../t", "a"),
        lambda: ws.store.paths.session("t", "a/b"),
        lambda: ws.store.paths.tasks_dir(""),
        lambda: ws.member_log("t", "x" * 49),
        lambda: ws.store.paths.events("t\x00"),
    ):
        with pytest.raises(BadInput):
            call()


@pytest.mark.parametrize("rid", ["", "../x", "a/b", "a.json", "x" * 65, "a b", "a\x00"])
def test_request_ids_are_validated(tmp_path: Path, rid: str) -> None:
    with pytest.raises(BadInput, match="invalid request id"):
        Workspace.at(tmp_path).store.paths.request("t", rid)


def test_root_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env_root, cwd_root, arg_root = tmp_path / "env", tmp_path / "cwd", tmp_path / "arg"
    for p in (env_root, cwd_root, arg_root):
        p.mkdir()
    monkeypatch.chdir(cwd_root)
    monkeypatch.setenv("TEAMD_ROOT", str(env_root))
    assert resolve_root(arg_root) == arg_root
    assert resolve_root() == env_root
    monkeypatch.delenv("TEAMD_ROOT")
    assert resolve_root() == cwd_root
    monkeypatch.setenv("TEAMD_ROOT", "")
    assert resolve_root() == cwd_root
    assert resolve_root("rel") == cwd_root / "rel"  # absolute, relative to the cwd


def test_team_names_lists_only_real_teams(ws: Workspace) -> None:
    assert ws.store.team_names() == []
    for name in ("beta", "alpha"):
        (ws.store.paths.teams_dir / name).mkdir(parents=True)
        (ws.store.paths.teams_dir / name / "config.json").write_text("{}")
    (ws.store.paths.teams_dir / "no-config").mkdir()
    (ws.store.paths.teams_dir / ".deleted-x").mkdir()
    (ws.store.paths.teams_dir / ".deleted-x" / "config.json").write_text("{}")
    assert ws.store.team_names() == ["alpha", "beta"]
    assert ws.store.team_exists("alpha") and not ws.store.team_exists("no-config")
