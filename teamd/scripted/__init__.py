"""A scripted, Anthropic-compatible Messages API server for tests and the offline demo.

Point the real `anthropic` SDK at it through `ANTHROPIC_BASE_URL` (or `base_url=`) and it
answers from scenario rules over real HTTP, as today's API does: thinking on by default
(signed `thinking` and `redacted_thinking` blocks before the text and tool calls), every
stop reason, and a 400 for what the API refuses. `request` reads a request into the facts
rules test, `rules` owns a rule's format and matching, `scenario` the choice among rules,
`replies` a reply's format; `server` is the object tests hold, `handler` its HTTP side,
`wire` the bytes' shapes (JSON and SSE), `record` the record of requests; `thinking` the
thinking blocks and their signatures, `checks` the 400s, `claude_code` what Claude Code
sends beyond teamd's own requests (betas, `system` turns, `HEAD /api/hello`), `cache` the
prompt-cache accounting a reply's usage reports, `__main__` the standalone process.
Standard library only; it never imports `anthropic`.
"""

from teamd.scripted.cache import PromptCache
from teamd.scripted.request import Identity, RequestView, parse_identity
from teamd.scripted.rules import ErrorSpec, Rule
from teamd.scripted.scenario import Decision, Scenario
from teamd.scripted.server import ScriptedServer

__all__ = [
    "Decision",
    "ErrorSpec",
    "Identity",
    "PromptCache",
    "RequestView",
    "Rule",
    "Scenario",
    "ScriptedServer",
    "parse_identity",
]
