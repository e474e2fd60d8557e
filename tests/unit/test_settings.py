"""teamd.settings: defaults, teamd.toml, TEAMD_* overrides, bad values (CONTRACT §10)."""

from __future__ import annotations

import os
import re
import stat
import tomllib

import pytest

from teamd import settings
from teamd.errors import BadInput
from teamd.layout import Workspace

CONTRACT_DEFAULTS = {
    "model": "claude-sonnet-5-5", "max_tokens": 32000, "idle_timeout": 60,
    "compact_threshold": 150000, "bash_timeout": 120, "backoff_initial": 1,
    "backoff_max": 60, "backoff_reset": 60, "restart_limit": 5, "restart_window": 60,
    "stop_timeout": 20, "events_max_bytes": 67108864, "events_keep": 5,
    "permission_timeout": 0, "hook_timeout": 300,
    "retry_max_wait": 60, "api_timeout": 600, "max_concurrent_calls": 0,
    "lead_wake_on_idle": "quiet", "cache_ttl": "auto", "api_key_file": "", "effort": "",
    "runtime": "teamd", "claude_code": "claude", "store": "files",
    "host_heartbeat": 5, "host_timeout": 30, "max_members": 0,
}
#: what `teamctl init` writes besides the flat table (the hooks are comments)
INIT_TABLES = {"permissions": {"default": "allow", "allow": [], "ask": [], "deny": []},
               "hooks": {}, "prices": {}}


def test_defaults_are_the_contracts(ws: Workspace) -> None:
    assert not ws.settings_file.exists()
    assert settings.load(ws).as_toml_table() == CONTRACT_DEFAULTS


def test_write_defaults_writes_every_key_0600_and_refuses_to_overwrite(
        ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "fake-key-never-written-0123")
    old = os.umask(0o000)
    try:
        path = settings.write_defaults(ws)
    finally:
        os.umask(old)
    assert path == ws.settings_file
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    assert tomllib.loads(text) == {**CONTRACT_DEFAULTS, **INIT_TABLES}
    for hook in settings.HOOKS:
        assert f'# {hook} = "' in text  # each hook, as a comment
    assert "sk-ant" not in text and "ANTHROPIC" not in text
    path.write_text("idle_timeout = 5\n")
    with pytest.raises(BadInput, match="already exists"):
        settings.write_defaults(ws)
    assert path.read_text() == "idle_timeout = 5\n"
    settings.write_defaults(ws, force=True)
    assert tomllib.loads(path.read_text()) == {**CONTRACT_DEFAULTS, **INIT_TABLES}


def test_toml_values_are_read(ws: Workspace) -> None:
    ws.settings_file.write_text('model = "claude-opus-4"\nidle_timeout = 2.5\n'
                                "events_keep = 9\n")
    conf = settings.load(ws)
    assert conf.model == "claude-opus-4" and conf.idle_timeout == 2.5 and conf.events_keep == 9
    assert conf.max_tokens == 32000  # the rest stay at their defaults
    assert isinstance(conf.events_keep, int) and isinstance(conf.idle_timeout, float)


def test_a_changed_file_is_read_again(ws: Workspace) -> None:
    ws.settings_file.write_text("idle_timeout = 1\n")
    assert settings.load(ws).idle_timeout == 1
    # same size, written at once: still seen (the file is replaced, as an editor does)
    tmp = ws.root / "new.toml"
    tmp.write_text("idle_timeout = 2\n")
    os.replace(tmp, ws.settings_file)
    assert settings.load(ws).idle_timeout == 2
    ws.settings_file.unlink()
    assert settings.load(ws).idle_timeout == 60


def test_environment_overrides_the_file(ws: Workspace,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    ws.settings_file.write_text("idle_timeout = 5\nstop_timeout = 3\n")
    monkeypatch.setenv("TEAMD_IDLE_TIMEOUT", "7.5")
    monkeypatch.setenv("TEAMD_MODEL", "claude-haiku")
    monkeypatch.setenv("TEAMD_EVENTS_MAX_BYTES", "1024")
    monkeypatch.setenv("TEAMD_STOP_TIMEOUT", "")  # empty: not an override
    conf = settings.load(ws)
    assert conf.idle_timeout == 7.5 and conf.model == "claude-haiku"
    assert conf.events_max_bytes == 1024 and conf.stop_timeout == 3
    # an explicit environment mapping is honoured too
    conf = settings.load(ws, environ={"TEAMD_RESTART_LIMIT": "9"})
    assert conf.restart_limit == 9 and conf.idle_timeout == 5


@pytest.mark.parametrize("text, key", [
    ("idle_timeout = -1\n", "idle_timeout"),
    ('max_tokens = "lots"\n', "max_tokens"),
    ("max_tokens = 1.5\n", "max_tokens"),
    ("stop_timeout = true\n", "stop_timeout"),
    ('model = ""\n', "model"),
    ("model = 3\n", "model"),
    ("idle_timeout = nan\n", "idle_timeout"),
    ("events_keep = [1]\n", "events_keep"),
    ("no_such_key = 1\n", "no_such_key"),
    ("idle_timeout = = 3\n", "not valid TOML"),
    ("[section]\nx = 1\n", "section"),
])
def test_bad_toml_values_are_refused_naming_the_key(ws: Workspace, text: str,
                                                    key: str) -> None:
    ws.settings_file.write_text(text)
    with pytest.raises(BadInput, match=key) as info:
        settings.load(ws)
    assert str(ws.settings_file) in str(info.value)
    assert "\n" not in str(info.value).strip()


def test_invalid_utf8_toml_is_refused(ws: Workspace) -> None:
    ws.settings_file.write_bytes(b'model = "\xff"\n')
    with pytest.raises(BadInput, match="TOML"):
        settings.load(ws)


@pytest.mark.parametrize("var, value", [
    ("TEAMD_IDLE_TIMEOUT", "soon"), ("TEAMD_IDLE_TIMEOUT", "-3"),
    ("TEAMD_MAX_TOKENS", "1.5"), ("TEAMD_EVENTS_KEEP", "nan"), ("TEAMD_STOP_TIMEOUT", "nan"),
])
def test_bad_environment_values_are_refused_naming_the_variable(
        ws: Workspace, monkeypatch: pytest.MonkeyPatch, var: str, value: str) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(BadInput, match=var):
        settings.load(ws)


# -- [permissions] and [hooks] (CONTRACT §10, §11) -----------------------------------------
def test_permissions_and_hooks_tables_are_read(ws: Workspace) -> None:
    ws.settings_file.write_text(
        'hook_timeout = 5\n[permissions]\ndefault = "ask"\n'
        'allow = ["bash(pytest*)", "read_file"]\nask = ["bash(git push*)"]\n'
        'deny = ["write_file(.git/*)"]\n'
        '[hooks]\ntask_completed = "pytest -q >&2"\nteammate_idle = ""\n')
    conf = settings.load(ws)
    assert conf.hook_timeout == 5
    assert conf.permissions.default == "ask"
    assert [(r.tool, r.pattern) for r in conf.permissions.allow] == \
        [("bash", "pytest*"), ("read_file", None)]
    assert [r.text for r in conf.permissions.deny] == ["write_file(.git/*)"]
    assert dict(conf.hooks) == {"task_completed": "pytest -q >&2"}  # empty: no hook


@pytest.mark.parametrize("table, named", [
    ('[permissions]\nask = ["SendMessage"]\n', "SendMessage"),
    ('[permissions]\ndeny = ["TaskCreate"]\n', "TaskCreate"),
    ('[permissions]\nallow = ["bash(x"]\n', "bash(x"),
    ('[permissions]\nallow = ["bash()"]\n', "bash()"),
    ('[permissions]\nallow = ["bash git"]\n', "bash git"),
    ('[permissions]\nallow = "bash"\n', "allow"),
    ('[permissions]\ndefault = "maybe"\n', "default"),
    ('[permissions]\nalow = []\n', "did you mean 'allow'"),
    ('[hooks]\ntask_complete = "true"\n', "did you mean 'task_completed'"),
    ('[hooks]\npre_tool_use = 3\n', "pre_tool_use"),
    ('hooks = "x"\n', "hooks"),
])
def test_a_bad_rule_or_hook_is_a_settings_error_naming_it(ws: Workspace, table: str,
                                                          named: str) -> None:
    ws.settings_file.write_text(table)
    with pytest.raises(BadInput, match=re.escape(named)) as info:
        settings.load(ws)
    assert str(ws.settings_file) in str(info.value)


def test_the_tables_have_no_environment_variables(ws: Workspace,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAMD_PERMISSIONS", "garbage")
    monkeypatch.setenv("TEAMD_HOOKS", "garbage")
    monkeypatch.setenv("TEAMD_HOOK_TIMEOUT", "7")
    ws.settings_file.write_text('[permissions]\ndeny = ["bash"]\n')
    conf = settings.load(ws)
    assert conf.hook_timeout == 7 and [r.text for r in conf.permissions.deny] == ["bash"]
    assert dict(conf.hooks) == {}


def test_a_member_keeps_the_rules_in_force_when_the_file_breaks(ws: Workspace) -> None:
    ws.settings_file.write_text('[permissions]\ndeny = ["bash(rm*)"]\n')
    good = settings.load(ws)
    ws.settings_file.write_text('[permissions]\ndeny = ["bsh(rm*)"]\n')
    assert settings.load_or_keep(ws, good) is good
    ws.settings_file.write_text('[permissions]\ndeny = ["bash(mv*)"]\n')
    assert [r.text for r in settings.load_or_keep(ws, good).permissions.deny] == ["bash(mv*)"]
def test_an_unknown_key_says_did_you_mean(ws: Workspace) -> None:
    ws.settings_file.write_text("retry_max_wiat = 5\n")
    with pytest.raises(BadInput, match="unknown setting 'retry_max_wiat' "
                                       r"\(did you mean 'retry_max_wait'\?\)"):
        settings.load(ws)
    ws.settings_file.write_text("zzz = 5\n")
    with pytest.raises(BadInput) as info:
        settings.load(ws)
    assert "did you mean" not in str(info.value)  # nothing close: no guess


def test_retry_and_timeout_settings_from_the_file_and_the_environment(
        ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    ws.settings_file.write_text("retry_max_wait = 5\napi_timeout = 30\n")
    conf = settings.load(ws)
    assert (conf.retry_max_wait, conf.api_timeout) == (5, 30)
    monkeypatch.setenv("TEAMD_RETRY_MAX_WAIT", "2.5")
    monkeypatch.setenv("TEAMD_API_TIMEOUT", "7")
    conf = settings.load(ws)
    assert (conf.retry_max_wait, conf.api_timeout) == (2.5, 7)


def test_a_zero_api_timeout_is_refused(ws: Workspace) -> None:
    ws.settings_file.write_text("api_timeout = 0\n")
    with pytest.raises(BadInput, match="api_timeout must be more than 0"):
        settings.load(ws)
    ws.settings_file.write_text("retry_max_wait = 0\n")  # retry at once: allowed
    assert settings.load(ws).retry_max_wait == 0


def test_effort_is_empty_or_one_of_four_words(ws: Workspace) -> None:
    assert settings.load(ws).effort == ""
    for word in settings.EFFORTS:
        assert settings.load(ws, {"TEAMD_EFFORT": word}).effort == word
    with pytest.raises(BadInput, match=r"effort must be one of .*\(did you mean 'high'\?\)"):
        settings.load(ws, {"TEAMD_EFFORT": "hihg"})


def test_a_members_helpers_are_told_its_overrides_and_store_but_no_password(
        ws: Workspace) -> None:
    """Claude Code's rules hook and team tools server run in Claude Code's environment,
    not the member's: `helper_env` is what they are told (CONTRACT §14, §15)."""
    env = {"TEAMD_API_KEY_FILE": "/keys/anthropic.key", "TEAMD_IDLE_TIMEOUT": "5",
           "TEAMD_CRASH_AT": "3", "TEAMD_ROOT": "/elsewhere", "ANTHROPIC_API_KEY": "fake-1",
           "TEAMD_STORE": "postgresql://teamd:s3cret-pw@db/teamd"}
    told = settings.helper_env(ws, {**env, "HOME": str(ws.root)})
    assert told == {"TEAMD_API_KEY_FILE": "/keys/anthropic.key", "TEAMD_IDLE_TIMEOUT": "5",
                    "TEAMD_STORE": "postgresql://teamd@db/teamd"}
    chosen = Workspace.at(ws.root, store="postgresql://u:pw2@/x?host=/run/pg")
    assert settings.helper_env(chosen, {"HOME": str(ws.root)}) == {"TEAMD_STORE": "postgresql://u@/x?host=/run/pg"}
    assert settings.helper_env(ws, {"HOME": str(ws.root)}) == {}
    # a pgpass file the member has, its helpers are told where (their HOME is not its)
    (ws.root / ".pgpass").write_text("*:*:*:teamd:s3cret-pw\n")
    ws.settings_file.write_text('store = "postgresql://teamd@db/teamd"\n')
    assert settings.helper_env(ws, {"HOME": str(ws.root)}) == {
        "PGPASSFILE": str(ws.root / ".pgpass")}
