"""The budgets a member checks before every model call (CONTRACT.md section 12): while its
own or its team's budget is reached it makes no call; nor while a budget applies and its
model has no price — a budget is never blind. Either way the member is `paused` with the
reason in `last_error` and waits, woken by teamd (the roster, the spend, a SIGHUP that may
have added a price), until it may go on or a shutdown_request comes.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from teamd import budget, events, inbox, once, roster, settings
from teamd.errors import BadInput, TeamdError
from teamd.files import Json
from teamd.layout import LEAD, USER
from teamd.states import Status

if TYPE_CHECKING:
    from teamd.agent.member import Member

log = logging.getLogger(__name__)


class BudgetGate:
    """One member's gate. `told`: this process told the lead of the budget reached
    already (a member restarted while paused finds it told in the journal: `said`)."""

    def __init__(self, member: Member) -> None:
        self.m = member
        self.told = False

    def roster(self) -> Json:
        """The roster as the member sees it: read now, or the copy last read whole while
        config.json does not parse (the budgets last read stand)."""
        m = self.m
        try:
            m.roster_seen = roster.load(m.ws, m.team, only=m.name)
        except BadInput:
            raise  # the team is gone
        except TeamdError as exc:
            log.warning("%s; the budgets last read stand", exc)
        return m.roster_seen

    def reached(self) -> budget.Reached | None:
        """The member's or the team's budget, when reached."""
        config = self.roster()
        if budget.budget_of(config) is None and all(
                budget.budget_of(m) is None for m in config["members"]
                if m["name"] == self.m.name):
            return None  # no budget: no need to read the spend
        return budget.reached(config, self.m.name, budget.spent(self.m.ws, self.m.team))

    def blind(self) -> str | None:
        """Why the member may not call while a budget applies: its model has no price
        (teamd.toml as it is now: a price added and SIGHUP'd lets it go on)."""
        m = self.m
        m.conf = settings.load_or_keep(m.ws, m.conf)
        return budget.blind(m.roster_seen, m.name, m.model_name, m.conf.prices)

    def holds(self) -> str | None:
        """What holds the next call, in `last_error`'s words; None when it may go."""
        reached = self.reached()
        return reached.line() if reached is not None else self.blind()

    def wait(self) -> None:
        """Before a model call: while something holds it, make none. A budget reached is
        journaled (`budget_reached`) and told to the lead once (the LLM lead tells the
        person); a model with no price is said in `last_error`."""
        line, reached = self.pause()
        if line is None:
            return
        m = self.m
        watcher = m.waits.watcher()
        m.waits.watch_roster = True  # armed before the check below: no raise slips past
        try:
            while True:
                m.shutdowns.leave_if_asked(
                    "paused: budget reached" if reached else "paused: no price")
                if self.holds() is None:
                    break
                m.waits.wait_on(watcher, None)
        finally:
            m.waits.watch_roster = False
        log.info("no budget holds the call any more: going on")
        self.told = False
        m.standing.update(status=Status.ACTIVE, last_error=None)

    def pause(self) -> tuple[str | None, budget.Reached | None]:
        """Before a model call, without waiting: what holds it (`last_error`'s line) and
        the budget reached, if any. Held, the member is `paused` and the lead told of a
        budget reached, once. The forwarder of a Claude Code member answers the call with
        the line; `wait` waits until nothing holds it."""
        reached = self.reached()
        line = reached.line() if reached is not None else self.blind()
        if line is None:
            self.told = False
            return None, None
        m = self.m
        if m.standing.status != Status.PAUSED:
            log.warning("%s: paused, no model call until it may go on", line)
        m.standing.update(status=Status.PAUSED, last_error=line)
        if reached is not None and not self.told:
            self.told = True
            self.tell(reached, line)
        return line, reached

    def tell(self, reached: budget.Reached, line: str) -> None:
        """Journal `budget_reached`, then tell the lead in a message whose id the line
        gives. A member killed in between and restarted still paused finds that line (no
        `model_call` since, the same budget) and delivers its message only where it has
        not landed: told once (CONTRACT §12, §17)."""
        m = self.m
        facts: Json = {"scope": reached.scope, "spent_usd": reached.spent_usd,
                       "budget_usd": reached.budget_usd}
        said = self.said(facts) or events.emit(m.ws, m.team, "budget_reached",
                                                 member=m.name, **facts)
        raise_it = f"teamctl budget {m.team} USD" + (
            f" --member {m.name}" if reached.scope == "member" else "")
        # the LLM lead's own pause goes to the person beside it
        recipient = USER if m.kind == "lead" else LEAD
        once.deliver(m.ws, m.team, [inbox.make(
            "budget_reached", m.name, recipient,
            f"{m.name} is paused: {line}; `{raise_it}` raises it",
            id=f"{m.name}.budget.{int(float(said['ts']) * 1e6)}", member=m.name, **facts)])

    def said(self, facts: Json) -> Json | None:
        """This member's last `budget_reached` line, if it is of this budget and scope and
        no model call came after it: the same pause, already journaled."""
        m = self.m
        last = next(events.stream(m.ws, m.team, last=1, match=lambda r: r.get("member") ==
                                  m.name and r.get("event") in ("budget_reached",
                                                                "model_call")), None)
        if last is None or last["event"] != "budget_reached" or any(
                last.get(k) != facts[k] for k in ("scope", "budget_usd")):
            return None
        return last
