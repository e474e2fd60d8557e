"""The records teamd keeps in files, as types: a member (what it should be and what it is),
a task, a message and a request (CONTRACT.md sections 3 to 6).

These are `TypedDict`s, not classes: the records are read from and written to JSON as they
are, and a reader keeps any field it does not know (a later issue's, a hand edit's). A
field that a record may lack — a later issue's, or one only some kinds carry — is
`NotRequired`; readers treat an absent field as null (CONTRACT §4). Generic documents (a
team's `config.json` as a whole, an event) stay `files.Json`; `check_shape` says whether a
`config.json` read from disk is a roster at all.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from teamd.errors import TeamdError
from teamd.layout import NAME_RE


class Usage(TypedDict):
    """A member's `usage`: its token counts (`prices.TOKEN_KEYS`) and their cost."""

    input_tokens: int
    output_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int
    cost_usd: float


class LastExit(TypedDict):
    """How a member's process last ended: an exit code or a signal, and when."""

    code: int | None
    signal: int | None
    at: float


class Worktree(TypedDict):
    """A member's git worktree (CONTRACT §13)."""

    path: str
    branch: str
    base: str
    repo: NotRequired[str]
    delete_branch: NotRequired[bool]  # `merge --delete-branch`: goes with the worktree


class MemberStatus(TypedDict):
    """What a member is right now: its live fields, `members/{name}.json` (CONTRACT §4)
    without its `schema` and `name` (the fields of `roster.STATUS_FIELDS`)."""

    status: str
    pid: int | None
    pid_create_time: float | None
    started_at: NotRequired[float | None]
    restart_at: NotRequired[float | None]
    restarts: int
    last_exit: LastExit | None
    last_error: str | None
    current_task: int | None
    usage: Usage
    host: NotRequired[str | None]  # the host it is placed on (a PostgreSQL store's, §15)


class MemberSpec(TypedDict):
    """What a member should be: its entry in `config.json` (CONTRACT §4)."""

    name: str
    agent_id: str
    kind: str  # "teammate" or "lead"
    role: str
    prompt: str
    model: str | None
    plan_mode_required: bool
    cwd: str
    color: str
    desired: str  # "running" or "stopped"
    joined_at: float
    restart_requested_at: NotRequired[float | None]
    budget_usd: NotRequired[float | None]
    worktree: NotRequired[Worktree | None]
    effort: NotRequired[str]  # output_config.effort; "": the setting's (CONTRACT §6)
    runtime: NotRequired[str]  # "teamd" or "claude-code"; absent: "teamd" (CONTRACT §14)
    pinned_host: NotRequired[str | None]  # `spawn --host`: it runs only there (§15)


class Member(MemberSpec, MemberStatus):
    """A member as readers see it (`roster.load`, `teamctl status --json`): its spec with
    its live fields merged over it."""


class Task(TypedDict):
    """A task on the board: `.tasks/{team}/{id}.json` (CONTRACT §5)."""

    schema: int
    id: int
    subject: str
    description: str
    status: str  # board.STATUSES
    owner: str | None
    blocked_by: list[int]
    blocks: list[int]
    created_by: str
    created_at: float
    updated_at: float
    claimed_at: float | None
    completed_at: float | None
    commits: NotRequired[list[str]]


class Message(TypedDict):
    """One line of an inbox (CONTRACT §3). The fields after `timestamp` belong to some
    types only (`inbox.EXTRA_FIELDS` says which a type must carry)."""

    id: str
    type: str
    sender: str
    recipient: str
    content: str
    timestamp: float
    summary: NotRequired[str]
    request_id: NotRequired[str]
    reason: NotRequired[str]
    approve: NotRequired[bool]
    plan: NotRequired[str]
    feedback: NotRequired[str]
    member: NotRequired[str]
    task_id: NotRequired[int]
    tool: NotRequired[str]
    input: NotRequired[str]
    rule: NotRequired[str]
    spent_usd: NotRequired[float]
    budget_usd: NotRequired[float]
    scope: NotRequired[str]


class Request(TypedDict):
    """A shutdown, plan or permission request: `requests/{request_id}.json` (CONTRACT §6).
    The fields after `feedback` are a permission request's."""

    schema: int
    request_id: str
    kind: str  # requests.KINDS
    sender: str
    recipient: str
    status: str  # pending, approved or rejected
    created_at: float
    resolved_at: float | None
    reason: str | None  # the asker's; None when it gave none
    plan: str | None
    feedback: str | None
    answer_reason: NotRequired[str | None]  # the answer's reason, once answered
    tool: NotRequired[str | None]
    input: NotRequired[dict[str, Any] | None]
    rule: NotRequired[str | None]
    argument: NotRequired[str | None]
    ran: NotRequired[bool]
    asked: NotRequired[bool]


def check_shape(path: str, config: Any) -> None:
    """TeamdError naming `path` (where the roster is) unless `config` has a roster's
    shape: an object whose `state` is a team's state and whose `members` are objects
    with a valid `name` — so a hand-edited file that parses is refused in one line, not
    met as a traceback later."""
    def bad(why: str) -> TeamdError:
        return TeamdError(f"{path}: not a roster: {why}")

    if not isinstance(config, dict):
        raise bad("not a JSON object")
    if config.get("state") not in ("active", "deleting"):
        raise bad(f"state {config.get('state')!r} is neither 'active' nor 'deleting'")
    members = config.get("members")
    if not isinstance(members, list):
        raise bad("'members' is not a list")
    for m in members:
        if not isinstance(m, dict) or not isinstance(m.get("name"), str) or \
                not NAME_RE.fullmatch(m["name"]):
            raise bad(f"a member that is not an object with a valid name: {m!r:.80}")
