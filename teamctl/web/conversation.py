"""A member's conversation as the web view shows it: the records `teamctl attach` reads
(`teamctl.transcript.history`, across restarts and compactions), as items a page renders —
text, thinking, tool calls and their results, messages in and out, compactions.

Each item is {"kind", "ts", "text", …}; every text the product did not write is made
`output.safe` (control characters escaped, as in every human view) and stays whole: the
page folds what is long. Nothing here is HTML.
"""

from __future__ import annotations

import json
from typing import Any

from teamctl import output
from teamctl.transcript import MAIN_INPUT, MESSAGE_RE, text_of
from teamd.files import Json

Item = dict[str, Any]


def _item(kind: str, ts: Any, text: str, **extra: Any) -> Item:
    return {"kind": kind, "ts": ts if isinstance(ts, int | float) else None,
            "text": output.safe(text), **extra}


def _assistant(ts: Any, block: Json) -> list[Item]:
    kind = block.get("type")
    if kind == "text":
        text = str(block.get("text", "")).strip()
        return [_item("text", ts, text)] if text else []
    if kind == "thinking":
        return [_item("thinking", ts, str(block.get("thinking", "")).strip() or "(not shown)")]
    if kind == "redacted_thinking":
        return [_item("thinking", ts, "(redacted)")]
    if kind != "tool_use":
        return []
    tool, args = str(block.get("name")), block.get("input") or {}
    if tool == "SendMessage":
        said = args.get("content") or args.get("reason") or args.get("feedback") or ""
        return [_item("message_out", ts, str(said), recipient=output.safe(
            str(args.get("recipient"))), type=output.safe(str(args.get("type") or "message")))]
    key = MAIN_INPUT.get(tool)
    shown = str(args[key]) if key and key in args else json.dumps(args, ensure_ascii=False,
                                                                  default=str)
    return [_item("tool_call", ts, shown, tool=output.safe(tool))]


def _message_in(ts: Any, msg: Json, name: str) -> Item:
    return _item("message_in", ts, str(msg.get("content", "")),
                 sender=output.safe(str(msg.get("sender"))),
                 recipient=output.safe(str(msg.get("recipient", name))),
                 type=output.safe(str(msg.get("type", "message"))))


def _result(ts: Any, block: Json) -> Item:
    return _item("tool_result", ts, text_of(block.get("content")) or "(no output)",
                 error=bool(block.get("is_error")))


def _turn(turn: Json, name: str) -> list[Item]:
    """A turn of a transcript saved before a compaction (no times: the API keeps none)."""
    content = turn.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    out: list[Item] = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        if turn.get("role") == "assistant":
            out += _assistant(None, block)
        elif block.get("type") == "tool_result":
            out.append(_result(None, block))
        elif block.get("type") == "text":
            text = str(block.get("text", ""))
            found = list(MESSAGE_RE.finditer(text))
            out += [_message_in(None, {"sender": m.group(1), "type": m.group(2),
                                       "content": m.group(3)}, name) for m in found] \
                or [_item("user", None, text)]
    return out


def items(records: list[Json], name: str) -> list[Item]:
    """The items of a member's records (`transcript.history`), oldest first."""
    out: list[Item] = []
    for rec in records:
        kind, ts = rec.get("type"), rec.get("ts")
        if kind == "turn":
            out += _turn(rec.get("turn") or {}, name)
        elif kind == "assistant":
            out += [i for block in rec.get("content") or [] for i in _assistant(ts, block)]
        elif kind == "tool_result":
            out.append(_result(ts, rec.get("block") or {}))
        elif kind == "inbox":
            out += [_message_in(ts, m, name) for m in rec.get("messages") or []]
        elif kind == "user":
            out += [_item("user", ts, str(b.get("text", ""))) for b in rec.get("content") or []
                    if b.get("type") == "text"]
        elif kind == "compaction":
            out.append(_item("compaction", ts, str(rec.get("summary", "")),
                             transcript=output.safe(str(rec.get("transcript") or "")),
                             before_tokens=rec.get("before_tokens")))
    return out
