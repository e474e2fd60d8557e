"""The web view's actions, each through the function its command calls, so it writes
exactly what the command writes and refuses what the command refuses (CONTRACT §16):

send → `actions.send` (as the person), approve/reject → `actions.answer_request`,
task_add/task_update → `actions.add_task`/`update_task`, shutdown → `actions.shutdown`,
stop → `protocols.stop`, restart → `actions.restart`/`restart_all`, remove →
`protocols.remove`, budget → `actions.set_budget`. A refused action raises before it
touches anything (BadInput and the other TeamdErrors of the library).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from teamctl.messages import require_text
from teamctl.params import WAIT_DEFAULT
from teamctl.tasks import parse_ids
from teamd import actions, board, protocols
from teamd.errors import BadInput
from teamd.files import Json
from teamd.layout import Workspace

Act = Callable[[Workspace, str, Json], Any]


def _text(body: Json, key: str, required: bool = True) -> str | None:
    value = body.get(key)
    if value is None or value == "":
        if required:
            raise BadInput(f"{key} is required")
        return None
    if not isinstance(value, str):
        raise BadInput(f"{key} must be text")
    return value


def _send(ws: Workspace, team: str, body: Json) -> Any:
    content = require_text(_text(body, "content") or "")
    return actions.send(ws, team, _text(body, "to") or "", content)


def _answer(approve: bool) -> Act:
    def answer(ws: Workspace, team: str, body: Json) -> Any:
        rid = _text(body, "request_id") or ""
        feedback = _text(body, "feedback", required=False)
        return actions.answer_request(ws, team, rid, approve, feedback,
                                      always=approve and bool(body.get("always")))
    return answer


def _task_add(ws: Workspace, team: str, body: Json) -> Any:
    return actions.add_task(ws, team, _text(body, "subject") or "",
                            _text(body, "description", required=False) or "",
                            parse_ids(_text(body, "blocked_by", required=False)),
                            owner=_text(body, "owner", required=False))


def _task_update(ws: Workspace, team: str, body: Json) -> Any:
    try:
        task_id = int(body.get("task_id"))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise BadInput("task_id must be a task's number") from None
    owner = body.get("owner")
    if owner is not None and not isinstance(owner, str):
        raise BadInput("owner must be text ('' clears it)")
    return actions.update_task(ws, team, task_id,
                               status=_text(body, "status", required=False),
                               owner=board.UNSET if owner is None else owner,
                               add_blocked_by=parse_ids(_text(body, "blocked_by", False)))


def _shutdown(ws: Workspace, team: str, body: Json) -> Any:
    return actions.shutdown(ws, team, _text(body, "name") or "",
                            reason=_text(body, "reason", required=False) or "")


def _stop(ws: Workspace, team: str, body: Json) -> Any:
    name = _text(body, "name") or ""
    protocols.stop(ws, team, name, WAIT_DEFAULT)
    return {"stopped": name}


def _restart(ws: Workspace, team: str, body: Json) -> Any:
    name = _text(body, "name", required=False)
    if name is None:
        return {"restarted": actions.restart_all(ws, team)}
    actions.restart(ws, team, name)
    return {"restarted": [name]}


def _remove(ws: Workspace, team: str, body: Json) -> Any:
    return protocols.remove(ws, team, _text(body, "name") or "",
                            force=bool(body.get("force")), timeout=WAIT_DEFAULT)


def _budget(ws: Workspace, team: str, body: Json) -> Any:
    usd = body.get("usd")
    if not isinstance(usd, str | int | float) or isinstance(usd, bool):
        raise BadInput("usd is required: the cap in US dollars (0 removes it)")
    return actions.set_budget(ws, team, str(usd), member=_text(body, "member", False))


ACTS: dict[str, Act] = {
    "send": _send, "approve": _answer(True), "reject": _answer(False),
    "task_add": _task_add, "task_update": _task_update, "shutdown": _shutdown,
    "stop": _stop, "restart": _restart, "remove": _remove, "budget": _budget,
}


def run(ws: Workspace, team: str, body: Any) -> Any:
    """Do the action `body["action"]` on `team`; its result (JSON), or a TeamdError."""
    if not isinstance(body, dict):
        raise BadInput("the body must be a JSON object")
    act = ACTS.get(str(body.get("action")))
    if act is None:
        raise BadInput(f"unknown action {body.get('action')!r}; one of {', '.join(ACTS)}")
    actions.require_team(ws, team)
    return act(ws, team, body)
