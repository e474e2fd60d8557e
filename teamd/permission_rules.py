"""Permission rules as written (CONTRACT.md §11): `Tool` / `Tool(glob)` and the
`[permissions]` table of teamd.toml.

This module owns what a rule is (a ruled tool and an `fnmatch` glob over its main argument,
or any input), reading one with a BadInput that names it, and the table's default and
allow/ask/deny lists. It reads text only — no journal, no files — so the settings can hold
a team's rules without importing what acts on them (`teamd.permissions`).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Any

from teamd.errors import BadInput

#: the only tools rules apply to, and the input that is each one's main argument
RULED = {"bash": "command", "read_file": "path", "write_file": "path", "edit_file": "path"}
#: Claude Code's own tools a rule may name with a pattern (CONTRACT §14), and the input
#: that is each one's main argument; any other of its tools (`Agent`, …) may be named
#: without one. A rule naming one applies to that tool only.
CLAUDE_CODE = {"Bash": "command", "Read": "file_path", "Write": "file_path",
               "Edit": "file_path", "MultiEdit": "file_path", "NotebookEdit": "notebook_path",
               "Grep": "path", "Glob": "path", "WebFetch": "url", "WebSearch": "query"}
#: the team's tools (CONTRACT §8; their specs are `teamd.agent.tool_specs`'s, which a test
#: holds to this list): never ruled, whichever agent calls them
TEAM_TOOLS = frozenset({"TaskCreate", "TaskGet", "TaskUpdate", "TaskList", "SendMessage",
                        "SubmitPlan", "TeamCreate", "TeamDelete", "Task"})
#: a Claude Code tool's name: CamelCase (teamd's own tools are lower case)
_CLAUDE_NAME_RE = re.compile(r"[A-Z][A-Za-z0-9]*")
ACTIONS = ("allow", "ask", "deny")
_RULE_RE = re.compile(r"(?P<tool>[A-Za-z_][A-Za-z0-9_]*)(?:\((?P<pattern>.*)\))?", re.DOTALL)


@dataclass(frozen=True)
class Rule:
    """One rule as written (`text`), and what it means: a tool and a glob, or any input."""

    text: str
    tool: str
    pattern: str | None

    def matches(self, tool: str, arguments: tuple[str, ...]) -> bool:
        if tool != self.tool:
            return False
        if self.pattern is None:
            return True
        return any(fnmatch.fnmatchcase(a, self.pattern) for a in arguments)


@dataclass(frozen=True)
class Permissions:
    """The `[permissions]` table of teamd.toml."""

    default: str = "allow"
    allow: tuple[Rule, ...] = ()
    ask: tuple[Rule, ...] = ()
    deny: tuple[Rule, ...] = ()

    def as_toml_table(self) -> dict[str, Any]:
        return {"default": self.default, **{k: [r.text for r in getattr(self, k)]
                                            for k in ("allow", "ask", "deny")}}


def parse_rule(text: Any) -> Rule:
    """`Tool` or `Tool(glob)` over a ruled tool (or a Claude Code tool: `CLAUDE_CODE`);
    BadInput naming the rule otherwise."""
    if not isinstance(text, str):
        raise BadInput(f"rule {text!r} is not text")
    found = _RULE_RE.fullmatch(text.strip())
    if found is None:
        raise BadInput(f'bad rule "{text}": write Tool or Tool(pattern), e.g. "bash(git push*)"')
    tool, pattern = found["tool"], found["pattern"]
    if tool not in RULED and (not _CLAUDE_NAME_RE.fullmatch(tool) or tool in TEAM_TOOLS):
        raise BadInput(f'bad rule "{text}": {tool!r} is not a ruled tool; only '
                       f"{', '.join(RULED)} are, and Claude Code's own tools by their names "
                       f"({', '.join(CLAUDE_CODE)}, …)")
    if pattern is not None and tool not in RULED and tool not in CLAUDE_CODE:
        raise BadInput(f'bad rule "{text}": a pattern applies only to '
                       f"{', '.join((*RULED, *CLAUDE_CODE))}; write \"{tool}\" alone")
    if pattern is not None and not pattern.strip():
        raise BadInput(f'bad rule "{text}": the pattern is empty (write "{tool}" for any input)')
    return Rule(text.strip(), tool, pattern)


def parse_table(table: Any, where: str) -> Permissions:
    """The `[permissions]` table; BadInput naming the key or the rule that is wrong."""
    import difflib

    if not isinstance(table, dict):
        raise BadInput(f"{where}: [permissions] must be a table")
    keys = ("default", *ACTIONS)
    for key in table:
        if key not in keys:
            close = difflib.get_close_matches(str(key), keys, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise BadInput(f"{where}: unknown key {key!r} in [permissions]{hint}")
    default = table.get("default", "allow")
    if default not in ACTIONS:
        raise BadInput(f"{where}: [permissions] default must be one of {', '.join(ACTIONS)}, "
                       f"got {default!r}")
    lists: dict[str, tuple[Rule, ...]] = {}
    for key in ACTIONS:
        rules = table.get(key, [])
        if not isinstance(rules, list):
            raise BadInput(f"{where}: [permissions] {key} must be a list of rules")
        try:
            lists[key] = tuple(parse_rule(r) for r in rules)
        except BadInput as exc:
            raise BadInput(f"{where}: [permissions] {key}: {exc}") from None
    return Permissions(default=default, **lists)
