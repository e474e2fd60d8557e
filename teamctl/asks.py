"""`approve`, `reject` and `requests`: the person's answers to plan and permission
requests, and the list of every request (CONTRACT §6, §11).

Registered on the app by teamctl.cli; the compare-and-set and the answer message are
`teamd.actions.answer_request`'s.
"""

from __future__ import annotations

from typing import Annotated

import typer

from teamctl import output
from teamctl.params import JsonOpt, RequestArg, TeamArg, ws
from teamd import actions, requests
from teamd.permissions import describe
from teamd.records import Request


def approve(team: TeamArg,
            request_id: RequestArg,
            feedback: Annotated[str | None, typer.Option(help="Notes for the member.")] = None,
            always: Annotated[bool, typer.Option(
                "--always", help="Permission requests: also allow this exact call from now on "
                "(added to the team's permissions.json).")] = False,
            ) -> None:
    """Approve a plan or a permission request.

    An approved plan opens the member's write tools; an approved permission request runs
    the waiting tool call, once. --always also allows that exact call from now on.

    \b
    Example:
      teamctl approve shop perm-3f2a9c01bd --always
    """
    actions.answer_request(ws(), team, request_id, True, feedback, always=always)
    print(f"approved {request_id}" + (" (always allowed from now on)" if always else ""))


def reject(team: TeamArg,
           request_id: RequestArg,
           feedback: Annotated[str, typer.Option(help="What to change, or why not (required).",
                                                 show_default=False)] = "",
           ) -> None:
    """Reject a plan or a permission request, with feedback.

    The member revises a rejected plan; a refused tool call is not run and the model reads
    the feedback.

    \b
    Example:
      teamctl reject shop 4f1c2a --feedback 'Add tests first'
    """
    actions.answer_request(ws(), team, request_id, False, feedback)
    print(f"rejected {request_id}")


def requests_cmd(team: TeamArg,
                 pending: Annotated[bool, typer.Option("--pending", help="Only unanswered.")
                                    ] = False,
                 as_json: JsonOpt = False) -> None:
    """List shutdown, plan-approval and permission requests.

    A permission request shows the tool and its argument; --json has its whole input.

    \b
    Example:
      teamctl requests shop --pending
    """
    actions.require_team(ws(), team)
    records = requests.list_requests(ws(), team, pending_only=pending)
    if as_json:
        output.emit_json(records)
        return

    def detail(r: Request) -> str:
        if r["kind"] == "permission":
            said = r.get("feedback") or r.get("answer_reason")
            return output.short(describe(r) + (f" ({said})" if said else ""), 70)
        # the asker's words (a shutdown's reason is null when none was given: `-`)
        return output.short(r.get("plan") or r.get("feedback") or r.get("reason") or "-", 50)

    rows = [(r["request_id"], r["kind"], r["sender"], r["recipient"], r["status"],
             output.ago(r["created_at"]), detail(r)) for r in records]
    print(output.table(["REQUEST", "KIND", "FROM", "TO", "STATUS", "OPENED", "DETAIL"], rows)
          if rows else "no requests")
