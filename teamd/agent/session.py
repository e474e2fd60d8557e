"""The teammate's conversation, kept by the store (files: `.teams/{team}/sessions/{name}.jsonl`).

One record per line, appended and fsynced before anything depends on it, so a process
restarted at any moment rebuilds the same conversation:

  {"type": "user", "content": [...]}               the first prompt, auto-claims, nudges
  {"type": "inbox", "messages": [...]}             messages taken in from the inbox
  {"type": "inbox", "messages": [...],             taken in and answered by the harness
   "hidden": true}                                 (a shutdown request while idle): known,
                                                   never shown to the model
  {"type": "assistant", "content": [...], ...}     a model reply, byte for byte (its
                                                   thinking and signatures included), with
                                                   its `stop_reason`; `"ends_turn": true`
                                                   when the harness ended the turn on it
                                                   (a refusal, a 4th cut in a row)
  {"type": "tool_result", "block": {...}}          one tool's result, written as it ends
  {"type": "compaction", "summary": "...", ...}    everything before is replaced by this
                                                   (and by the input it carries over:
                                                   messages not yet answered)

A message id taken in is recorded once and never shown again; a `tool_use` without a
recorded result is answered "interrupted by a restart; not re-run" instead of re-run. On
PostgreSQL a team tool's result is recorded in the same transaction as its effect
(`Toolbox.run`), so there "not re-run" also means "not done". A
reply paused by the API (`pause_turn`) is sent back as the last message, and the reply that
goes on from it joins the same assistant turn.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from teamd.files import Json

if TYPE_CHECKING:
    from teamd.store.api import Store

INTERRUPTED = "interrupted by a restart; not re-run"
#: stop reasons of a reply that leaves the turn open (the model goes on after it)
GOES_ON = ("pause_turn", "max_tokens")


def render_message(msg: Json) -> str:
    """How an inbox message reaches the model (CONTRACT §6, "Context")."""
    attrs = [f'sender="{msg["sender"]}"', f'type="{msg["type"]}"']
    for key in ("request_id", "approve"):
        if msg.get(key) is not None:
            value = json.dumps(msg[key]) if isinstance(msg[key], bool) else msg[key]
            attrs.append(f'{key}="{value}"')
    body = msg["content"]
    if msg.get("feedback") and msg["feedback"] != body:
        body += f"\nFeedback: {msg['feedback']}"
    return f"<teammate-message {' '.join(attrs)}>{body}</teammate-message>"


@dataclass
class Session:
    """Member `name`'s conversation, kept by `store` (`store.read_session`,
    `append_session`)."""

    store: Store
    team: str
    name: str
    records: list[Json] = field(default_factory=list)
    known_ids: set[str] = field(default_factory=set)
    #: task ids the model was handed with <auto-claimed> (kept across compaction)
    claimed_ids: set[int] = field(default_factory=set)
    #: the same ids in the order they were taken in (again when claimed again): what a
    #: reader of `claimed_ids` has not seen yet is `claims[seen:]`
    claims: list[int] = field(default_factory=list)
    # (records list, identity, records folded, their turns): see `messages`
    _settled: tuple[list[Json], str, int, list[dict[str, Any]]] | None = \
        field(default=None, repr=False, compare=False)
    #: called when an append fails (the error, the attempt number from 0) before the next
    #: try, and once with None when a troubled append went through; it waits, and may
    #: raise to give up. Without it a failed append raises at once.
    when_stuck: Callable[[OSError | None, int], None] | None = \
        field(default=None, repr=False, compare=False)

    @classmethod
    def load(cls, store: Store, team: str, name: str) -> Session:
        """The conversation as the member finds it at start; a torn tail or a bad line is
        moved aside first (only the member itself mends its session)."""
        session = cls(store, team, name)
        for record in store.read_session(team, name, mend=True):
            session._take(record)
        return session

    @property
    def where(self) -> str:
        """Where the session is kept, as people are shown it."""
        return self.store.describe_session(self.team, self.name)

    def _take(self, record: Json) -> None:
        kind = record.get("type")
        if kind == "compaction":
            self.records = [record]
            self.known_ids.update(record.get("known_ids", []))
            self.claimed_ids.update(record.get("claimed_ids", []))
            self.claims.extend(int(i) for i in record.get("claimed_ids", []))
            for carried in record.get("carry", []):
                self._take(carried)
            return
        if kind == "inbox":
            self.known_ids.update(m["id"] for m in record["messages"])
        if record.get("claimed") is not None:
            self.claimed_ids.add(int(record["claimed"]))
            self.claims.append(int(record["claimed"]))
        self.records.append(record)

    def append(self, record: Json, *, wait: bool = True) -> Json:
        """Record one line (fsynced) and take it into the conversation — inside a step
        `together` (`Store.together`), once the step is durable. A failed append leaves no
        partial line (`store.append_session`); it is retried through `when_stuck` until it
        goes through, unless `wait` is False (a caller holding another lock)."""
        record.setdefault("ts", time.time())
        attempt = 0
        while True:
            try:
                self.store.append_session(self.team, self.name, [record])
                break
            except OSError as exc:
                if not wait or self.when_stuck is None:
                    raise
                self.when_stuck(exc, attempt)
                attempt += 1
        if attempt and self.when_stuck is not None:
            self.when_stuck(None, attempt)
        # in a step together (a tool's result with its effect) only once the step is
        # durable: a step that fails leaves no record here the store does not have
        self.store.after_commit(lambda: self._take(record))
        return record

    def claimed_at(self, task_id: int) -> float | None:
        """When the conversation was last handed task `task_id` (the record's time; a
        compaction that keeps it known counts as its own time), or None if never."""
        for record in reversed(self.records):
            if record.get("claimed") == task_id or (
                    record["type"] == "compaction" and task_id in record.get("claimed_ids", [])):
                return float(record.get("ts") or float("inf"))
        return float("inf") if task_id in self.claimed_ids else None

    @property
    def empty(self) -> bool:
        return not self.records

    # -- the conversation ----------------------------------------------------------------
    def pending_tool_uses(self) -> list[Json]:
        """tool_use blocks of the last assistant turn that have no recorded result."""
        last = None
        for i, record in enumerate(self.records):
            if record["type"] == "assistant":
                last = i
        if last is None:
            return []
        done = {r["block"]["tool_use_id"] for r in self.records[last + 1:]
                if r["type"] == "tool_result"}
        return [b for b in _calls(self.records[last]) if b["id"] not in done]

    def ends_with_reply(self) -> bool:
        """True when the model spoke last and asked for nothing, and its reply was not cut
        short or paused: the turn is over. So is a turn the harness ended on a reply
        (`ends_turn`), once that reply's calls are answered."""
        shown = [r for r in self.records if not r.get("hidden")]
        last = next((i for i in range(len(shown) - 1, -1, -1)
                     if shown[i]["type"] == "assistant"), None)
        if last is None or self.pending_tool_uses():
            return False
        reply, after = shown[last], shown[last + 1:]
        if reply.get("ends_turn"):
            return all(r["type"] == "tool_result" for r in after)
        return not after and reply.get("stop_reason") not in GOES_ON

    def last_usage(self) -> Json | None:
        """The usage of the model's last reply since the last compaction (None: none
        since): what a member restarted decides compaction on, as it would have."""
        first = 0
        if self.records and self.records[0]["type"] == "compaction":
            first = 1 + len(self.records[0].get("carry", []))  # carried: measured before
        return next((r.get("usage") for r in reversed(self.records[first:])
                     if r["type"] == "assistant"), None)

    def paused(self) -> bool:
        """The API paused the model's last reply (`pause_turn`): it goes on from there."""
        last = next((r for r in reversed(self.records) if not r.get("hidden")), None)
        return last is not None and last.get("stop_reason") == "pause_turn"

    def cuts_in_a_row(self) -> int:
        """Replies cut off by max_tokens in a row at the end of the conversation (a turn
        the harness ended, or a compaction, starts the count again)."""
        count = 0
        for record in reversed(self.records):
            if record["type"] == "compaction" or record.get("ends_turn"):
                break
            if record["type"] == "assistant":
                if record.get("stop_reason") != "max_tokens":
                    break
                count += 1
        return count

    def turn_start(self) -> int:
        """Index of the first record of the turn in progress: what follows the last reply
        that ended a turn (and that reply's results). A compaction carries it over whole —
        an unfinished tool loop, its thinking included — instead of summarising it."""
        for i in range(len(self.records) - 1, -1, -1):
            record = self.records[i]
            if record["type"] == "compaction" or (record["type"] == "assistant" and (
                    record.get("ends_turn") or (record.get("stop_reason") not in GOES_ON
                                                and not _calls(record)))):
                start = i + 1
                while start < len(self.records) and \
                        self.records[start]["type"] == "tool_result":
                    start += 1
                return start
        return 0

    def messages(self, identity: str, upto: int | None = None) -> list[dict[str, Any]]:
        """The Messages API conversation (of the records before `upto`, if given):
        strictly alternating, tool results first.

        Records only grow between compactions, so the turns up to the last model reply
        are kept and only what came after is folded in again on the next call (this runs
        before every call, on the path from a new message to the model)."""
        if upto is not None:
            turns = _fold([], self.records[:upto], identity)[0]
        else:
            start, done = 0, []
            cache = self._settled
            if cache is not None and cache[0] is self.records and cache[1] == identity:
                start, done = cache[2], cache[3]
            turns, settled_records, settled_turns = _fold(list(done), self.records[start:],
                                                          identity)
            if settled_records:
                self._settled = (self.records, identity, start + settled_records,
                                 turns[:settled_turns])
        if turns and turns[0]["role"] != "user":
            return [{"role": "user", "content": [{"type": "text", "text": identity}]}, *turns]
        return turns


def _fold(turns: list[dict[str, Any]], records: list[Json], identity: str
          ) -> tuple[list[dict[str, Any]], int, int]:
    """Append the turns of `records` to `turns` (complete turns, ending with a reply).
    Returns the turns, and how many records and turns there were up to and including the
    last reply among `records` (0, 0 if none): a prefix that later records cannot change."""
    user: list[Json] = []
    results: list[Json] = []
    settled_records = settled_turns = 0
    paused = False  # the last reply was paused: the next one goes on in its turn

    def flush_user() -> None:
        nonlocal user, results
        if results or user:
            turns.append({"role": "user", "content": results + user})
        user, results = [], []

    for i, record in enumerate(records):
        kind = record["type"]
        if kind == "assistant":
            flush_user()
            if paused and turns and turns[-1]["role"] == "assistant":
                turns[-1] = {"role": "assistant",
                             "content": [*turns[-1]["content"], *record["content"]]}
            else:
                if turns and turns[-1]["role"] == "assistant":
                    turns.append({"role": "user", "content": [
                        {"type": "text", "text": "(continue)"}]})
                turns.append({"role": "assistant", "content": record["content"]})
            paused = record.get("stop_reason") == "pause_turn"
            if not paused:  # a paused reply is folded again with the one going on from it
                settled_records, settled_turns = i + 1, len(turns)
        elif not record.get("hidden"):
            paused = False
        if kind == "tool_result":
            results.append(record["block"])
        elif kind == "inbox" and not record.get("hidden"):
            user.extend({"type": "text", "text": render_message(m)}
                        for m in record["messages"])
        elif kind == "user":
            user.extend(record["content"])
        elif kind == "compaction":
            user.append({"type": "text", "text": compacted_head(identity, record)})
    flush_user()
    return turns, settled_records, settled_turns


def _calls(record: Json) -> list[Json]:
    return [b for b in record["content"] if b.get("type") == "tool_use"]


def compacted_head(identity: str, record: Json) -> str:
    return (f"{identity}\n\nYour conversation so far was compacted; the full history is in "
            f"{record.get('transcript', 'transcripts/')}. Summary of it:\n\n{record['summary']}")
