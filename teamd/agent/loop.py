"""The teammate process: an agent loop on the Messages API, working from its inbox and
the shared task board (CONTRACT.md sections 3, 4 and 6).

States: active (calling the model, running tools) ↔ idle (waiting on the inbox and the
board, woken by inotify) → exit 75 after `idle_timeout` (sleeping) or exit 0 after an
approved shutdown. Every step is recorded in the session file first, so a restart at any
moment resumes the same conversation without showing a message twice or re-running a tool.
"""

from __future__ import annotations

import fcntl
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
from teamd.proc import EXIT_SHUTDOWN, EXIT_SLEEP, drain_fd
from teamd.watch import Watcher

log = logging.getLogger(__name__)

API_RETRY_FIRST, API_RETRY_MAX = 5.0, 120.0
PLAN_ANSWER_GRACE = 30.0  # s: an answer recorded this long ago whose message never came


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
        self.inbox_path = ws.inbox(team, name)
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
        self.api_wait = 0.0
        self.watcher: Watcher | None = None
        self.wakeup = -1  # read end of the signal wakeup pipe (see `run`)
        self.api_trouble_told = False
        self.turn_ended = False  # the model ended a turn in this process: tell the lead
        # request ids the model has been shown (after a restart: those still pending)
        self.shutdown_asks: list[str] = self.shown_shutdown_asks()

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> int:
        signal.signal(signal.SIGTERM, self.on_sigterm)
        # The handler is Python code, run between bytecodes: a SIGTERM landing just before
        # a blocking wait begins would sit unhandled until the wait ends (up to
        # idle_timeout). The wakeup fd turns it into a readable byte the waits select on.
        self.wakeup, wakeup_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wakeup_w, warn_on_full_buffer=False)
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
        reply = self.ask_model(context.micro_compact(self.session.messages(self.identity)))
        if reply is None:  # the API failed past the SDK's retries (see api_trouble)
            for rid in self.shutdown_asks:
                if requests.get(self.ws, self.team, rid)["status"] == "pending":
                    # the model cannot answer it: the harness does, as at the end of a turn
                    return self.approve_shutdown(rid, "the model API is unavailable")
            self.wait_for_inbox(self.api_wait)
            return None
        self.last_context = context.context_size(reply.usage)
        content = reply.content or [{"type": "text", "text": "(no reply)"}]
        self.session.append({"type": "assistant", "content": content,
                             "stop_reason": reply.stop_reason, "usage": reply.usage})
        uses = [b for b in content if b.get("type") == "tool_use"]
        for use in uses:
            tool_input = use.get("input") or {}
            result = self.toolbox.run(use["name"], tool_input)
            claimed = None
            if use["name"] == "TaskUpdate" and tool_input.get("status") == "in_progress" \
                    and not result.is_error:
                claimed = tool_input.get("task_id")  # the model took it up itself
            self.record_result(use["id"], result.content, is_error=result.is_error,
                               claimed=claimed)
        if self.toolbox.shutdown_approved:
            return self.leave()
        if not uses:
            self.turn_ended = True
            for rid in self.shutdown_asks:
                if requests.get(self.ws, self.team, rid)["status"] == "pending":
                    # the model ended its turn without answering: approve for it
                    return self.approve_shutdown(rid, "ended its turn without answering")
        return None

    def idle(self) -> int | None:
        """Wait for work. None = back to work; an exit code = leave."""
        deadline = time.monotonic() + self.conf.idle_timeout
        watcher = self.idle_watcher()
        watcher.drain()  # changes made while busy: what they brought is checked below
        # The roster says idle once the member really waits: armed, the lead told. Only a
        # turn that ended in this process is news: a process woken from sleep or restarted
        # is not "idle" to the lead, it is about to read what woke it.
        if self.kind != "lead" and self.turn_ended:
            self.tell_lead_idle()
        self.turn_ended = False
        self.set_status("idle")
        while True:  # the watcher is armed before each check: no line slips past
            new = self.take_inbox()
            asks = [m for m in new if m["type"] == "shutdown_request"]
            if asks:
                return self.approve_shutdown(asks[0]["request_id"], "idle")
            if new:
                return None
            if self.kind != "lead":
                task = self.untold_task() or (
                    None if self.plan_pending() else board.claim(self.ws, self.team, self.name))
                if task is not None:
                    text = f"<auto-claimed>Task #{task['id']}: {task['subject']}"
                    if task.get("description"):
                        text += f"\n{task['description']}"
                    self.session.append({"type": "user", "claimed": task["id"], "content": [
                        {"type": "text", "text": text + "</auto-claimed>"}]})
                    return None
            left = deadline - time.monotonic()
            if left <= 0:
                log.info("idle for %gs: going to sleep", self.conf.idle_timeout)
                return EXIT_SLEEP
            self.wait_on(watcher, left)

    def wait_on(self, watcher: Watcher, timeout: float) -> None:
        """`watcher.wait(timeout)` that a signal also ends (see `run`): on return to
        Python its handler runs."""
        also = [self.wakeup] if self.wakeup >= 0 else []
        watcher.wait(timeout, also=also)
        if also:
            drain_fd(self.wakeup)

    def idle_watcher(self) -> Watcher:
        """inotify on the team folder (the inbox) and the board, armed at the first idle
        and kept for the life of the process (no set-up or tear-down per wake-up)."""
        if self.watcher is None:
            inbox_file = self.inbox_path.name

            def interesting(fname: str) -> bool:
                return fname == inbox_file or (fname.endswith(".json") and fname[0].isdigit())

            self.watcher = Watcher([self.ws.team_dir(self.team), self.ws.tasks_dir(self.team)],
                                   interesting=interesting)
        return self.watcher

    def plan_pending(self) -> bool:
        """A plan of this member's awaits the lead: it claims nothing meanwhile (§6).

        Pending as the member knows it: an answer is recorded before its message is
        appended, so a claim made in between would reach the model in the same turn as a
        rejection it has not read yet. An answered plan counts as pending until its
        answer is in the session (or, should that message never come, for
        PLAN_ANSWER_GRACE seconds)."""
        if not self.toolbox.plan_mode_required:
            return False
        seen = {m.get("request_id") for r in self.session.records if r["type"] == "inbox"
                for m in r["messages"] if m["type"] == "plan_approval_response"}
        now = time.time()
        return any(r["kind"] == "plan_approval" and r["sender"] == self.name and (
            r["status"] == "pending" or (r["request_id"] not in seen and now - float(
                r.get("resolved_at") or 0) < PLAN_ANSWER_GRACE))
            for r in requests.list_requests(self.ws, self.team))

    def untold_task(self) -> Json | None:
        """An in-progress task this member owns that its conversation never heard of: a
        claim made just before a crash (the claim and the session record are two writes),
        or a task the lead handed over directly. Taking it up first loses no work."""
        for task in board.list_tasks(self.ws, self.team):
            if task["owner"] == self.name and task["status"] == "in_progress" \
                    and int(task["id"]) not in self.session.claimed_ids:
                return task
        return None

    # -- inbox and protocols -------------------------------------------------------------
    def take_inbox(self) -> list[Json]:
        """Drain the inbox into the session (recorded and fsynced before the cut)."""
        try:
            if self.inbox_path.stat().st_size == 0:
                # Nothing has landed (a line is one write under the lock, so a size of 0
                # means no line yet): no need for the lock. A line landing right after
                # this is taken at the next check, as if it had landed after the drain.
                return []
        except FileNotFoundError:
            return []
        self.wait_for_sender()
        fresh: list[Json] = []

        def consume(batch: list[Json]) -> None:
            new: list[Json] = []
            taken: set[str] = set()
            for m in batch:  # de-duplicated on the id, within the batch too
                mid = str(m.get("id"))
                if mid not in self.session.known_ids and mid not in taken:
                    taken.add(mid)
                    new.append(m)
            if new:
                self.session.append({"type": "inbox", "messages": new})
                fresh.extend(new)

        inbox.drain(self.ws, self.team, self.name, consume)
        return fresh

    def wait_for_sender(self) -> None:
        """Block in flock until no sender holds the inbox lock. inotify wakes us at the
        sender's write, before its fsync and unlock; `files.lock` (filelock) would then
        retry every millisecond, while the kernel hands a blocking flock over at once.
        The drain right after takes the lock for real (this shared lock is dropped)."""
        try:
            fd = os.open(files.lock_path(self.inbox_path), os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
        finally:
            os.close(fd)  # releases it

    def shown_shutdown_asks(self) -> list[str]:
        """Shutdown requests in the conversation that are still pending (after a restart
        the model may have seen one and not answered yet: the harness must still know)."""
        asks = [m["request_id"] for r in self.session.records if r["type"] == "inbox"
                for m in r["messages"] if m["type"] == "shutdown_request"
                and m.get("request_id")]
        pending = []
        for rid in asks:
            try:
                if requests.get(self.ws, self.team, rid)["status"] == "pending":
                    pending.append(rid)
            except TeamdError:
                continue
        return pending

    def note_shutdown_asks(self, messages: list[Json]) -> None:
        self.shutdown_asks.extend(m["request_id"] for m in messages
                                  if m["type"] == "shutdown_request" and m.get("request_id"))

    def approve_shutdown(self, request_id: str, why: str) -> int:
        """The harness approves for the model; the answer goes to whoever asked."""
        try:
            actions.approve_shutdown(self.ws, self.team, self.name, request_id, reason=why,
                                     pid=os.getpid())
        except TeamdError as exc:  # answered already (e.g. by the model): still leave
            log.info("shutdown %s: %s", request_id, exc)
        return self.leave()

    def leave(self) -> int:
        """Approved a shutdown: desired=stopped and status=stopping (already written with
        the approval by `actions.approve_shutdown`; again here for an approval that was
        refused as answered already), then exit 0."""
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
        # "active" reaches the roster as soon as the request has left, not before it: that
        # write (roster lock, fsyncs, journal) would otherwise sit on the path from a new
        # message to the model. It is done before `call` returns.
        mark_active = None if self.status == "active" else lambda: self.set_status("active")
        try:
            reply = model.call(self.client, after_send=mark_active, model=self.model_name,
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
        """Past the SDK's retries: say so and keep the status truthful; `turn` waits
        `api_wait` seconds (doubling up to API_RETRY_MAX) before trying again."""
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
        self.api_wait = delay

    def wait_for_inbox(self, timeout: float) -> None:
        """Wait `timeout` s, or less if a line lands in the inbox: a shutdown request must
        not sit out a long back-off (the next try takes it in)."""
        name = self.inbox_path.name
        deadline = time.monotonic() + timeout
        with Watcher([self.inbox_path.parent], interesting=lambda f: f == name) as watcher:
            while (left := deadline - time.monotonic()) > 0:
                try:
                    if self.inbox_path.stat().st_size > 0:
                        return
                except FileNotFoundError:
                    pass
                self.wait_on(watcher, left)

    def compact(self) -> None:
        """Summarise a long history with the model; keep the full one in transcripts/."""
        before = self.last_context
        # Input not answered yet (a message that woke an idle member, an auto-claim) is
        # carried over verbatim, not folded into the summary: the model still sees it.
        cut = self.session.unanswered()
        carry = self.session.records[cut:]
        # trimmed like every other call: last_context was measured on the trimmed history
        messages = context.micro_compact(self.session.messages(self.identity, upto=cut))
        now = time.time()
        stamp = time.strftime("%Y%m%dT%H%M%S", time.localtime(now)) + f".{int(now % 1 * 1e6):06d}"
        transcript = self.ws.transcripts_dir(self.team) / f"{self.name}-{stamp}.jsonl"
        files.ensure_dir(transcript.parent)
        files.atomic_write_bytes(transcript, b"".join(
            files.dumps_line(m) for m in self.session.messages(self.identity)))
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
                             "claimed_ids": sorted(self.session.claimed_ids),
                             "before_tokens": before, "carry": carry})
        after = len(compacted_head(self.identity, self.session.records[0])) // 4
        events.emit(self.ws, self.team, "compacted", member=self.name, before_tokens=before,
                    after_tokens=after, transcript=rel)
        self.last_context = 0

    # -- the roster (only while its pid is ours) -----------------------------------------
    def record_result(self, tool_use_id: str, content: str, *, is_error: bool,
                      claimed: Any = None) -> None:
        record: Json = {"type": "tool_result", "block": {
            "type": "tool_result", "tool_use_id": tool_use_id, "content": content,
            "is_error": is_error}}
        if isinstance(claimed, int):
            record["claimed"] = claimed  # known to the model: never re-announced
        self.session.append(record)

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
