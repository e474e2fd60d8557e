"""The JSON documents the web view's pages render, each built by the code behind the
matching command, so the page shows what `teamctl … --json` shows:

- teams (`/`): `teamctl status --json` of every team (`observe.status_doc`);
- a team (`/t/TEAM`): its `status` entry, `board --json` (`observe.board_doc`),
  `requests --pending --json`, the journal newest first as `logs` reads it
  (`events.stream`, `output.describe_event`), and each member's spend over time (the
  `cost_usd` of its recent `model_call` events, summed as they come);
- a member (`/t/TEAM/m/NAME`): its status row and its conversation as `attach` reads it.
"""

from __future__ import annotations

from teamctl import journal, observe, output, transcript, views
from teamctl.web import conversation
from teamd import actions, events, requests
from teamd.errors import BadInput
from teamd.files import Json
from teamd.layout import Workspace, validate_member_name
from teamd.permissions import describe

JOURNAL_SHOWN = 200  #: the journal's newest events a team page shows
EVENTS_CHARTED = 10000  #: the newest journal events the spend chart is drawn from
ITEMS_SHOWN = 2000  #: the newest items of a conversation a member page shows


def _shown(doc: Json) -> Json:
    """`doc` (a `status` document) with each team's spend, and each member's row as
    `teamctl status` prints it (`cells`, by column header), as text: the page formats
    nothing itself."""
    for team in doc["teams"]:
        team["spent_shown"] = output.dollars(team.get("spent_usd") or 0.0)
        team["budget_shown"] = output.dollars(team.get("budget_usd"))
        for m in team["members"]:
            row = views.member_row(m)
            m["cells"] = {h: str(c[0] if isinstance(c, tuple) else c)
                          for h, c in zip(views.HEADERS, row, strict=True)}
            m["cells"]["BRANCH"] = views.branch_cell(m)
    return doc


def teams_doc(ws: Workspace) -> Json:
    return _shown(observe.status_doc(ws, ws.store.team_names()))


def _status_of(ws: Workspace, team: str) -> tuple[Json, Json]:
    """(the `status` document, the team's entry in it); BadInput for an unknown team."""
    actions.require_team(ws, team)
    doc = _shown(observe.status_doc(ws, [team]))
    for bad in doc["unreadable"]:
        raise BadInput(f"team {team} cannot be read: {bad['error']}")
    if not doc["teams"]:
        raise BadInput(f"unknown team {team!r}")
    return doc, doc["teams"][0]


def _journal(ws: Workspace, team: str, member: str | None, event: str | None) -> list[Json]:
    """The newest events, newest first, each with its `text` as `logs` prints it. With no
    `event` asked for, the routine ones (`logs` without -v) are left out."""
    def keep(rec: Json) -> bool:
        if not events.concerns(rec, [member] if member else []):
            return False
        return rec.get("event") == event if event else not events.is_chatter(rec)

    found = list(events.stream(ws, team, match=keep, last=JOURNAL_SHOWN))
    return [{**rec, "text": output.describe_event(rec)} for rec in reversed(found)]


def _spend(ws: Workspace, team: str) -> dict[str, list[list[float]]]:
    """Each member's spend over time: [[ts, dollars since the first call charted], …] from
    its model calls among the journal's last EVENTS_CHARTED events (read from the end: the
    cost of a refresh does not grow with the journal)."""
    series: dict[str, list[list[float]]] = {}
    for rec in events.stream(ws, team, last=EVENTS_CHARTED):
        if rec.get("event") != "model_call" or not rec.get("cost_usd"):
            continue
        points = series.setdefault(str(rec.get("member")), [])
        total = (points[-1][1] if points else 0.0) + float(rec["cost_usd"])
        points.append([events.ts_of(rec), round(total, 6)])
    return series


def team_doc(ws: Workspace, team: str, member: str | None = None,
             event: str | None = None) -> Json:
    doc, entry = _status_of(ws, team)
    pending = [{**r, "detail": describe(r) if r.get("kind") == "permission" else None}
               for r in requests.list_requests(ws, team, pending_only=True)]
    return {"supervisor": doc["supervisor"], "team": entry,
            "board": observe.board_doc(ws, team), "requests": pending,
            "journal": _journal(ws, team, member, event), "spend": _spend(ws, team)}


def member_doc(ws: Workspace, team: str, name: str) -> Json:
    validate_member_name(name)
    doc, entry = _status_of(ws, team)
    found = next((m for m in entry["members"] if m["name"] == name), None)
    kept, _color, note = journal.member_session(ws, team, name)
    records = transcript.history(ws, team, name, kept)
    return {"supervisor": doc["supervisor"], "team": {k: v for k, v in entry.items()
                                                      if k != "members"},
            "member": found, "note": note,
            "items": conversation.items(records, name)[-ITEMS_SHOWN:]}
