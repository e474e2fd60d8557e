"""Team and member names (CONTRACT §2): what a name may be, and the reserved ones.

Shared by the layout of a root (`teamd.layout`) and every store, which is why it stands
alone: a store's paths or tables need the rules of a name, never the workspace.
"""

from __future__ import annotations

import re
import time

from teamd.errors import BadInput

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,47}$")
LEAD = "lead"
SUPERVISOR = "teamd"  # reserved: the supervisor's name as a sender
USER = "user"  # reserved: the person at teamctl in a team with an LLM lead (CONTRACT §2)
ROOT_ENV = "TEAMD_ROOT"
#: the {ts} of `.teams/.archive/{team}-{ts}/`: local time, YYYYmmddTHHMMSS.ffffff
ARCHIVE_TS_RE = re.compile(r"\d{8}T\d{6}\.\d{6}")


def stamp(now: float) -> str:
    """The {ts} of an archive or removed folder for the time `now` (ARCHIVE_TS_RE)."""
    return time.strftime("%Y%m%dT%H%M%S", time.localtime(now)) + f".{int(now % 1 * 1e6):06d}"


def validate_name(name: str, what: str = "name") -> str:
    """Return `name` if it is a valid team or member name, else raise BadInput."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        shown = repr(name) if isinstance(name, str) else type(name).__name__
        raise BadInput(
            f"invalid {what} {shown}: use 1-48 characters a-z, 0-9, '_' or '-', "
            "starting with a letter or digit"
        )
    return name


def validate_member_name(name: str) -> str:
    validate_name(name, "member name")
    if name == SUPERVISOR:
        raise BadInput(f"member name {name!r} is reserved for the supervisor")
    if name == USER:
        raise BadInput(f"member name {name!r} is reserved for the person at teamctl")
    return name
