"""The two kinds of failure every entry point maps to an exit code.

`BadInput` (exit 2) is the user's mistake: a bad name, an unknown team, member, task or
request, content too large, an answer to a request already answered. It is always raised
before any file is touched. `TeamdError` (exit 1) is anything else worth one clear line.
"""

from __future__ import annotations


class TeamdError(Exception):
    """A failure worth one clear line on stderr (exit 1)."""

    exit_code = 1


class BadInput(TeamdError):
    """Bad input or an unknown object: exit 2, and nothing was changed."""

    exit_code = 2


class Interrupted(TeamdError):
    """A wait ended by Ctrl-C: exit 130, with one line saying what is still pending."""

    exit_code = 130
