"""`teamctl transcript` and `teamctl attach`: one member's conversation as a person reads it.

This module owns reading a member's session (the record types of `teamd.agent.session`,
kept by the store) for people, and rendering each record: the model's text, its thinking
(dimmed, apart from what it says), each tool call and its (shortened) result, messages in
and out, compactions; every text it did not write made `output.safe`. A session is only
ever appended to (a compaction is one more record), so reading it from the top covers
restarts and compactions; if it ever starts with a compaction, the full history that
compaction saved as a transcript is shown first.
"""
from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import Any

from teamctl import output
from teamd.files import Json
from teamd.layout import Workspace

log = logging.getLogger(__name__)

RESULT_LINES = 3  # lines of a tool result shown
RESULT_WIDTH = 160  # characters per line of a tool result shown
INPUT_WIDTH = 120  # characters of a tool's main input shown
THINKING_WIDTH = 800  # characters of a thinking block shown
THOUGHT = "(thinking) "  # what marks the model's thinking apart from what it says
BLANK_TIME = " " * 8  # where a record carries no time (the turns of a saved transcript)

#: the tool input worth showing, per tool (the rest is in the session file)
MAIN_INPUT = {"bash": "command", "read_file": "path", "write_file": "path", "edit_file": "path",
              "TaskCreate": "subject", "TaskGet": "task_id", "TaskUpdate": "task_id",
              "SubmitPlan": "plan", "TeamCreate": "name", "TeamDelete": "name",
              "Task": "name"}
MESSAGE_RE = re.compile(r'<teammate-message sender="([^"]*)" type="([^"]*)"[^>]*>(.*?)'
                         r"</teammate-message>", re.S)

Paint = Callable[[str, str | None], str]


# -- rendering ---------------------------------------------------------------------------
class Renderer:
    """Turns session records into lines; `paint` colours (teamctl.output.paint)."""

    def __init__(self, name: str, color: str | None, paint: Paint = output.paint) -> None:
        self.name = name
        self.color = color
        self.paint = paint

    def _when(self, ts: Any) -> str:
        return output.when(ts) if isinstance(ts, int | float) and ts else BLANK_TIME

    def _line(self, ts: Any, text: str) -> str:
        return f"{self.paint(self._when(ts), 'dim')} {text}"

    def _block(self, ts: Any, head: str, body: str) -> list[str]:
        """`head` then `body`, its later lines indented under the first."""
        lines = body.splitlines() or [""]
        pad = " " * (len(self._when(ts)) + 1) + " " * len(_strip(head))
        return [self._line(ts, head + lines[0]), *(pad + line for line in lines[1:])]

    def record(self, rec: Json) -> list[str]:
        kind, ts = rec.get("type"), rec.get("ts")
        if kind == "assistant":
            return [line for block in rec.get("content") or [] for line in
                    self._assistant_block(ts, block)]
        if kind == "tool_result":
            return self._result(ts, rec.get("block") or {})
        if kind == "inbox":
            return [line for m in rec.get("messages") or [] for line in self._message_in(ts, m)]
        if kind == "user":
            return [line for b in rec.get("content") or [] if b.get("type") == "text"
                    for line in self._block(ts, self.paint("» ", "dim"),
                                            self.paint(_cut(str(b.get("text", "")), 800),
                                                       "dim"))]
        if kind == "compaction":
            before = rec.get("before_tokens")
            size = f" at {before} tokens" if before else ""
            where = output.safe(str(rec.get("transcript") or "transcripts/"))
            head = self.paint(f"── compacted{size}; the full history is in {where}. "
                              "Summary: ", "magenta")
            return self._block(ts, head, _cut(str(rec.get("summary", "")), 800))
        return [self._line(ts, self.paint(f"({kind} record)", "dim"))]

    def _assistant_block(self, ts: Any, block: Json) -> list[str]:
        kind = block.get("type")
        if kind == "text":
            text = output.safe(str(block.get("text", "")).strip())
            if not text:
                return []
            return self._block(ts, self.paint(f"{self.name}: ", self.color), text)
        if kind == "tool_use":
            return [self._line(ts, self._tool_call(output.safe(str(block.get("name"))),
                                                   block.get("input") or {}))]
        if kind == "thinking":  # dimmed, apart from what it says; empty when not shown
            text = str(block.get("thinking", "")).strip() or "(not shown)"
            return self._thought(ts, _cut(text, THINKING_WIDTH))
        if kind == "redacted_thinking":
            return self._thought(ts, "(redacted)")
        return []

    def _thought(self, ts: Any, text: str) -> list[str]:
        """Thinking, each line dimmed on its own (a line read alone still reads so)."""
        head, *rest = text.splitlines() or [""]
        pad = " " * (len(self._when(ts)) + 1 + len(THOUGHT))
        return [self._line(ts, self.paint(THOUGHT + head, "dim")),
                *(self.paint(pad + line, "dim") for line in rest)]

    def _tool_call(self, tool: str, args: Json) -> str:
        if tool == "SendMessage":
            kind = args.get("type") or "message"
            extra = "" if kind == "message" else f" [{output.safe(str(kind))}]"
            text = args.get("content") or args.get("reason") or args.get("feedback") or ""
            to = output.safe(str(args.get("recipient")))
            return self.paint(f"✉ {self.name} → {to}{extra}: ", "yellow") \
                + output.short(str(text), INPUT_WIDTH)
        key = MAIN_INPUT.get(tool)
        if key and key in args:
            shown = str(args[key])
        else:
            shown = json.dumps(args, ensure_ascii=False, default=str)
        return self.paint(f"⚙ {tool}: ", "cyan") + output.short(shown, INPUT_WIDTH)

    def _result(self, ts: Any, block: Json) -> list[str]:
        text = text_of(block.get("content"))
        lines = [output.short(line, RESULT_WIDTH) for line in text.splitlines()
                 if line.strip()] or ["(no output)"]
        if len(lines) > RESULT_LINES:
            lines = [*lines[:RESULT_LINES], f"… {len(lines) - RESULT_LINES} more line(s)"]
        if block.get("is_error"):
            return self._block(ts, self.paint("  ✗ ", "red"),
                               self.paint("\n".join(lines), "red"))
        return self._block(ts, self.paint("  ↳ ", "dim"), "\n".join(lines))

    def _message_in(self, ts: Any, msg: Json) -> list[str]:
        kind = msg.get("type", "message")
        extra = "" if kind == "message" else f" [{kind}]"
        head = self.paint(output.safe(f"✉ {msg.get('sender')} → "
                                      f"{msg.get('recipient', self.name)}{extra}: "), "yellow")
        return self._block(ts, head, _cut(str(msg.get("content", "")), 800))

    def turn(self, turn: Json) -> list[str]:
        """One Messages API turn of a saved transcript (no times: the API keeps none)."""
        content = turn.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else \
            content or []
        out: list[str] = []
        for block in blocks:
            if not isinstance(block, dict):
                continue
            if turn.get("role") == "assistant":
                out += self._assistant_block(None, block)
            elif block.get("type") == "tool_result":
                out += self._result(None, block)
            elif block.get("type") == "text":
                text = str(block.get("text", ""))
                found = list(MESSAGE_RE.finditer(text))
                if found:
                    for m in found:
                        out += self._message_in(None, {"sender": m.group(1),
                                                       "type": m.group(2),
                                                       "content": m.group(3)})
                else:
                    out += self._block(None, self.paint("» ", "dim"),
                                       self.paint(_cut(text, 800), "dim"))
        return out


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content
                         if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _cut(text: str, width: int) -> str:
    """`text` made `output.safe` (its lines kept), cut to `width` with `…`."""
    text = output.safe(text)
    return text if len(text) <= width else text[: width - 1] + "…"


def _strip(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


# -- reading -----------------------------------------------------------------------------
def history(ws: Workspace, team: str, name: str, kept: str | None = None) -> list[Json]:
    """Every record of the member's conversation (or of the session `kept` aside when it
    was removed or its team deleted), oldest first, after the turns of the saved transcript
    if it starts with a compaction (each such turn comes as {"type": "turn", "turn": …})."""
    records = ws.store.read_session(team, name, kept=kept)
    if records and isinstance(records[0].get("transcript"), str) \
            and records[0].get("type") == "compaction":
        turns = ws.store.read_transcript(team, name, records[0]["transcript"], kept=kept)
        if turns is not None:
            return [*({"type": "turn", "turn": t} for t in turns), *records]
    return records


def render(renderer: Renderer, rec: Json) -> list[str]:
    if rec.get("type") == "turn":
        return renderer.turn(rec.get("turn") or {})
    return renderer.record(rec)
