"""How teamctl prints: JSON for scripts, plain aligned tables for people, errors on stderr.

Tables are plain text on purpose: `rich` costs import time on every invocation, and the
commands must start fast; it is used only by the live `--watch` views. `paint` is the one
place an escape code is written: only to a terminal, and never with `NO_COLOR` set
(https://no-color.org). Widths are measured on what shows, escapes left out.

`safe` is the one guard between text the product did not write (a message, a task, a tool's
output, a model's reply, an error) and the operator's terminal: every human view passes such
text through it (tables, `short` and `describe_event` do it themselves); `--json` does not.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import unicodedata
from collections.abc import Sequence
from typing import Any

COLOR_CODES = {"cyan": 36, "yellow": 33, "magenta": 35, "green": 32, "blue": 34, "red": 31,
               "dim": 2, "bold": 1}
#: how each member status shows in a terminal (CONTRACT §4): trouble red and yellow,
#: work green, the states without a process dim
STATUS_COLORS = {"failed": "red", "backoff": "yellow", "paused": "yellow",
                 "stopping": "yellow", "waiting": "magenta", "starting": "cyan",
                 "active": "green", "idle": None, "sleeping": "dim", "pending": "dim",
                 "shutdown": "dim"}
ESCAPE_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: what must never reach a terminal raw: C0 controls but tab and newline, DEL, C1 controls,
#: and the bidirectional overrides and isolates (which reorder what a line seems to say)
CONTROL_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escaped(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(text: str) -> str:
    """`text` with every control character shown escaped, as journalctl and git do:
    `\\x1b`, `\\x07`, `\\u202e`; tab and newline are kept."""
    return CONTROL_RE.sub(_escaped, text) if CONTROL_RE.search(text) else text


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def colors_wanted() -> bool:
    """Escape codes only for a terminal, and never when NO_COLOR is set (non-empty)."""
    return not os.environ.get("NO_COLOR") and sys.stdout.isatty()


def paint(text: str, color: str | None) -> str:
    if not text or not color or color not in COLOR_CODES or not colors_wanted():
        return text
    return f"\x1b[{COLOR_CODES[color]}m{text}\x1b[0m"


def strip_escapes(text: str) -> str:
    return ESCAPE_RE.sub("", text)


def width(text: str) -> int:
    """Terminal columns `text` takes: escapes count nothing, wide characters two."""
    plain = strip_escapes(text)
    if plain.isascii():
        return len(plain)
    return sum(0 if unicodedata.combining(ch) else
               2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in plain)


Cell = Any  # a value shown as str(value), or (text, colour) painted after it is sized


def table(headers: Sequence[str], rows: Sequence[Sequence[Cell]],
          fit: int | None = None, flexible: int = 1) -> str:
    """Columns aligned on what shows, every cell on one line and made `safe`. A cell may
    be `(text, colour)`: sized plain and painted after padding. With `fit`, the last
    `flexible` columns (free text) are cut, the last first, down to 10 columns each, so
    lines fit that width where they can."""
    def split(cell: Cell) -> tuple[str, str | None]:
        if isinstance(cell, tuple):
            return short("" if cell[0] is None else cell[0], None), cell[1]
        return short("" if cell is None else cell, None), None

    cells = [[(str(h), None) for h in headers]] + [[split(c) for c in r] for r in rows]
    widths = [max(width(row[i][0]) for row in cells) for i in range(len(headers))]
    if fit is not None:
        for i in range(len(widths) - 1, max(len(widths) - 1 - flexible, -1), -1):
            over = sum(widths) + 2 * (len(widths) - 1) - fit
            if over > 0:
                widths[i] = max(min(widths[i], 10), widths[i] - over)
    lines = []
    for row in cells:
        parts = []
        for (text, color), w in zip(row, widths, strict=True):
            if width(text) > w:
                text = short(text, w)
            parts.append(paint(text, color) + " " * (w - width(text)))
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def when(ts: float | None) -> str:
    """The time of day; with the date too when it is not today."""
    if not ts:
        return "-"
    moment = time.localtime(ts)
    if moment[:3] != time.localtime()[:3]:
        return time.strftime("%Y-%m-%d %H:%M:%S", moment)
    return time.strftime("%H:%M:%S", moment)


#: (size, unit, the next unit down's size, its unit), biggest first
_UNITS = ((86400, "d", 3600, "h"), (3600, "h", 60, "m"), (60, "m", 1, "s"))


def _split(secs: int) -> tuple[str, str]:
    """`secs` in its biggest unit ("4m") and the rest in the next unit down ("12s"); under
    a minute, ("12s", "")."""
    for big, unit, small, small_unit in _UNITS:
        if secs >= big:
            return f"{secs // big}{unit}", f"{secs % big // small:02d}{small_unit}"
    return f"{secs}s", ""


def ago(ts: float | None) -> str:
    """How long ago, in its biggest unit: 12s ago, 4m ago, 3d ago."""
    if not ts:
        return "-"
    return f"{_split(int(max(0, time.time() - ts)))[0]} ago"


def duration(secs: float | None) -> str:
    """An uptime as a person reads it: 12s, 4m12s, 2h05m, 3d04h."""
    if secs is None:
        return "-"
    return "".join(_split(int(max(0, secs))))


def dollars(amount: float | None) -> str:
    if amount is None:
        return "-"
    return f"${amount:.2f}" if amount >= 1 else f"${amount:.4f}"


def short(text: str, width: int | None = 60) -> str:
    """`text` on one line (whitespace runs made one space), made `safe`, cut to `width`
    with `…` (None: whole)."""
    text = safe(" ".join(str(text).split()))
    return text if width is None or len(text) <= width else text[: width - 1] + "…"


def human_count(n: float | None) -> str:
    """12, 3.4k, 1.2M: token counts at a glance."""
    if n is None:
        return "-"
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return f"{n:.0f}"


def human_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "K", "M", "G"):
        if n < 1024:
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024
    return f"{n:.1f}T"


def describe_event(rec: dict[str, Any], full: bool = False) -> str:
    """One readable line for a journal record, made `safe`; with `full`, no value is cut."""
    def cut(text: str, most: int) -> str:
        return short(text, None if full else most)

    ev = rec.get("event", "?")
    skip = {"ts", "event", "member", "team"}
    if ev == "message" and isinstance(rec.get("message"), dict):
        m = rec["message"]
        extra = f" [{m['type']}]" if m.get("type") != "message" else ""
        line = f"{m.get('sender')} → {m.get('recipient')}{extra}: {cut(m.get('content', ''), 80)}"
    elif ev == "status":
        line = f"status {rec.get('from')} → {rec.get('to')}"
    elif ev == "tool_call":
        args = rec.get("input")
        shown = cut(json.dumps(args, ensure_ascii=False), 60) if args else ""
        if rec.get("ok", True):
            line = f"tool {rec.get('tool')} {shown} ok ({rec.get('ms', 0)} ms)".rstrip()
        else:
            line = (f"tool {rec.get('tool')} {shown} FAILED: "
                    f"{cut(str(rec.get('error') or 'no reason recorded'), 120)}")
    else:
        fields = " ".join(f"{k}={cut(json.dumps(v, ensure_ascii=False), 40)}"
                          for k, v in rec.items() if k not in skip and k != "thinking")
        line = f"{ev} {fields}".rstrip()
        thought = rec.get("thinking") if ev == "model_call" else None
        if thought:  # what the model thought, dimmed, apart from the call's figures
            return safe(line) + " " + paint(safe(f"(thinking) {cut(str(thought), 200)}"), "dim")
    return safe(line)
