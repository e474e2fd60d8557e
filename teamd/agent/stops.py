"""What a reply's stop reason means for the turn (CONTRACT.md section 6, "Today's models").

`end_turn` and `stop_sequence` end the turn; `tool_use` runs the tools; `max_tokens` keeps
the cut reply and asks the model to continue, answering a cut-off tool call with an error
instead of running it, and ends the turn (the lead told) at the 4th cut in a row;
`pause_turn` sends the paused reply back as it is, for the model to go on; `refusal` ends
the turn, not retried, the lead told; `model_context_window_exceeded` is the loop's to
answer (compact, then the same call again: `WINDOW_EXCEEDED`). `handle` decides; the
teammate's loop (`teamd.agent.loop`) does what it says.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from teamd.files import Json

WINDOW_EXCEEDED = "model_context_window_exceeded"
CUT_OFF = "cut off by max_tokens; call it again"
REFUSED = "not run: the reply ended in a refusal"
#: continuations asked for in a row; the next cut reply ends the turn
MAX_CONTINUATIONS = 3
CONTINUE = ("(Your reply was cut off by max_tokens. Continue exactly where it stopped; a "
            "tool call that was cut off did not run: make it again.)")


@dataclass
class Handling:
    """What to do with one reply."""

    record: Json  # the session's assistant record (the reply byte for byte, and why it ended)
    run: list[Json] = field(default_factory=list)  # tool calls to run
    unrun: list[tuple[str, str]] = field(default_factory=list)  # (tool_use id, error result)
    follow_up: Json | None = None  # a user record to append after the results
    ends_turn: bool = False  # the turn is over: the member goes idle
    #: (what, words): a trouble for `last_error` and, once, for the lead
    trouble: tuple[str, str] | None = None


def handle(content: list[Json], stop_reason: str | None, usage: Json,
           cuts_in_a_row: int) -> Handling:
    """What a reply with `content` that ended for `stop_reason` asks of the loop, after
    `cuts_in_a_row` replies cut off by max_tokens."""
    content = content or [{"type": "text", "text": "(no reply)"}]
    record: Json = {"type": "assistant", "content": content, "stop_reason": stop_reason,
                    "usage": usage}
    calls = [b for b in content if b.get("type") == "tool_use"]
    if stop_reason == "refusal":
        record["ends_turn"] = True
        return Handling(record, unrun=[(c["id"], REFUSED) for c in calls], ends_turn=True,
                        trouble=("refusal", "the model refused to go on (stop reason "
                                 "refusal); not retried, the turn ended"))
    if stop_reason == "max_tokens":
        cut = calls[-1:] if content[-1].get("type") == "tool_use" else []
        if cuts_in_a_row >= MAX_CONTINUATIONS:
            record["ends_turn"] = True
            return Handling(record, unrun=[(c["id"], CUT_OFF) for c in calls], ends_turn=True,
                            trouble=("max_tokens", f"its reply was cut off by max_tokens "
                                     f"{cuts_in_a_row + 1} times in a row; the turn ended "
                                     "(raise max_tokens, or ask for less at once)"))
        return Handling(record, run=calls[:len(calls) - len(cut)],
                        unrun=[(c["id"], CUT_OFF) for c in cut],
                        follow_up={"type": "user", "continuation": True,
                                   "content": [{"type": "text", "text": CONTINUE}]})
    # end_turn, stop_sequence, tool_use, pause_turn (a paused reply with no call of ours
    # goes on as it is: the session sends it back as the last message)
    return Handling(record, run=calls,
                    ends_turn=not calls and stop_reason != "pause_turn")
