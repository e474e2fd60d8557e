"""How big each model is: its context window and its longest reply (output limit), and
what that caps (CONTRACT.md section 6, "Today's models"; section 10); and which models take
adaptive thinking.

The installed SDK lists the models but not their sizes (those come only from the Models
API, with a key), so they come from this built-in table, by model family and version:
every 5.x model has a 1,000,000-token window and a 128,000-token output limit; 4.x models
200,000 and 64,000. `max_tokens` is capped at the output limit (one warning line when
`teamd` starts) and `compact_threshold` at 90 % of the window. A model the table does not
know is not capped. Adaptive thinking is taken from 4.6 on. Standard library only:
`teamctl` and the scripted server read it too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: (major version from, context window, output limit), newest first
_BY_VERSION = ((5, 1_000_000, 128_000), (4, 200_000, 64_000))
#: the first release that takes `thinking: {"type": "adaptive"}`
ADAPTIVE_FROM = (4, 6)
#: the share of the window `compact_threshold` may reach
COMPACT_SHARE = 0.9
_NAME = re.compile(r"claude-[a-z]+-(?P<major>\d+)(?:-(?P<minor>\d))?(?:-\d{8}|-latest)?")


@dataclass(frozen=True)
class Limits:
    window: int  # context window, tokens
    output: int  # longest reply, tokens


def version(model: str) -> tuple[int, int] | None:
    """(major, minor) of a model name such as `claude-sonnet-5-5` (a dated snapshot or a
    `-latest` alias as its model), else None."""
    found = _NAME.fullmatch(model)
    if found is None:
        return None
    return int(found["major"]), int(found["minor"] or 0)


def limits(model: str) -> Limits | None:
    """The model's window and output limit, or None for a model the table does not know."""
    release = version(model)
    if release is None:
        return None
    for major, window, output in _BY_VERSION:
        if release[0] >= major:
            return Limits(window, output)
    return None


def adaptive_thinking(model: str) -> bool:
    """Whether the model takes adaptive thinking (4.6 and later; a model the table does not
    know is taken to); 4.5 and older refuse it with a 400."""
    release = version(model)
    return release is None or release >= ADAPTIVE_FROM


def max_tokens(model: str, wanted: int) -> int:
    """`max_tokens` for a call to `model`: the setting, capped at its output limit."""
    known = limits(model)
    return wanted if known is None else min(wanted, known.output)


def compact_threshold(model: str, wanted: int) -> int:
    """`compact_threshold` for `model`: the setting, capped at 90 % of its window."""
    known = limits(model)
    return wanted if known is None else min(wanted, int(known.window * COMPACT_SHARE))


def cap_warning(model: str, wanted: int) -> str | None:
    """One line for a person when `max_tokens` is above the model's output limit."""
    capped = max_tokens(model, wanted)
    if capped == wanted:
        return None
    return (f"max_tokens {wanted} is above the output limit of {model}: its calls ask "
            f"for {capped}")
