"""`teamctl config`: the settings in force — teamd.toml and the `TEAMD_*` variables
together, as `teamd` would read them now, the tables a PostgreSQL store shares in place of
the file's — and where each came from (CONTRACT §9, §10, §15).
Registered on the app by teamctl.cli.

The API key's value is never printed: only whether one is set; nor is a store URL's password.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from teamctl import output
from teamctl.params import JsonOpt, ws
from teamd import settings
from teamd.errors import BadInput, TeamdError
from teamd.prices import Price
from teamd.store import urls

#: variables read from the environment only (CONTRACT §10); the key's value never shown
API_KEY, BASE_URL = "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"
#: the source of the tables a PostgreSQL store keeps for every host, not teamd.toml's
STORE = "store"


def settings_in_force() -> dict[str, dict[str, Any]]:
    """{KEY: {"value", "source"}}: every key of teamd.toml (its tables too), then the
    environment-only variables. A bad key or value is BadInput naming it."""
    w = ws()
    conf = settings.load_file(w)
    origin = settings.sources(w)
    try:
        if w.store.read_shared_tables() is not None:  # PostgreSQL: every host's (§15)
            conf = settings.apply_shared(w.store, conf)
            origin.update(dict.fromkeys(settings.TABLES, STORE))
    except BadInput:
        raise  # a hand-broken document: named, exit 2, as a broken teamd.toml is
    except TeamdError as exc:  # a store away: what this host's file says, and why
        print(f"teamctl: warning: {exc}; showing teamd.toml's [permissions], [hooks] and "
              "[prices]", file=sys.stderr)
    doc: dict[str, dict[str, Any]] = {
        key: {"value": value, "source": origin[key]}
        for key, value in conf.as_toml_table().items()}
    doc["store"]["value"] = urls.mask(conf.store)  # TEAMD_STORE may hold a password
    doc["permissions"] = {"value": conf.permissions.as_toml_table(),
                          "source": origin["permissions"]}
    doc["hooks"] = {"value": dict(conf.hooks), "source": origin["hooks"]}
    doc["prices"] = {"value": {model: _as_toml(model, price)
                               for model, price in conf.prices.items()},
                     "source": origin["prices"]}
    url = os.environ.get(BASE_URL) or None
    doc[BASE_URL] = {"value": url, "source": "env" if url else "default"}
    key_set = bool(os.environ.get(API_KEY))
    doc[API_KEY] = {"value": "(set; not shown)" if key_set else None,
                    "source": "env" if key_set else "default"}
    return doc


def _as_toml(model: str, price: Price) -> dict[str, Any]:
    """A `[prices]` entry as teamd.toml writes it: its rates and `long` tier."""
    row = price.as_json(model)
    return {k: v for k, v in row.items()
            if k not in ("model", "checked", "source") and v is not None}


def config(as_json: JsonOpt = False) -> None:
    """The settings in force — teamd.toml and TEAMD_* variables together — and where
    each came from: file, env or default, or store for the [permissions], [hooks] and
    [prices] a PostgreSQL store keeps for every host. A bad key or value in teamd.toml
    exits 2, naming it. The API key's value is never shown.

    \b
    Examples:
      teamctl config
      teamctl config --json | jq -r 'to_entries[] | select(.value.source != "default") | .key'
    """
    doc = settings_in_force()
    if as_json:
        output.emit_json(doc)
        return
    rows = [(key, _shown(entry["value"]), entry["source"]) for key, entry in doc.items()]
    print(output.table(["KEY", "VALUE", "SOURCE"], rows))
    print(f"\nfile: {ws().settings_file}" + ("" if ws().settings_file.is_file() else
                                              " (none: `teamctl init` writes one)"))
    if doc["permissions"]["source"] == STORE:
        print(f"store: {ws().store.description} ([permissions], [hooks] and [prices], the "
              "same on every host; `teamctl init --store` writes this file's there)")


def _shown(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # `idle_timeout = 5` reads back as 5, not 5.0
    if isinstance(value, dict | list):
        import json

        return json.dumps(value, ensure_ascii=False) if value else "-"
    return str(value)
