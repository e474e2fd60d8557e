"""Compaction: a long history replaced by the model's own summary (CONTRACT.md section 6,
"Context" and "Today's models").

What went before the turn in progress is summarised by the model (the summary call asks for
readable thinking like every call), the full history is saved to `transcripts/`, and the
session goes on from a compaction record. The turn in progress is carried over whole after
the summary — input not answered yet and an unfinished tool loop, its replies with their
thinking byte for byte, its tool calls and results — so the loop goes on where it was and
the API, which refuses a tool loop whose thinking was dropped, accepts it.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from teamd import events
from teamd.agent import context
from teamd.agent.session import compacted_head

if TYPE_CHECKING:
    from teamd.agent.builtin import BuiltinRuntime


def compact(runtime: BuiltinRuntime) -> bool:
    """Summarise what went before the turn in progress; True once done. False when there is
    nothing before it to summarise (the turn in progress is all there is) or the summary
    call got no answer (tried again before the next call)."""
    member = runtime.m
    session, before = member.session, runtime.last_context
    cut = session.turn_start()
    if not any(r["type"] == "assistant" for r in session.records[:cut]):
        return False
    carry = session.records[cut:]
    # trimmed like every other call: last_context was measured on the trimmed history
    messages = context.micro_compact(session.messages(member.identity, upto=cut))
    now = time.time()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.localtime(now)) + f".{int(now % 1 * 1e6):06d}"
    rel = member.ws.store.keep_transcript(member.team, member.name, stamp,
                                          session.messages(member.identity))
    request = {"type": "text", "text": context.SUMMARY_REQUEST}
    if messages and messages[-1]["role"] == "user":
        ask = [*messages[:-1], {"role": "user", "content": [*messages[-1]["content"], request]}]
    else:
        ask = [*messages, {"role": "user", "content": [request]}]
    reply = runtime.ask_model(ask, tool_choice={"type": "none"})
    if reply is None:
        return False
    summary = "\n".join(b.get("text", "") for b in reply.content
                        if b.get("type") == "text").strip() or "(no summary)"
    session.append({"type": "compaction", "summary": summary, "transcript": rel,
                    "known_ids": sorted(session.known_ids),
                    "claimed_ids": sorted(session.claimed_ids),
                    "before_tokens": before, "carry": carry})
    _journal(runtime)
    runtime.last_context = 0
    return True


def _journal(runtime: BuiltinRuntime, **extra: bool) -> None:
    """The `compacted` line of the compaction the session starts with."""
    member = runtime.m
    record = member.session.records[0]
    after = len(compacted_head(member.identity, record)) // 4 + len(
        json.dumps(record.get("carry", []), ensure_ascii=False)) // 4
    events.emit(member.ws, member.team, "compacted", member=member.name,
                before_tokens=record.get("before_tokens"), after_tokens=after,
                transcript=record.get("transcript"), **extra)


def mend(runtime: BuiltinRuntime) -> None:
    """At start: the `compacted` line of the compaction the session starts with, if the
    member was killed between the two (`"repaired": true`; only it writes either)."""
    m = runtime.m
    records = m.session.records
    if not records or records[0]["type"] != "compaction":
        return
    rel = records[0].get("transcript")
    if next(events.stream(m.ws, m.team, last=1, match=lambda r: r.get("event") == "compacted"
                          and r.get("member") == m.name and r.get("transcript") == rel),
            None) is None:
        _journal(runtime, repaired=True)
