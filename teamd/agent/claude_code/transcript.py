"""What Claude Code's own transcript says it took in (CONTRACT §14, "Delivery, exactly
once"): after a crash of either process, the member gives Claude Code only the recorded
input it never took in.

Claude Code (2.1.x) writes its session to `{HOME}/.claude/projects/{cwd, escaped}/{id}.jsonl`
before it sends anything to the model. A user turn it took in is there as a `user` entry
whose content is the turn's text; a turn written to it while it worked is absorbed after its
next tool call (measured on 2.1.332: one result for the whole turn), and is there as an
`attachment` of type `queued_command` with the turn's text as its `prompt` — the entry
`--resume` rebuilds the conversation from. The `queue-operation` `remove` with reason
`absorbed_mid_turn` written just before it is not enough: it is queue bookkeeping, and a
Claude Code that died after it and before the attachment would resume without the turn
(2.1.332 was seen, under strace, to write both in one `write` with the entries around
them; nothing promises it, so the attachment alone counts). A turn it only
queued (an `enqueue` and nothing after) was never seen by the model: it is given again.

Claude Code writes its transcript a little after it acts: a turn's `user` entry may land
after the request carrying it was sent, while the `dequeue` that took the turn off its
queue is already written. A turn is counted as taken in only with its `user` entry (or
its absorption), never on a `dequeue` alone: a Claude Code that died in that window
resumes from this transcript, which does not hold the turn, so it is given again. (A
member that reads the transcript while it lags sees the turn as not taken yet and reads
again: `runtime`.) One that died once the `user` entry was written, before any reply,
resumes a conversation ending on that turn (`unanswered`): the turn is not given again,
and the member tells Claude Code to go on, so it is answered.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
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


@dataclass
class Taken:
    """What a transcript says was taken in: the texts of its `user` turns (`turns`) and of
    turns absorbed mid-turn (`absorbed`), in order; and how many turns Claude Code took off
    its queue (`dequeued`: written as it begins one, so a new one says a turn began — never
    counted as taken in)."""

    turns: list[str] = field(default_factory=list)
    absorbed: Counter[str] = field(default_factory=Counter)
    dequeued: int = 0
    #: the conversation ends on a user turn nothing answered yet (no reply, no tool call)
    unanswered: bool = False


def taken_in(home: Path, session_id: str) -> Taken:
    """What Claude Code's transcript of `session_id` says it took in (a torn or bad line
    is skipped; no transcript: nothing)."""
    where = path(home, session_id)
    taken = Taken()
    if where is None:
        return taken
    try:
        data = where.read_bytes()
    except FileNotFoundError:
        return taken
    for entry in files.parse_lines(data).records:
        kind = entry.get("type")
        if kind == "user" and isinstance(entry.get("message"), dict):
            text = _text(entry["message"].get("content"))
            if text is not None:
                taken.turns.append(text)
            taken.unanswered = text is not None  # a tool's result is no new turn
        elif kind == "assistant":
            taken.unanswered = False
        elif kind == "attachment" and isinstance(entry.get("attachment"), dict):
            attachment = entry["attachment"]
            if attachment.get("type") == "queued_command":
                text = _text(attachment.get("prompt"))
                if text is not None:
                    taken.absorbed[text] += 1
        elif kind == "queue-operation" and entry.get("operation") == "dequeue":
            taken.dequeued += 1
    return taken


def not_taken(texts: Iterable[str], taken: Taken) -> list[int]:
    """The positions in `texts` (the turns given, in order) that `taken` does not account
    for: each text taken in counts once, for the first turn that says it."""
    left = Counter(taken.turns) + taken.absorbed
    missing = []
    for i, text in enumerate(texts):
        if left[text] > 0:
            left[text] -= 1
        else:
            missing.append(i)
    return missing
