"""The invariants of CONTRACT §17, checked from the records (and the scripted server's log of
what each model was shown) after a run of the crash sweep. Each check returns the
violations it found, as sentences; none is the pass.

The records are read through the store seam (`w.ws.store`), so each check holds the
PostgreSQL store to the same promises as the files; the one check about what only files
have — a torn or bad line, a JSON document half-written — runs on the files store alone
(`files_parse`; a database commits a transaction whole, and `records_read` reads every
record of either store).

The fault suite's checks are reused where they exist (`tests/faults/faultkit.py`: shown
exactly once, tasks owned once); `teamd.journal_gaps` says what "the last journaled status"
is, the same rule teamd mends by.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from teamd import files, inbox, journal_gaps, requests, roster
from teamd.errors import TeamdError
from teamd.names import LEAD, USER
from teamd.store.files import FilesStore
from tests.faults import faultkit
from tests.harness import journal

if TYPE_CHECKING:
    from tests.crash.sweep import World

#: how many invariants `check` runs per run (each may find several violations)
COUNT = 10


def _caught(check: Callable[[], Any]) -> list[str]:
    try:
        check()
    except AssertionError as exc:
        return [str(exc).splitlines()[0]]
    return []


def pending_shutdowns(w: World) -> list[str]:
    """No `pending` shutdown record for a member with no live process (checked while
    teamd runs: whoever asked answered on its behalf, or it answered itself)."""
    out = []
    for team in w.ws.store.team_names():
        config = roster.load(w.ws, team)
        for r in requests.list_requests(w.ws, team, pending_only=True):
            m = roster.find(config, r["recipient"])
            if r["kind"] == "shutdown" and (m is None or not roster.is_live(m)):
                out.append(f"shutdown {r['request_id']} pending for {r['recipient']}, "
                           "not live")
    return out


def records_read(w: World) -> list[str]:
    """Every record of every team reads, through the store: its roster, each member's
    state, session and inbox, each task, request and journal line, its spend."""
    out: list[str] = []

    def read(what: str, get: Callable[..., Any], *args: Any) -> None:
        try:
            if get(*args) is None:
                out.append(f"{what}: missing")
        except TeamdError as exc:
            out.append(f"{what}: {exc}")

    store = w.ws.store
    for team in store.team_names():
        read(f"{team}'s roster", store.read_spec, team)
        spec = store.read_spec(team) or {"members": []}
        names = [m["name"] for m in spec["members"]]
        for name in names:
            read(f"{name}'s state", store.read_state, team, name)
            read(f"{name}'s session", store.read_session, team, name)
        for name in sorted({*names, LEAD, USER}):
            read(f"{name}'s inbox", inbox.peek, w.ws, team, name)
        for tid in store.task_ids(team):
            read(f"task {tid}", store.read_task, team, tid)
        read(f"{team}'s requests", store.list_requests, team)
        read(f"{team}'s journal", store.read_journal, team)
        read(f"{team}'s spend", store.read_spend, team)
    return out


def files_parse(w: World) -> list[str]:
    """Files only (a database commits a transaction whole: it has no torn line): every
    JSON document parses; every JSONL file has no bad line and no torn tail."""
    store = w.ws.store
    if not isinstance(store, FilesStore):
        return []
    out = []
    for top in (store.paths.teams_dir, store.paths.tasks_root):
        for path in sorted(top.rglob("*")) if top.is_dir() else []:
            if not path.is_file() or path.name.endswith((".lock", ".tmp", ".log")):
                continue
            if path.suffix == ".json" or path.name == ".highwatermark":
                if path.suffix == ".json":
                    try:
                        files.read_json(path)
                    except TeamdError as exc:
                        out.append(str(exc))
            elif path.suffix == ".jsonl":
                found = files.parse_lines(path.read_bytes())
                if not found.clean:
                    out.append(f"{path}: {len(found.bad)} bad line(s), torn tail "
                               f"{found.torn[:60]!r}")
    return out


def api_accepts(w: World) -> list[str]:
    """Every conversation a member rebuilt was one the API accepts (the scripted server
    answers 400, as the API would, to one it refuses)."""
    return [f"request {r['n']} of {r['agent']} refused: {r.get('reply')}"
            for r in w.server.requests if r.get("status") == 400]


def shown_once(w: World) -> list[str]:
    """Each message the scenario sent was shown to its recipient's model exactly once."""
    sent = getattr(w, "sent", [])
    return _caught(lambda: faultkit.assert_shown_once(w.ws, w.server, sent, w.team)) \
        if sent else []


def tasks_once(w: World) -> list[str]:
    """No task owned twice or completed twice."""
    return [v for team in w.ws.store.team_names()
            for v in _caught(lambda team=team: faultkit.assert_tasks_once(  # type: ignore[misc]
                w.ws, team, all_done=False))]


def journal_complete(w: World) -> list[str]:
    """No journal line lost for a change that happened: each member's status is where its
    last `status` line took it, each completed task has `task_completed`, each answered
    request `request_answered`."""
    out = []
    for team in w.ws.store.team_names():
        for m in roster.load(w.ws, team)["members"]:
            last = journal_gaps.last_journaled(w.ws, team, m["name"])
            if last != m["status"]:
                out.append(f"{m['name']} is {m['status']}, its journal says {last}")
        out += [f"task {t} completed, not journaled" for t in faultkit.journal_gaps(w.ws, team)]
        answered = {e.get("request_id") for e in journal(w.ws, team)
                    if e["event"] == "request_answered"}
        out += [f"request {r['request_id']} {r['status']}, not journaled"
                for r in requests.list_requests(w.ws, team)
                if r["status"] != "pending" and r["request_id"] not in answered]
    return out


def answered_once(w: World) -> list[str]:
    """Each answered request has exactly one answer message (one id), in the journal;
    a member that answered its own request sends none."""
    out = []
    for team in w.ws.store.team_names():
        answers: dict[str, set[str]] = {}
        for e in journal(w.ws, team):
            msg = e.get("message")
            if e["event"] == "message" and isinstance(msg, dict) \
                    and str(msg.get("type", "")).endswith("_response"):
                answers.setdefault(str(msg.get("request_id")), set()).add(str(msg["id"]))
        for r in requests.list_requests(w.ws, team):
            ids = answers.get(r["request_id"], set())
            if r["status"] != "pending" and r["sender"] != r["recipient"] and len(ids) != 1:
                out.append(f"request {r['request_id']} {r['status']} with {len(ids)} "
                           "answer message(s)")
            if r["status"] == "pending" and ids:
                out.append(f"request {r['request_id']} pending with an answer message")
    return out


def tools_once(w: World) -> list[str]:
    """No tool call run twice: each scripted `bash` appends its own marker line to
    `ran.txt`, and each marker is there at most once."""
    ran = w.workdir / "ran.txt"
    lines = ran.read_text().split() if ran.exists() else []
    return [f"tool call {mark} ran {n} times" for mark, n in Counter(lines).items() if n > 1]


def messages_once(w: World) -> list[str]:
    """Each reply a model sent once (by its token) reached the journal as one message
    (one id): a team tool re-run on resume would send a second."""
    out = []
    for token in getattr(w, "replies", []):
        ids = {e["message"]["id"] for team in w.ws.store.team_names() for e in journal(w.ws, team)
               if e["event"] == "message" and token in str(e["message"].get("content"))}
        if len(ids) != 1:
            out.append(f"reply {token} sent as {len(ids)} message(s)")
    return out


def check(w: World) -> list[str]:
    """Every invariant, the live one first (teamd still runs), the rest once it stopped."""
    found = [*w.found, *pending_shutdowns(w)]
    w.stop()
    for each in (records_read, files_parse, api_accepts, shown_once, tasks_once,
                 journal_complete, answered_once, tools_once, messages_once):
        found += each(w)
    return found
