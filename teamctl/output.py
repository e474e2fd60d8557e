"""How teamctl prints: JSON for scripts, plain aligned tables for people, errors on stderr.

Tables are plain text on purpose: `rich` costs import time on every invocation, and the
commands must start fast; it is used only by the live `--watch` view.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from typing import Any

COLOR_CODES = {"cyan": 36, "yellow": 33, "magenta": 35, "green": 32, "blue": 34, "red": 31,
               "dim": 2, "bold": 1}


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def paint(text: str, color: str | None) -> str:
    if not color or not sys.stdout.isatty() or color not in COLOR_CODES:
        return text
    return f"\x1b[{COLOR_CODES[color]}m{text}\x1b[0m"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in cells]
    return "\n".join(lines)


def when(ts: float | None) -> str:
    if not ts:
        return "-"
    return time.strftime("%H:%M:%S", time.localtime(ts))


def ago(ts: float | None) -> str:
    if not ts:
        return "-"
    secs = max(0, time.time() - ts)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{int(secs // size)}{unit} ago"
    return f"{int(secs)}s ago"


def short(text: str, width: int = 60) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def human_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "K", "M", "G"):
        if n < 1024:
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024
    return f"{n:.1f}T"


def describe_event(rec: dict[str, Any]) -> str:
    """One readable line for a journal record."""
    ev = rec.get("event", "?")
    skip = {"ts", "event", "member"}
    if ev == "message" and isinstance(rec.get("message"), dict):
        m = rec["message"]
        extra = f" [{m['type']}]" if m.get("type") != "message" else ""
        return f"{m.get('sender')} → {m.get('recipient')}{extra}: {short(m.get('content', ''), 80)}"
    if ev == "status":
        return f"status {rec.get('from')} → {rec.get('to')}"
    if ev == "tool_call":
        args = rec.get("input")
        shown = short(json.dumps(args, ensure_ascii=False), 60) if args else ""
        if rec.get("ok", True):
            return f"tool {rec.get('tool')} {shown} ok ({rec.get('ms', 0)} ms)".rstrip()
        return (f"tool {rec.get('tool')} {shown} FAILED: "
                f"{short(str(rec.get('error') or 'no reason recorded'), 120)}")
    fields = " ".join(f"{k}={short(json.dumps(v, ensure_ascii=False), 40)}"
                      for k, v in rec.items() if k not in skip)
    return f"{ev} {fields}".rstrip()
