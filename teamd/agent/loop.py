"""The teammate process: an agent loop on the Messages API, working from its inbox and
the shared task board (CONTRACT.md sections 3, 4 and 6).

States: active (calling the model, running tools) ↔ idle (waiting on the inbox and the
board, woken by inotify) → exit 75 after `idle_timeout` (sleeping) or exit 0 after an
approved shutdown. Every step is recorded in the session file first, so a restart at any
moment resumes the same conversation without showing a message twice or re-running a tool.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

from teamd import actions, board, events, files, inbox, requests, roster, settings
from teamd.agent import context, model
from teamd.agent.session import INTERRUPTED, Session, compacted_head
from teamd.agent.tools import Toolbox, specs_for
from teamd.errors import TeamdError
from teamd.files import Json
from teamd.layout import LEAD, Workspace
from teamd.proc import EXIT_SHUTDOWN, EXIT_SLEEP
from teamd.watch import Watcher

log = logging.getLogger(__name__)

API_RETRY_FIRST, API_RETRY_MAX = 5.0, 120.0


def run_member(ws: Workspace, team: str, name: str) -> int:
    """Entry point in the forked child. Returns the exit code (0 shutdown, 75 sleep)."""
    logging.basicConfig(level=logging.INFO,
                        format=f"%(asctime)s {name}@{team} %(levelname)s %(message)s")
    for noisy in ("httpx", "httpx2", "anthropic"):  # one INFO line per request otherwise
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return Member(ws, team, name).run()


class Member:
    def __init__(self, ws: Workspace, team: str, name: str) -> None:
        self.ws, self.team, self.name = ws, team, name
        self.conf = settings.load(ws)
        member = roster.get(roster.load(ws, team), name)
        self.kind = member.get("kind", "teammate")
        self.cwd = Path(member["cwd"])
        if not self.cwd.is_dir():
            raise TeamdError(f"working directory {self.cwd} does not exist")
        self.prompt = member["prompt"]
        self.model_name = member.get("model") or self.conf.model
        self.identity = context.identity(name, team, self.kind)
        self.system = context.system_prompt(member, team, str(self.cwd))
        self.toolbox = Toolbox(ws, team, name, kind=self.kind, cwd=self.cwd,
                               bash_timeout=self.conf.bash_timeout,
                               plan_mode_required=bool(member.get("plan_mode_required")))
        self.specs = specs_for(self.kind)
        self.session = Session.load(ws.session(team, name))
        self.client = model.make_client()
        self.status: str | None = member.get("status")
        self.last_context = 0
        self.api_delay = API_RETRY_FIRST
        self.api_trouble_told = False
        self.shutdown_asks: list[str] = []  # request ids the model has been shown

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> int:
        signal.signal(signal.SIGTERM, self.on_sigterm)
        if self.session.empty:
            self.session.append({"type": "user", "content": [
                {"type": "text", "text": self.prompt}]})
        for use in self.session.pending_tool_uses():
            self.record_result(use["id"], INTERRUPTED, is_error=True)
        while True:
            if self.session.ends_with_reply():
                code = self.idle()
                if code is not None:
                    return code
            code = self.turn()
            if code is not None:
                return code

    def on_sigterm(self, signum: int, frame: object) -> None:
        # The session is already on disk (every record is fsynced as it is written); what
        # is left is to take the tools' process groups down with us and die by the signal.
        from teamd.agent import tools_files

        for pgid in list(tools_files.ACTIVE_GROUPS):
            tools_files.kill_group(pgid)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    def turn(self) -> int | None:
        """One model call and the tools it asks for. An exit code ends the process."""
        if self.last_context > self.conf.compact_threshold:
            self.compact()
        self.note_shutdown_asks(self.take_inbox())
        self.set_status("active")
        reply = self.ask_model(context.micro_compact(self.session.messages(self.identity)))
        if reply is None:
            return None
        self.last_context = context.context_size(reply.usage)
        content = reply.content or [{"type": "text", "text": "(no reply)"}]
        self.session.append({"type": "assistant", "content": content,
                             "stop_reason": reply.stop_reason, "usage": reply.usage})
        uses = [b for b in content if b.get("type") == "tool_use"]
        for use in uses:
            result = self.toolbox.run(use["name"], use.get("input") or {})
            self.record_result(use["id"], result.content, is_error=result.is_error)
        if self.toolbox.shutdown_approved:
            return self.leave()
        if not uses:
            for rid in self.shutdown_asks:
                if requests.get(self.ws, self.team, rid)["status"] == "pending":
                    # the model ended its turn without answering: approve for it
                    return self.approve_shutdown(rid, "ended its turn without answering")
        return None

    def idle(self) -> int | None:
        """Wait for work. None = back to work; an exit code = leave."""
        self.set_status("idle")
        if self.kind != "lead":
            self.tell_lead_idle()
        deadline = time.monotonic() + self.conf.idle_timeout
        inbox_file = self.ws.inbox(self.team, self.name).name

        def interesting(fname: str) -> bool:
            return fname == inbox_file or (fname.endswith(".json") and fname[0].isdigit())

        folders = [self.ws.team_dir(self.team), self.ws.tasks_dir(self.team)]
        with Watcher(folders, interesting=interesting) as watcher:
            while True:  # the watcher is armed before each check: no line slips past
                new = self.take_inbox()
                asks = [m for m in new if m["type"] == "shutdown_request"]
                if asks:
                    return self.approve_shutdown(asks[0]["request_id"], "idle")
                if new:
                    return None
                if self.kind != "lead":
                    task = board.claim(self.ws, self.team, self.name)
                    if task is not None:
                        text = f"<auto-claimed>Task #{task['id']}: {task['subject']}"
                        if task.get("description"):
                            text += f"\n{task['description']}"
                        self.session.append({"type": "user", "content": [
                            {"type": "text", "text": text + "</auto-claimed>"}]})
                        return None
                left = deadline - time.monotonic()
                if left <= 0:
                    log.info("idle for %gs: going to sleep", self.conf.idle_timeout)
                    return EXIT_SLEEP
                watcher.wait(left)

    # -- inbox and protocols -------------------------------------------------------------
    def take_inbox(self) -> list[Json]:
        """Drain the inbox into the session (recorded and fsynced before the cut)."""
        fresh: list[Json] = []

        def consume(batch: list[Json]) -> None:
            new = [m for m in batch if m.get("id") not in self.session.known_ids]
            if new:
                self.session.append({"type": "inbox", "messages": new})
                fresh.extend(new)

        inbox.drain(self.ws, self.team, self.name, consume)
        return fresh

    def note_shutdown_asks(self, messages: list[Json]) -> None:
        self.shutdown_asks.extend(m["request_id"] for m in messages
                                  if m["type"] == "shutdown_request" and m.get("request_id"))

    def approve_shutdown(self, request_id: str, why: str) -> int:
        try:
            actions.send(self.ws, self.team, LEAD, f"{self.name} is shutting down",
                         type_="shutdown_response", sender=self.name, request_id=request_id,
                         approve=True, reason=why)
        except TeamdError as exc:  # answered already (e.g. by the model): still leave
            log.info("shutdown %s: %s", request_id, exc)
        return self.leave()

    def leave(self) -> int:
        """Approved a shutdown: desired=stopped and status=stopping in one update, exit 0."""
        def change(config: Json) -> tuple[str, str] | None:
            m = roster.find(config, self.name)
            if m is None or m.get("pid") != os.getpid():
                return None
            m["desired"] = "stopped"
            return roster.set_status(m, "stopping")

        events.status_changed(self.ws, self.team, self.name,
                              roster.update(self.ws, self.team, change))
        return EXIT_SHUTDOWN

    def tell_lead_idle(self) -> None:
        last = ""
        for record in reversed(self.session.records):
            if record["type"] == "assistant":
                last = " ".join(b.get("text", "") for b in record["content"]
                                if b.get("type") == "text").strip()
                break
        reason = "no claimable task"
        summary = (last[:200] or f"{self.name} is idle")
        msg = inbox.make("idle_notification", self.name, LEAD, f"{self.name} is idle: {reason}",
                         reason=reason, summary=summary)
        inbox.deliver(self.ws, self.team, [msg])

    # -- the model -----------------------------------------------------------------------
    def ask_model(self, messages: list[dict[str, Any]], **extra: Any) -> model.Reply | None:
        system, tools, messages = context.with_cache_breakpoints(self.system, self.specs,
                                                                 messages)
        try:
            reply = model.call(self.client, model=self.model_name,
                               max_tokens=self.conf.max_tokens, system=system, tools=tools,
                               messages=messages, **extra)
        except model.ModelUnavailable as exc:
            self.api_trouble(str(exc))
            return None
        events.emit(self.ws, self.team, "model_call", member=self.name, model=self.model_name,
                    ms=round(reply.ms, 1), error=None, **reply.usage)
        self.add_usage(reply.usage, clear_error=True)
        self.api_delay = API_RETRY_FIRST
        self.api_trouble_told = False
        return reply

    def api_trouble(self, text: str) -> None:
        """Past the SDK's retries: say so, keep the status truthful, wait, try again."""
        delay = self.api_delay
        line = f"{text}, retrying in {delay:g} s"
        log.warning(line)
        events.emit(self.ws, self.team, "model_call", member=self.name, model=self.model_name,
                    error=text, ms=None, input_tokens=0, output_tokens=0,
                    cache_read_input_tokens=0, cache_creation_input_tokens=0)
        self.update_member(last_error=line)
        if not self.api_trouble_told and self.kind != "lead":
            self.api_trouble_told = True
            inbox.deliver(self.ws, self.team, [inbox.make(
                "message", self.name, LEAD, f"{self.name}: cannot reach the model ({line})")])
        self.api_delay = min(API_RETRY_MAX, delay * 2)
        time.sleep(delay)

    def compact(self) -> None:
        """Summarise a long history with the model; keep the full one in transcripts/."""
        before = self.last_context
        messages = self.session.messages(self.identity)
        stamp = time.strftime("%Y%m%dT%H%M%S")
        transcript = self.ws.transcripts_dir(self.team) / f"{self.name}-{stamp}.jsonl"
        files.ensure_dir(transcript.parent)
        files.atomic_write_bytes(transcript, b"".join(files.dumps_line(m) for m in messages))
        request = {"type": "text", "text": context.SUMMARY_REQUEST}
        if messages and messages[-1]["role"] == "user":
            ask = [*messages[:-1], {"role": "user",
                                    "content": [*messages[-1]["content"], request]}]
        else:
            ask = [*messages, {"role": "user", "content": [request]}]
        reply = self.ask_model(ask, tool_choice={"type": "none"})
        if reply is None:
            return  # try again before the next call
        summary = "\n".join(b.get("text", "") for b in reply.content
                            if b.get("type") == "text").strip() or "(no summary)"
        rel = str(transcript.relative_to(self.ws.root))
        self.session.append({"type": "compaction", "summary": summary, "transcript": rel,
                             "known_ids": sorted(self.session.known_ids),
                             "before_tokens": before})
        after = len(compacted_head(self.identity, self.session.records[0])) // 4
        events.emit(self.ws, self.team, "compacted", member=self.name, before_tokens=before,
                    after_tokens=after, transcript=rel)
        self.last_context = 0

    # -- the roster (only while its pid is ours) -----------------------------------------
    def record_result(self, tool_use_id: str, content: str, *, is_error: bool) -> None:
        self.session.append({"type": "tool_result", "block": {
            "type": "tool_result", "tool_use_id": tool_use_id, "content": content,
            "is_error": is_error}})

    def set_status(self, status: str) -> None:
        if status == self.status:
            return
        self.update_member(status=status)

    def add_usage(self, usage: Json, clear_error: bool) -> None:
        self.update_member(usage_add=usage, **({"last_error": None} if clear_error else {}))

    def update_member(self, **changes: Any) -> None:
        usage_add = changes.pop("usage_add", None)
        tasks = board.list_tasks(self.ws, self.team)

        def change(config: Json) -> tuple[str, str] | None:
            m = roster.find(config, self.name)
            if m is None or m.get("pid") != os.getpid():
                return None  # not ours any more (CONTRACT §4): write nothing
            moved = None
            if "status" in changes:
                moved = roster.set_status(m, changes["status"])
            for key in ("last_error",):
                if key in changes:
                    m[key] = changes[key]
            if usage_add:
                total = m.setdefault("usage", {})
                for key, value in usage_add.items():
                    total[key] = int(total.get(key) or 0) + int(value or 0)
            m["current_task"] = board.current_task(tasks, self.name)
            return moved

        moved = roster.update(self.ws, self.team, change)
        if "status" in changes:
            self.status = changes["status"]
        events.status_changed(self.ws, self.team, self.name, moved)
