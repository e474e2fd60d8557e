"""A team's spend and the budgets that cap it (CONTRACT.md sections 4 and 12).

The team's spend (`{"schema": 1, "spent_usd"}`, the files' `.teams/{team}/spend.json`) holds
what the team's model calls have cost so far, members since removed included: one small
record, read before every call and added to as one step of the store (`add_spend`, after
the roster's and the member's units: roster → … → spend → events). `budget_usd` sits on
the team and on each member in the roster; `null` is none. A member checks both before
every model call (`reached`) and pauses while one is reached, or while one applies and its
model has no price (`blind`: a budget is never blind).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from teamd import prices
from teamd.errors import BadInput, TeamdError
from teamd.files import Json
from teamd.layout import Workspace

log = logging.getLogger(__name__)

SCHEMA = 1
SCOPES = ("member", "team")


@dataclass(frozen=True)
class Reached:
    """A budget that is spent: whose (`scope`), how much went, of how much."""

    scope: str
    spent_usd: float
    budget_usd: float

    def line(self) -> str:
        """`last_error` of a paused member: "team budget reached: $20.03 of $20.00"."""
        return (f"{self.scope} budget reached: {prices.dollars(self.spent_usd)} of "
                f"{prices.dollars(self.budget_usd)}")


def parse_usd(value: Any, what: str = "budget") -> float | None:
    """A budget as given by a person: dollars >= 0, finite; 0 means none (None)."""
    try:
        usd = float(value)
    except (TypeError, ValueError):
        raise BadInput(f"{what} must be an amount in US dollars, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(usd) or usd < 0:
        raise BadInput(f"{what} must be an amount in US dollars >= 0 (0 removes it), "
                       f"got {value!r}")
    return usd or None


def budget_of(doc: Json) -> float | None:
    """The `budget_usd` of a roster or a member entry (absent, null, 0 or junk: none)."""
    value = doc.get("budget_usd")
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or value <= 0:
        return None
    return float(value)


def spent(ws: Workspace, team: str) -> float:
    """What the team has spent so far; 0 when nothing was recorded (or the file is bad,
    said in the log: a bad spend file must not stop a team's calls)."""
    try:
        doc = ws.store.read_spend(team)
    except (TeamdError, OSError) as exc:
        log.warning("%s; counting the team's spend from 0", exc)
        return 0.0
    return _total(doc)


def _total(doc: Json | None) -> float:
    return prices.add((doc or {}).get("spent_usd"), 0.0)


def charge(ws: Workspace, team: str, amount: float) -> float:
    """Add `amount` to the team's spend as one step; return the new total."""
    doc = ws.store.add_spend(team, lambda doc: new_spend(prices.add(_total(doc), amount)))
    return float(doc["spent_usd"])


def new_spend(total: float = 0.0) -> Json:
    """The spend record: `total` so far (a new team's: nothing yet)."""
    return {"schema": SCHEMA, "spent_usd": total}


def reached(config: Json, name: str, team_spent: float) -> Reached | None:
    """The budget `name` has reached, if any: its own first, then the team's."""
    member = next((m for m in config["members"] if m["name"] == name), None)
    if member is not None:
        mine = budget_of(member)
        used = prices.add((member.get("usage") or {}).get("cost_usd"), 0.0)
        if mine is not None and used >= mine:
            return Reached("member", used, mine)
    team_budget = budget_of(config)
    if team_budget is not None and team_spent >= team_budget:
        return Reached("team", team_spent, team_budget)
    return None


def blind(config: Json, name: str, model: str, table: Mapping[str, prices.Price]) -> str | None:
    """`last_error` of a member a budget applies to (its own or the team's) whose model has
    no price: it makes no call, since its spend could not be counted (CONTRACT §12)."""
    member = next((m for m in config["members"] if m["name"] == name), None)
    covered = budget_of(config) is not None or (member is not None
                                                and budget_of(member) is not None)
    if not covered or prices.price_of(model, table) is not None:
        return None
    return f"no price for model {model}: add it under [prices] in teamd.toml"
