"""Permission rules at work (CONTRACT.md §11): deciding a call, the team's "always" answers
(kept by the store: the files' `.teams/{team}/permissions.json`), and opening an ask. The
rules' format and the `[permissions]` table are `teamd.permission_rules`'s.

A rule is an `fnmatch` glob over a tool's main argument: the command of `bash` (surrounding
whitespace trimmed), the path of a file tool made relative to the member's cwd and
normalised. The first match in the order deny → always → ask → allow decides, else the
`default`. Nothing here runs a tool or waits: the toolbox asks, the agent loop waits.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teamd import events, inbox, requests
from teamd.errors import BadInput
from teamd.files import Json
from teamd.layout import Workspace
from teamd.permission_rules import CLAUDE_CODE, RULED, Permissions, Rule, parse_rule

log = logging.getLogger(__name__)

#: the tools whose main argument is a command, a URL or a query, not a path
NOT_PATHS = frozenset({"bash", "Bash", "WebFetch", "WebSearch"})

#: how much of the main argument a permission_request message carries (the record has all)
ARG_SHOWN = 4096


@dataclass(frozen=True)
class Verdict:
    action: str  # allow | ask | deny
    rule: str  # the rule's text, "always: …" for the team's answers, or "default"


# -- deciding ----------------------------------------------------------------------------
def _key(tool: str) -> str | None:
    """The input that is `tool`'s main argument (teamd's or Claude Code's), if it has one."""
    return RULED.get(tool) or CLAUDE_CODE.get(tool)


def main_argument(tool: str, tool_input: Json, cwd: Path) -> str:
    """What rules match and what the lead is shown: the trimmed command (URL, query), or
    the path relative to `cwd`, normalised (`./a/../.git/config` is `.git/config`)."""
    key = _key(tool)
    raw = tool_input.get(key) if key is not None else None
    if not isinstance(raw, str):
        return ""
    if tool in NOT_PATHS:
        return raw.strip()
    path = os.path.expanduser(raw) if raw.startswith("~") else raw
    return os.path.relpath(os.path.normpath(os.path.join(cwd, path)), os.path.normpath(cwd))


def _arguments(tool: str, tool_input: Json, cwd: Path) -> tuple[str, ...]:
    """The argument, and for a file tool also the path with every symlink resolved: a rule
    on `.git/*` must not be walked around through a link that points into `.git`."""
    shown = main_argument(tool, tool_input, cwd)
    if tool in NOT_PATHS or not shown:
        return (shown,)
    raw = str(tool_input[str(_key(tool))])
    path = os.path.expanduser(raw) if raw.startswith("~") else raw
    try:
        # resolved from the path as given, not from `shown`: a link followed by `..`
        # (`d/../config` with `d -> .git/hooks`) is where the tool writes, `.git/config`
        real_cwd = os.path.realpath(cwd)
        resolved = os.path.relpath(os.path.realpath(os.path.join(real_cwd, path)), real_cwd)
    except (OSError, ValueError):  # a NUL in the path: the tool itself refuses it
        return (shown,)
    return (shown,) if resolved == shown else (shown, resolved)


def decide(perms: Permissions, always: tuple[Rule, ...], tool: str | None, tool_input: Json,
           cwd: Path, own: tuple[str, Json] | None = None) -> Verdict:
    """deny → the team's always rules → ask → allow → default. Unruled tools are allowed.
    `own`: the Claude Code call (its tool's name, its input) that `tool` stands for, or
    that no ruled tool stands for (`tool` None): rules naming it apply too (§14)."""
    calls = [(name, _arguments(name, given, cwd)) for name, given in
             ([(tool, tool_input)] if tool in RULED else []) + ([own] if own else [])
             if name is not None]
    if not calls:
        return Verdict("allow", "")
    for action, rules in (("deny", perms.deny), ("allow", always), ("ask", perms.ask),
                          ("allow", perms.allow)):
        for rule in rules:
            if any(rule.matches(name, arguments) for name, arguments in calls):
                return Verdict(action, rule.text)
    return Verdict(perms.default, "default")


def escape(argument: str) -> str:
    """`argument` as a glob that matches only itself: `*?[` become `[*]`, `[?]`, `[[]`."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in argument)


# -- the team's "always" answers ---------------------------------------------------------
def always_rules(ws: Workspace, team: str) -> tuple[Rule, ...]:
    """The allow rules `teamctl approve --always` added; a bad entry is skipped and logged
    (the record is ours, but a person may edit it: one typo must not stop every tool)."""
    try:
        texts = ws.store.always_rules(team)
    except Exception as exc:
        log.warning("%s; ignoring the team's always rules", exc)
        return ()
    out = []
    for text in texts:
        try:
            out.append(parse_rule(text))
        except BadInput as exc:
            log.warning("team %s, always rules: %s", team, exc)
    return tuple(out)


def always_rule(tool: str, argument: str) -> str:
    """`Tool(exact argument)`, the rule `approve --always` adds; BadInput if it is none
    (an empty argument would be `bash()`, which allows nothing)."""
    if not argument.strip():
        raise BadInput(f"--always needs a call with an argument; this {tool} call has none")
    rule = f"{tool}({escape(argument)})"
    parse_rule(rule)
    return rule


def add_always(ws: Workspace, team: str, rule: str) -> str:
    """Add a rule made by `always_rule` to the team's "always" rules (once); returns it."""
    ws.store.add_always(team, rule)
    return rule


# -- asking ------------------------------------------------------------------------------
def request_id_for(team: str, member: str, tool_use_id: str | None) -> str:
    """One request per tool call: the id comes from the call's id, so a member restarted
    while waiting finds the same record again instead of asking twice."""
    if not tool_use_id:
        return f"perm-{secrets.token_hex(5)}"
    digest = hashlib.sha256(f"{team}/{member}/{tool_use_id}".encode()).hexdigest()
    return f"perm-{digest[:10]}"


def describe(record: Mapping[str, Any]) -> str:
    """`bash: git push origin main` — one line for listings."""
    return f"{record.get('tool')}: {_shorten(' '.join((record.get('argument') or '').split()))}"


def open_ask(ws: Workspace, team: str, member: str, recipient: str, tool: str,
             tool_input: Json, argument: str, rule: str, request_id: str
             ) -> Mapping[str, Any]:
    """Open the permission request record (if it is not there yet) and make sure the ask
    reached `recipient`: the record's `asked` flag is set only once the message is in,
    so a crash between the two re-sends it (same message id: shown once)."""
    record: Mapping[str, Any] | None = ws.store.read_request(team, request_id)
    if record is None:
        record = requests.open_request(ws, team, "permission", member, recipient,
                                       request_id=request_id, tool=tool, tool_input=tool_input,
                                       rule=rule, argument=argument)
    if record.get("asked") or record["status"] != "pending":
        return record
    cut = argument if len(argument.encode()) <= ARG_SHOWN else \
        argument.encode()[:ARG_SHOWN].decode("utf-8", "ignore")
    content = (f"{member} asks to run {tool}: {cut}\n"
               f'(rule "{rule}", request {request_id}) Answer with SendMessage type '
               f'permission_response, request_id "{request_id}", approve true or false '
               f"(feedback says why when refusing); or: teamctl approve {team} {request_id} "
               f'[--always] / teamctl reject {team} {request_id} --feedback "…"')
    msg = inbox.make("permission_request", member, recipient, content,
                     request_id=request_id, tool=tool, input=cut, rule=rule)
    msg["id"] = f"{request_id}-ask"
    inbox.deliver(ws, team, [msg])
    events.emit(ws, team, "permission_asked", member=member, tool=tool,
                input=_shorten(argument), rule=rule, request_id=request_id)
    return requests.set_flag(ws, team, request_id, "asked")


def _shorten(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} chars)"


def journal_denied(ws: Workspace, team: str, member: str, tool: str, argument: str,
                   rule: str) -> None:
    events.emit(ws, team, "tool_denied", member=member, tool=tool, input=_shorten(argument),
                rule=rule)


def refused_text(record: Mapping[str, Any]) -> str:
    why = record.get("feedback") or record.get("answer_reason") or "no reason"
    return f"permission refused: {why}"


def time_left(record: Mapping[str, Any], timeout: float) -> float | None:
    """Seconds until an ask is refused as `timeout` (`permission_timeout`; 0: never)."""
    return float(record["created_at"]) + timeout - time.time() if timeout > 0 else None


def refuse_ask(ws: Workspace, team: str, request_id: str, why: str) -> Json | None:
    """End a wait for an ask: reject it (`shutting down`, `timeout`); None when it was
    answered meanwhile (that answer stands)."""
    try:
        return requests.answer(ws, team, request_id, False, reason=why)
    except BadInput:
        return None
