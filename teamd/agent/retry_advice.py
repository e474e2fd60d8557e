"""What an API answer's headers advise (CONTRACT §12): when to try again (`retry-after`),
and until when the whole root should hold off (a rate-limit family used up). Read by the
built-in runtime's calls and by the Claude Code forwarder alike.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import logging
import re
import time
from collections.abc import Mapping

log = logging.getLogger(__name__)

_REMAINING = re.compile(r"anthropic-ratelimit-(?P<family>[a-z0-9-]+)-remaining")


def retry_after(headers: Mapping[str, str]) -> float | None:
    """The server's advice in seconds, read as the SDK reads it: `retry-after-ms`, else
    `retry-after` as seconds or an HTTP date. None when absent or unreadable."""
    for key, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(key)
        if raw is None:
            continue
        try:
            seconds = float(raw) * scale
        except ValueError:
            when = email.utils.parsedate_tz(raw) if key == "retry-after" else None
            if when is None:
                continue
            seconds = email.utils.mktime_tz(when) - time.time()
        if seconds == seconds:  # not NaN
            return max(0.0, seconds)
    return None


def limited_until(headers: Mapping[str, str]) -> float | None:
    """When the root may call again after an answer whose `anthropic-ratelimit-{family}-
    remaining` is 0: the latest such family's `-reset` (RFC 3339), as epoch seconds. None
    when no family is used up (or its reset time is missing or unreadable)."""
    latest: float | None = None
    for key, value in headers.items():
        found = _REMAINING.fullmatch(key.lower())
        if found is None or value.strip() != "0":
            continue
        reset = headers.get(f"anthropic-ratelimit-{found['family']}-reset")
        try:
            when = dt.datetime.fromisoformat(str(reset).strip())
        except ValueError:
            log.info("%s is 0 with no readable reset time (%r): not held back", key, reset)
            continue
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)  # RFC 3339 says; be lenient
        epoch = when.timestamp()
        latest = epoch if latest is None else max(latest, epoch)
    return latest
