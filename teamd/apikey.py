"""Whether an Anthropic API key is set, and what to say when none is.

The key is read from the environment only and never written anywhere (CONTRACT.md §10):
what is recorded and shown is whether one is set — `teamd.json`'s `api_key_set`, a warning
at `teamctl spawn` and in `teamctl status` — and a member with no key and nowhere else to
send (no `ANTHROPIC_BASE_URL`) makes no call that could only be refused: its `last_error`
says why instead of retrying a lookup of api.anthropic.com for ever.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

KEY = "ANTHROPIC_API_KEY"
BASE_URL = "ANTHROPIC_BASE_URL"
#: what runs instead, offline: the scripted model with the scenario the package ships
OFFLINE = ("point teamd at the scripted model instead (ANTHROPIC_BASE_URL; "
           "`python -m teamd.scripted --scenario walkthrough`, see the README's \"Using it\")")


def is_set(env: Mapping[str, str] = os.environ) -> bool:
    return bool(env.get(KEY))


def refusal(env: Mapping[str, str] = os.environ) -> str | None:
    """Why no model call is made, when none can succeed: no key, and Claude's own API to
    send to (which answers 401); None otherwise (a key, the SDK's other credential
    ANTHROPIC_AUTH_TOKEN, or a base URL of one's own)."""
    if is_set(env) or env.get("ANTHROPIC_AUTH_TOKEN") or env.get(BASE_URL):
        return None
    return (f"model API: no {KEY} is set for teamd, so nothing reaches Claude (set it where "
            f"teamd runs, or {OFFLINE})")
