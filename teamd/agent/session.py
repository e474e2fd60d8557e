"""The teammate's conversation on disk: `.teams/{team}/sessions/{name}.jsonl`.

One record per line, appended and fsynced before anything depends on it, so a process
restarted at any moment rebuilds the same conversation:

  {"type": "user", "content": [...]}               the first prompt, auto-claims, nudges
  {"type": "inbox", "messages": [...]}             messages taken in from the inbox
  {"type": "assistant", "content": [...], ...}     a model reply
  {"type": "tool_result", "block": {...}}          one tool's result, written as it ends
  {"type": "compaction", "summary": "...", ...}    everything before is replaced by this

A message id taken in is recorded once and never shown again; a `tool_use` without a
recorded result is answered "interrupted by a restart; not re-run" instead of re-run.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teamd import files
from teamd.files import Json

INTERRUPTED = "interrupted by a restart; not re-run"


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
    path: Path
    records: list[Json] = field(default_factory=list)
    known_ids: set[str] = field(default_factory=set)

    @classmethod
    def load(cls, path: Path) -> Session:
        found = files.read_jsonl(path)
        if not found.clean:
            found = files.rewrite_jsonl(path)  # move a torn tail or bad line aside first
        session = cls(path)
        for record in found.records:
            session._take(record)
        return session

    def _take(self, record: Json) -> None:
        kind = record.get("type")
        if kind == "compaction":
            self.records = [record]
            self.known_ids.update(record.get("known_ids", []))
            return
        if kind == "inbox":
            self.known_ids.update(m["id"] for m in record["messages"])
        self.records.append(record)

    def append(self, record: Json) -> Json:
        record.setdefault("ts", time.time())
        files.append_jsonl(self.path, [record], durable=True)
        self._take(record)
        return record

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
        return [b for b in self.records[last]["content"]
                if b.get("type") == "tool_use" and b["id"] not in done]

    def ends_with_reply(self) -> bool:
        """True when the model spoke last and asked for nothing: the turn is over."""
        return bool(self.records) and self.records[-1]["type"] == "assistant" \
            and not self.pending_tool_uses()

    def messages(self, identity: str) -> list[dict[str, Any]]:
        """The Messages API conversation: strictly alternating, tool results first."""
        turns: list[dict[str, Any]] = []
        user: list[Json] = []
        results: list[Json] = []

        def flush_user() -> None:
            nonlocal user, results
            if results or user:
                turns.append({"role": "user", "content": results + user})
            user, results = [], []

        for record in self.records:
            kind = record["type"]
            if kind == "assistant":
                flush_user()
                if turns and turns[-1]["role"] == "assistant":
                    turns.append({"role": "user", "content": [
                        {"type": "text", "text": "(continue)"}]})
                turns.append({"role": "assistant", "content": record["content"]})
            elif kind == "tool_result":
                results.append(record["block"])
            elif kind == "inbox":
                user.extend({"type": "text", "text": render_message(m)}
                            for m in record["messages"])
            elif kind == "user":
                user.extend(record["content"])
            elif kind == "compaction":
                user.append({"type": "text", "text": compacted_head(identity, record)})
        flush_user()
        if turns and turns[0]["role"] != "user":
            turns.insert(0, {"role": "user", "content": [{"type": "text", "text": identity}]})
        return turns


def compacted_head(identity: str, record: Json) -> str:
    return (f"{identity}\n\nYour conversation so far was compacted; the full history is in "
            f"{record.get('transcript', 'transcripts/')}. Summary of it:\n\n{record['summary']}")
