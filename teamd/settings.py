"""Settings: `teamd.toml` at the workspace root, overridden by the environment.

A flat table plus the `[permissions]`, `[hooks]` and `[prices]` tables (CONTRACT.md sections
10, 11, 12); with a PostgreSQL store the three tables in force are the store's, the same on
every host (§15: applied here, `apply_shared`; written by `teamd.shared_tables`), and only
the flat keys are each host's file's.
`TEAMD_<KEY>` overrides any key of the flat table (the tables have no variables); the API
key comes from the environment or the file `api_key_file` names (`teamd.apikey`), the base
URL from the environment, and neither is ever written anywhere.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from teamd.errors import BadInput, TeamdError
from teamd.permission_rules import Permissions, parse_table

if TYPE_CHECKING:
    from teamd.layout import Workspace
    from teamd.prices import Price
    from teamd.store.api import Store

log = logging.getLogger(__name__)

#: the hooks of CONTRACT §11, in the order `teamctl init` lists them
HOOKS = ("pre_tool_use", "task_created", "task_completed", "teammate_idle", "person_needed")
#: keys that are tables, not flat settings (no TEAMD_ variable, not in `as_toml_table`)
TABLES = ("permissions", "hooks", "prices")
#: settings that take one of a few words
#: `effort` (output_config.effort, CONTRACT §6); empty: the model's own default
EFFORTS = ("low", "medium", "high", "max")
CHOICES: dict[str, tuple[str, ...]] = {"lead_wake_on_idle": ("quiet", "each"),
                                       "cache_ttl": ("auto", "5m", "1h"),
                                       "effort": ("", *EFFORTS),
                                       "runtime": ("teamd", "claude-code")}


@dataclass(frozen=True)
class Settings:
    model: str = "claude-sonnet-5-5"
    max_tokens: int = 32000  # capped at the model's output limit (teamd.model_limits)
    idle_timeout: float = 60
    compact_threshold: int = 150000
    bash_timeout: float = 120
    backoff_initial: float = 1
    backoff_max: float = 60
    backoff_reset: float = 60
    restart_limit: int = 5
    restart_window: float = 60
    stop_timeout: float = 20
    events_max_bytes: int = 67108864
    events_keep: int = 5
    retry_max_wait: float = 60
    #: model calls in flight across the root; 0 = no limit (CONTRACT §12)
    max_concurrent_calls: int = 0
    #: "quiet": idle notifications wake an idle LLM lead only once the team is quiet
    lead_wake_on_idle: str = "quiet"
    permission_timeout: float = 0
    hook_timeout: float = 300
    api_timeout: float = 600
    #: prompt-cache TTL of the breakpoints: "5m", "1h" (the stable prefix), "auto" (§6, §10)
    cache_ttl: str = "auto"
    #: a file holding the API key instead of ANTHROPIC_API_KEY: an absolute path (0600) or
    #: a systemd credential's name; "" = none (CONTRACT §8, `teamd.apikey`)
    api_key_file: str = ""
    #: output_config.effort for members that set none; "" = the model's default (§6, §10)
    effort: str = ""
    #: a new member's agent: "teamd" (built in) or "claude-code" (CONTRACT §14)
    runtime: str = "teamd"
    #: the Claude Code command for `claude-code` members (§14)
    claude_code: str = "claude"
    #: where the records live: "files" (`.teams/`, `.tasks/`) or a PostgreSQL URL, its
    #: password never written here (CONTRACT §15; `teamd.store.urls`)
    store: str = "files"
    #: hosts of a PostgreSQL store (CONTRACT §15): a heartbeat every `host_heartbeat` s; a
    #: host silent for `host_timeout` s is dead and its members move; at most
    #: `max_members` on this host (0 = no limit)
    host_heartbeat: float = 5
    host_timeout: float = 30
    max_members: int = 0
    permissions: Permissions = field(default_factory=Permissions)
    #: hook name → shell command, only the hooks that are set
    hooks: Mapping[str, str] = field(default_factory=dict)
    #: model → price, from `[prices]`: overrides and additions to the built-in table
    prices: Mapping[str, Price] = field(default_factory=dict)

    def as_toml_table(self) -> dict[str, Any]:
        """The flat table (the `[permissions]`, `[hooks]` and `[prices]` tables are apart)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in TABLES}


_cache: dict[Path, tuple[tuple[int, int, int] | None, Settings]] = {}


def _coerce(key: str, value: Any, kind: type, source: str) -> Any:
    try:
        if kind is str:
            if not isinstance(value, str) or not (value or key in _MAY_BE_EMPTY):
                raise ValueError
            if key in CHOICES and value not in CHOICES[key]:
                close = difflib.get_close_matches(value, CHOICES[key], n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                words = ", ".join(c or '""' for c in CHOICES[key])
                raise BadInput(f"{source}: {key} must be one of {words}, "
                               f"got {value!r}{hint}")
            return value
        if isinstance(value, bool):
            raise ValueError
        if kind is int and isinstance(value, float) and not value.is_integer():
            raise ValueError  # int(1.5) would silently become 1
        number = kind(value)
        if number != number:
            raise ValueError  # NaN
    except (TypeError, ValueError, OverflowError):
        raise BadInput(f"{source}: {key} must be {'text' if kind is str else 'a number'}, "
                       f"got {value!r}") from None
    if number < 0:
        raise BadInput(f"{source}: {key} must not be negative")
    if number == 0 and key in _POSITIVE:
        raise BadInput(f"{source}: {key} must be more than 0")
    return number


def check(key: str, value: Any, source: str) -> Any:
    """`value` for setting `key` as `_coerce` reads it (BadInput naming `source` if bad):
    a per-member value such as `spawn --effort` obeys its setting's rule."""
    return _coerce(key, value, _kind(key), source)


# a call bounded by 0 s could never be answered
_POSITIVE = frozenset({"api_timeout", "host_heartbeat", "host_timeout"})
# text settings where "" means "none" (or, for a choice, the model's default)
_MAY_BE_EMPTY = frozenset({"api_key_file", *(k for k, c in CHOICES.items() if "" in c)})


def _did_you_mean(key: str) -> str:
    close = difflib.get_close_matches(key, [f.name for f in fields(Settings)], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def load(ws: Workspace, environ: Mapping[str, str] | None = None) -> Settings:
    """The settings a process applies: `load_file`, with the `[permissions]`, `[hooks]` and
    `[prices]` of the store instead of the file's where the store keeps them for every host
    (PostgreSQL, CONTRACT §15: `apply_shared`)."""
    return apply_shared(ws.store, load_file(ws, environ))


def load_file(ws: Workspace, environ: Mapping[str, str] | None = None) -> Settings:
    """This host's own: defaults, then `teamd.toml`, then `TEAMD_<KEY>` variables (the
    flat keys are always these). Cached on the file's stamp."""
    env = os.environ if environ is None else environ
    path = ws.settings_file
    try:
        st = path.stat()
        # the inode too: a replaced file can keep the size and the coarse mtime tick
        stamp: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
    except FileNotFoundError:
        stamp = None
    cached = _cache.get(path)
    if environ is None and cached and cached[0] == stamp:
        base = cached[1]
    else:
        base = from_table(_read_table(path) if stamp is not None else {}, str(path))
        if environ is None:
            _cache[path] = (stamp, base)
    overrides = {}
    for f in fields(Settings):
        raw = _env_value(env, f.name)
        if raw is not None:
            overrides[f.name] = _coerce(f.name, raw, _kind(f.name), env_name(f.name))
    if overrides:
        return replace(base, **overrides)
    return base


def from_table(table: Mapping[str, Any], where: str) -> Settings:
    """The settings a teamd.toml read as `table` says (the defaults for what it leaves
    out); BadInput naming `where` and the key for an unknown key or a bad value."""
    kinds = {f.name for f in fields(Settings)}
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in kinds:
            raise BadInput(f"{where}: unknown setting {key!r}{_did_you_mean(key)}")
        values[key] = _parse_table(key, value, where) if key in TABLES else \
            _coerce(key, value, _kind(key), where)
    return Settings(**values)


def file_table(ws: Workspace) -> dict[str, Any]:
    """`teamd.toml` as read, unchecked ({} when there is none); BadInput when it is no TOML."""
    path = ws.settings_file
    return _read_table(path) if path.is_file() else {}


#: the last shared document read, parsed: a member reads it before every call, parses it once
_parsed: dict[str, dict[str, Any]] = {}


def _shared_where(store: Store) -> str:
    """The shared tables' place, for a message to a person (the URL's password masked)."""
    return f"{store.description} (the shared [permissions], [hooks] and [prices])"


def apply_shared(store: Store, conf: Settings) -> Settings:
    """`conf` with the store's three tables instead of its own where the store keeps them;
    BadInput (BadRecord) naming the store's document when it cannot be read as tables."""
    doc = store.read_shared_tables()
    if doc is None:
        return conf
    key = json.dumps(doc, sort_keys=True)
    tables = _parsed.get(key)
    if tables is None:
        extra = sorted(set(doc) - set(TABLES))
        if extra:
            raise BadInput(f"{_shared_where(store)}: not a table it keeps: {', '.join(extra)}")
        parsed = from_table(doc, _shared_where(store))
        tables = {name: getattr(parsed, name) for name in TABLES}
        _parsed.clear()
        _parsed[key] = tables
    return replace(conf, **tables)


def store_url(ws: Workspace) -> str:
    """The `store` setting alone (TEAMD_STORE, else teamd.toml's, else `files`): the rest of
    the file is not checked, so a bad rule or a typo in another key — which `load` refuses,
    and a running teamd keeps its settings through — leaves the records within reach."""
    raw = _env_value(os.environ, "store")
    if raw is None and ws.settings_file.exists():
        raw = _read_table(ws.settings_file).get("store")
    return str(_coerce("store", raw, str, str(ws.settings_file))) if raw is not None \
        else Settings.store


def helper_env(ws: Workspace, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings a member's own helpers must read as the member does — Claude Code's
    rules hook and team tools server, whose environment is Claude Code's, not the
    member's (CONTRACT §14): its `TEAMD_<KEY>` overrides and the store it uses (`--store`
    too), as variables. Never a secret: a store URL goes without its password (they take
    it from the member's pgpass file, which they are told where to find: their HOME is
    Claude Code's state folder; a password given only in the URL or PGPASSWORD is not
    passed on, since their environment is readable by the commands Claude Code runs)."""
    from teamd.store import urls

    env = os.environ if environ is None else environ
    told = {env_name(f.name): raw for f in fields(Settings)
            if (raw := _env_value(env, f.name)) is not None}
    store = ws.store_url or told.get(env_name("store"))
    if store:
        told[env_name("store")] = urls.without_password(store)
    if urls.is_postgres(store or store_url(ws)):
        pgpass = env.get("PGPASSFILE") or str(Path(env.get("HOME", "~")).expanduser()
                                              / ".pgpass")
        if Path(pgpass).is_file():
            told["PGPASSFILE"] = pgpass
    return told


def _read_table(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: not valid TOML ({exc})") from None


def env_name(key: str) -> str:
    """The variable that overrides a key of the flat table: TEAMD_<KEY>."""
    return f"TEAMD_{key.upper()}"


def _env_value(env: Mapping[str, str], key: str) -> str | None:
    """The override of `key` in `env` (an empty variable is none; tables have none)."""
    raw = None if key in TABLES else env.get(env_name(key))
    return raw if raw else None


def sources(ws: Workspace, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Where each setting in force comes from: "env" (its TEAMD_<KEY>), "file"
    (teamd.toml) or "default". The file is read as it is: `load` says what is wrong in it."""
    env = os.environ if environ is None else environ
    in_file = set(file_table(ws))
    return {f.name: "env" if _env_value(env, f.name) is not None else
            "file" if f.name in in_file else "default" for f in fields(Settings)}


def load_or_keep(ws: Workspace, previous: Settings) -> Settings:
    """`load`, or `previous` when teamd.toml is broken: a running member keeps the rules
    and hooks in force, as teamd does on SIGHUP (CONTRACT §11)."""
    try:
        return load(ws)
    except TeamdError as exc:
        log.warning("%s; keeping the settings in force", exc)
        return previous


def _parse_table(key: str, value: Any, where: str) -> Any:
    if key == "permissions":
        return parse_table(value, where)
    if key == "prices":
        from teamd import prices

        return prices.parse_table(value, where)
    if not isinstance(value, dict):
        raise BadInput(f"{where}: [hooks] must be a table")
    hooks: dict[str, str] = {}
    for name, command in value.items():
        if name not in HOOKS:
            close = difflib.get_close_matches(str(name), HOOKS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise BadInput(f"{where}: unknown hook {name!r} in [hooks]; one of: "
                           f"{', '.join(HOOKS)}{hint}")
        if not isinstance(command, str):
            raise BadInput(f"{where}: [hooks] {name} must be a shell command (text)")
        if command.strip():  # an empty command is no hook
            hooks[name] = command
    return hooks


_KINDS: dict[str, type] = {"str": str, "int": int, "float": float}


def _kind(key: str) -> type:
    """The declared type of a setting (not its default's: `idle_timeout = 60` is a float)."""
    declared = next(f.type for f in fields(Settings) if f.name == key)
    return _KINDS[declared if isinstance(declared, str) else declared.__name__]


def write_defaults(ws: Workspace, force: bool = False) -> Path:
    """Write `teamd.toml` with every key at its default (refuses to overwrite unless forced)."""
    from teamd.files import atomic_write_bytes

    path = ws.settings_file
    if path.exists() and not force:
        raise BadInput(f"{path} already exists (use --force to overwrite)")
    atomic_write_bytes(path, defaults_text().encode())
    return path


def defaults_text() -> str:
    """What `teamctl init` writes: every key at its default, the tables explained."""
    import tomli_w

    header = ("# teamd settings; environment TEAMD_<KEY> overrides any key. Times in seconds.\n"
              "# api_key_file: a file holding the API key instead of the environment: an\n"
              "# absolute path only you can read (chmod 600), or a systemd credential's name.\n")
    perms = ("\n# Rules over bash, read_file, write_file, edit_file: Tool or Tool(glob), decided\n"
             "# deny -> the team's `approve --always` answers -> ask -> allow -> default.\n"
             + tomli_w.dumps({"permissions": Settings().permissions.as_toml_table()}))
    hooks = ("\n# Shell commands run at these points (exit 0 go on, 2 block with stderr as the\n"
             "# reason, anything else: the hook failed, go on). The event is JSON on stdin.\n"
             "[hooks]\n" + "".join(f'# {name} = "…"\n' for name in HOOKS[:-1])
             + "# person_needed: run (never blocking) when a request, a failure or a budget\n"
             "# lands in your inbox and waits for you: page yourself.\n"
             '# person_needed = "notify-send teamd \\"$TEAMD_TEAM needs you\\""\n')
    prices = ("\n# Dollars per million tokens, overriding or adding to the built-in prices\n"
              "# (`teamctl prices`); an omitted cache rate is 1.25 x (5-minute write), 2 x\n"
              "# (1-hour write) or 0.1 x (read) the input rate; `long` prices long prompts.\n"
              '[prices]\n# "claude-sonnet-5-5" = {input = 2.0, output = 10.0, cache_read = 0.1}\n'
              '# "my-model" = {input = 1.0, output = 5.0, long = {threshold = 100000, '
              'input = 2.0, output = 10.0}}\n')
    return header + tomli_w.dumps(Settings().as_toml_table()) + perms + hooks + prices
