"""What an error about an unknown name says: the names there are, and the closest one.

One wording for every "unknown team", "unknown member" and "unknown message type": a
listing cut after ten names, and "; did you mean 'x'?" when one is close.
"""

from __future__ import annotations

import difflib


def did_you_mean(name: str, choices: list[str]) -> str:
    """"; did you mean 'x'?" for the closest of `choices`, or "" when none is close."""
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def listing(what: str, names: list[str], most: int = 10) -> str:
    """"teams: a, b, c" (cut after `most`, with …), or "no teams"."""
    if not names:
        return f"no {what}"
    shown = ", ".join(names[:most])
    return f"{what}: {shown}{', …' if len(names) > most else ''}"
