"""What Claude Code's own transcript says it took in (CONTRACT §14, "Delivery, exactly
once"): after a crash of either process, the member gives Claude Code only the recorded
input it never took in.

Claude Code (2.1.x) writes its session to `{HOME}/.claude/projects/{cwd, escaped}/{id}.jsonl`
before it sends anything to the model. A user turn it took in is there as a `user` entry
whose content is the turn's text; a turn written to it while it worked is absorbed after its
next tool call (measured on 2.1.332: one result for the whole turn), and is there as an
`attachment` of type `queued_command` with the turn's text as its `prompt`. A turn it only
queued (an `enqueue` and nothing after) was never seen by the model: it is given again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from teamd import files


def path(home: Path, session_id: str) -> Path | None:
    """The transcript of session `session_id` under Claude Code's HOME, if it has one."""
    found = sorted((home / ".claude" / "projects").glob(f"*/{session_id}.jsonl"))
    return found[0] if found else None


def _text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [b.get("text") for b in content if isinstance(b, dict)]
        if texts and all(isinstance(t, str) for t in texts):
            return "\n".join(str(t) for t in texts)
    return None


def taken_in(home: Path, session_id: str) -> Counter[str]:
    """The texts of the user turns Claude Code took in, each as often as it took it in (a
    torn or bad line is skipped)."""
    where = path(home, session_id)
    if where is None:
        return Counter()
    try:
        data = where.read_bytes()
    except FileNotFoundError:
        return Counter()
    seen: Counter[str] = Counter()
    for entry in files.parse_lines(data).records:
        text = None
        if entry.get("type") == "user" and isinstance(entry.get("message"), dict):
            text = _text(entry["message"].get("content"))
        elif entry.get("type") == "attachment" and isinstance(entry.get("attachment"), dict):
            attachment = entry["attachment"]
            if attachment.get("type") == "queued_command":
                text = _text(attachment.get("prompt"))
        if text is not None:
            seen[text] += 1
    return seen


def not_taken(texts: Iterable[str], seen: Counter[str]) -> list[int]:
    """The positions in `texts` (recorded turns, in order) that `seen` does not account
    for: each text taken in counts once, for the first recorded turn that says it."""
    left = Counter(seen)
    missing = []
    for i, text in enumerate(texts):
        if left[text] > 0:
            left[text] -= 1
        else:
            missing.append(i)
    return missing
