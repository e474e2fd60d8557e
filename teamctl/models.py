"""What teamctl says about members' models: `teamctl prices` (the price table in force, and
the installed SDK's models it has no price for) and the one-line warnings of `spawn` and
`budget` about a model with no price under a budget (CONTRACT.md sections 9 and 12; a
deprecated, retired or unknown model is `teamctl.advice`'s). The SDK is read from its source,
never imported.
"""

from __future__ import annotations

import sys
from typing import Any

from teamctl import output
from teamd import deprecations, prices, roster, settings
from teamd.errors import TeamdError
from teamd.files import Json
from teamd.layout import Workspace


def _settings(ws: Workspace) -> settings.Settings | None:
    try:
        return settings.load(ws)
    except TeamdError:
        return None  # a broken teamd.toml is teamd's to report; the action stands


def warn_if_unpriced(ws: Workspace, team: str, member: str | None = None) -> None:
    """After a budget is set (`spawn --budget`, `budget`): one line on stderr per model with
    no price among the members a budget covers — `member`'s, or with None every member of
    the team whose own or team budget is set. Such a member is paused, never called."""
    conf = _settings(ws)
    try:
        config = roster.load(ws, team)
    except TeamdError:
        return
    if conf is None:
        return
    team_budget = config.get("budget_usd") is not None
    unpriced: dict[str, list[str]] = {}
    for m in config["members"]:
        if (member is not None and m["name"] != member) or not (
                team_budget or m.get("budget_usd") is not None):
            continue
        model = m.get("model") or conf.model
        if prices.price_of(model, conf.prices) is None:
            unpriced.setdefault(model, []).append(m["name"])
    for model, names in unpriced.items():
        print(f"warning: no price for model {model} ({', '.join(names)}): under a budget it "
              "is paused, never called; add it under [prices] in teamd.toml", file=sys.stderr)


def show_prices(ws: Workspace, as_json: bool) -> None:
    """`teamctl prices`: every row in force, `[prices]` included, and the SDK's models
    with no price."""
    conf = settings.load(ws)
    rows = prices.in_force(conf.prices)
    missing = [m for m in deprecations.sdk_models() if prices.price_of(m, conf.prices) is None]
    if as_json:
        output.emit_json({"models": [price.as_json(model) for model, price in rows.items()],
                          "unpriced": missing})
        return

    def rate(value: float) -> str:
        return f"{value:g}"

    table: list[list[Any]] = []
    for model, price in rows.items():
        r = price.rates
        long = price.long
        table.append([model, rate(r.input), rate(r.output), rate(r.cache_write_5m),
                      rate(r.cache_write_1h), rate(r.cache_read),
                      "-" if long is None else f"> {long.threshold:,}: {rate(long.rates.input)}"
                      f" / {rate(long.rates.output)}, read {rate(long.rates.cache_read)}",
                      price.checked or "-", price.source])
    print("US dollars per million tokens")
    print(output.table(["MODEL", "INPUT", "OUTPUT", "WRITE 5M", "WRITE 1H", "READ", "LONG",
                        "CHECKED", "SOURCE"], table))
    if missing:
        known = prices.known_unpriced()
        print("\nno price (add one under [prices] in teamd.toml to use it under a budget):")
        for model in missing:
            print(f"  {model}" + (f": {known[model]}" if model in known else ""))


def budget_line(done: Json, team: str, member: str | None) -> str:
    """What `teamctl budget` says it did."""
    whose = f"{member} in team {team}" if member else f"team {team}"
    spent = prices.dollars(done["spent_usd"])
    if done["budget_usd"] is None:
        return f"no budget for {whose} (spent so far {spent})"
    return f"budget for {whose}: {prices.dollars(done['budget_usd'])} (spent so far {spent})"
