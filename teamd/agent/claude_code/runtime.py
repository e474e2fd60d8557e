"""The Claude Code runtime (CONTRACT §14): the member's agent is the Claude Code CLI,
headless, behind `teamd.agent.runtime.Runtime`.

The member does all it does for any runtime (intake, idle and sleep, hooks, the shutdown
protocol, status); this runtime starts the forwarder (`teamd.agent.forwarder`) and the CLI
(`process`) with the member, and each turn:

- gives Claude Code, as user turns, the member's recorded input it has not been given yet
  (the opening turn, `OPENING` — the member's prompt is in its system prompt —, inbox
  messages in section 6's form, `<auto-claimed>` tasks, hook feedback): each is in the
  session before it is written to the CLI. Written while Claude Code works,
  a turn is absorbed after its next tool call (Claude Code 2.1.332, measured): a message
  never waits for the end of a long turn;
- mirrors what Claude Code says (its replies, tool calls and results) into the session, so
  `attach` and `transcript` show the conversation as for any member, and journals each of
  its own tool calls as a `tool_call` event;
- answers what Claude Code asks its permission host: leaving plan mode is the plan
  protocol (`plan`), and an approved plan takes Claude Code out of plan mode;
- ends the turn at Claude Code's `result` once everything given is taken in (or, when its
  transcript lags behind the `result`, once it says so: `settled`) — unless the
  forwarder refused its call at a budget: then the member stays `paused` until the budget
  is raised, and a user turn tells Claude Code to go on.

Its session id is chosen by the member and recorded (`claude_session`) before the CLI first
starts, so a restarted member resumes it (`--resume`). After a crash of either process, the
input Claude Code took in is read from its own transcript (`transcript`): only the rest is
given again. A turn the crash cut short (input taken in, no `result` mirrored after it) is
resumed by a user turn saying so, naming the tool calls that were running: Claude Code
never runs them again by itself, and the note tells the model they were not re-run. A CLI
that dies on its own is a crash of the member; the CLI dies with it.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import time
import uuid
from typing import TYPE_CHECKING, Any

from teamd import requests
from teamd.agent.claude_code import pretool, process, transcript
from teamd.agent.claude_code.plan import PLAN_NOTE, PlanMode
from teamd.agent.forwarder import Forwarder
from teamd.agent.runtime import GOES_ON, TurnOutcome
from teamd.agent.session import INTERRUPTED, render_message
from teamd.agent.shutdowns import Leave
from teamd.agent.tool_handlers import ToolResult
from teamd.agent.tools import journal_call
from teamd.files import Json
from teamd.states import Status

if TYPE_CHECKING:
    from teamd.agent.member import Member

log = logging.getLogger(__name__)

#: how long a turn step waits for Claude Code before taking the inbox in again
POLL = 0.25
#: the session record of the Claude Code session id
SESSION_RECORD = "claude_session"
#: the session record of the end of one of its turns (its `result` event)
RESULT_RECORD = "claude_result"
#: in a RESULT_RECORD: the turn ended on a call the forwarder held at a budget
HELD = "held_at_budget"
#: the exit code of a member whose Claude Code died on its own (a crash)
EXIT_CRASH = 1
#: what the member's system prompt (written for any runtime) means in Claude Code's words
TOOLS_NOTE = ("In Claude Code, the team's tools are those of the MCP server `teamd` "
              "(mcp__teamd__SendMessage, mcp__teamd__TaskUpdate, …), and bash, read_file, "
              "write_file and edit_file are your Bash, Read, Write and Edit.")
#: how the member's prompt is introduced in Claude Code's system prompt
INSTRUCTIONS = "Your instructions:\n"
#: the first user turn of a new conversation: the member's prompt is in the system prompt
OPENING = "Begin: do what your instructions in the system prompt ask."
#: the user turn that lets Claude Code go on once the budget that paused it is raised
GO_ON = "The budget that paused your work was raised: go on from where you were."


def input_text(record: Json) -> str | None:
    """The user turn a session record gives Claude Code, or None if it is no input (a
    mirrored reply, a hidden message, the session id)."""
    if record.get("hidden"):
        return None
    if record["type"] == "inbox":
        return "\n".join(render_message(m) for m in record["messages"])
    if record["type"] == "user" and not record.get("mirrored"):
        return "\n".join(b["text"] for b in record["content"] if b.get("type") == "text")
    return None


class ClaudeCodeRuntime:
    """One member process's Claude Code. `given`: indices of the session's input records
    Claude Code has (or is being) given; `busy`: it is at work on a turn."""

    def __init__(self, member: Member) -> None:
        self.m = member
        self.home = member.ws.claude_state(member.team, member.name)
        self.forwarder: Forwarder | None = None
        self.cli: process.ClaudeProcess | None = None
        self.session_id = ""
        self.given: set[int] = set()
        self.busy = False
        #: the forwarder's refusals (at a budget) seen at the end of a turn
        self.refused = 0
        #: the last process's turn ended held at a budget: wait for the raise first
        self.held = False
        #: Claude Code's own tool calls under way: id → (name, input, when seen)
        self.calls: dict[str, tuple[str, Any, float]] = {}
        #: after a `result` that left input given looking not taken: the transcript's
        #: dequeues then (a dequeue since: Claude Code began another turn), else None
        self.settling: int | None = None
        self.plan = PlanMode(member)

    # -- the Runtime interface -----------------------------------------------------------
    def opening(self) -> str:
        return OPENING

    def start(self) -> int | None:
        m = self.m
        known = [r["id"] for r in m.session.records if r["type"] == SESSION_RECORD]
        if known:
            self.session_id = str(known[-1])
        else:  # recorded before the CLI first runs: a restart finds it
            self.session_id = str(uuid.uuid4())
            m.session.append({"type": SESSION_RECORD, "id": self.session_id})
        resume = transcript.path(self.home, self.session_id) is not None
        for rid in pretool.abandon_asks(m.ws, m.team, m.name):  # their calls died with it
            log.info("permission request %s %s", rid, pretool.RESTARTED)
        # what a crash of either process left: input Claude Code never took in
        inputs = self.inputs()
        taken = transcript.taken_in(self.home, self.session_id)
        missing = set(transcript.not_taken([text for _, text in inputs], taken))
        self.given = {index for n, (index, _) in enumerate(inputs) if n not in missing}
        note = self.cut_turn(taken.unanswered)
        if note is not None:  # recorded, so given exactly once like any input
            m.session.append({"type": "user", "content": [{"type": "text", "text": note}]})
        # a turn that ended held at a budget, not raised before the crash (its GO_ON never
        # recorded): the first turn of this process waits for the raise, as the last did
        self.held = note is None and held_at_budget(m.session.records)
        self.forwarder = Forwarder(m).start()
        notes = f"{TOOLS_NOTE}\n{PLAN_NOTE}" if m.toolbox.plan_mode_required else TOOLS_NOTE
        argv = process.command(
            m.conf.claude_code, model=m.model_name, effort=m.effort or m.conf.effort,
            system=f"{m.system}\n\n{INSTRUCTIONS}{m.prompt}\n\n{notes}",
            session_id=self.session_id, resume=resume,
            mcp=process.mcp_config(m.ws, m.team, m.name),
            settings=pretool.settings_json(m.ws, m.team, m.name, os.getpid()),
            planning=self.plan.starts_planning())
        self.cli = process.ClaudeProcess(argv, m.cwd, process.environment(
            self.home, self.forwarder.url, self.forwarder.stand_in))
        log.info("claude code %d started (%s session %s)", self.cli.pid,
                 "resuming" if resume else "new", self.session_id)
        m.waits.watch_agent(self.cli.ended, self.check_alive)  # idle, paused or waiting
        return None

    def awaits_input(self) -> bool:
        # a turn held at a budget is not over, though nothing is left to give: the member
        # waits for the raise (`take_turn`), `paused`, never idle
        return not self.held and not self.busy and not self.unsent()

    def take_turn(self) -> TurnOutcome:
        """Give what is new, then take one thing Claude Code says (or wait POLL for it)."""
        cli = self.cli
        assert cli is not None
        if self.held:
            self.held = False
            return self.paused()
        self.m.take_in()
        unsent = self.unsent()
        if unsent:
            self.plan.leave_if_approved(cli, [self.m.session.records[i] for i, _ in unsent])
        for index, text in unsent:
            if self.m.standing.status != Status.ACTIVE:
                self.m.standing.set_status(Status.ACTIVE)
            if not cli.send(text):
                # its input is given again after the restart: it was not taken in
                return TurnOutcome(exit_code=self.died())
            self.given.add(index)
            self.busy = True
        if not self.busy:
            return GOES_ON  # nothing for it to do (a hidden message): the member idles
        try:
            event = cli.events.get(timeout=POLL)
        except queue.Empty:
            return self.settled()
        if event is None:
            return TurnOutcome(exit_code=self.died())
        return self.heard(event)

    def died(self) -> int:
        """Claude Code is gone on its own: a crash of the member (its exit code), which
        teamd restarts by policy and which resumes the session."""
        assert self.cli is not None
        log.error("claude code %d died on its own (exit %s): the member crashes",
                  self.cli.pid, self.cli.popen.wait())
        return EXIT_CRASH

    def check_alive(self) -> None:
        """After each wait of the member (idle, paused, waiting for an answer): a Claude
        Code that died meanwhile ends the member as a crash (`Leave`)."""
        if self.cli is not None and not self.cli.alive():
            raise Leave(self.died())

    def stop(self) -> None:
        if self.cli is not None:
            self.cli.kill()
        if self.forwarder is not None:
            self.forwarder.stop()

    # -- input and output ----------------------------------------------------------------
    def inputs(self) -> list[tuple[int, str]]:
        """The session's input records, in order: (index, the user turn's text)."""
        found = []
        for index, record in enumerate(self.m.session.records):
            text = input_text(record)
            if text is not None:
                found.append((index, text))
        return found

    def cut_turn(self, unanswered: bool) -> str | None:
        """The note resuming a turn the last process left cut short, or None: input was
        taken in and no `result` came after it, or Claude Code began a turn after its last
        `result` (a turn queued while it worked: given before that `result`) and said
        something in it, or its transcript ends on a turn it took in and never answered
        (`unanswered`: that queued turn, cut before any reply)."""
        records = self.m.session.records
        if not self.given:
            return None
        ends = [i for i, r in enumerate(records) if r["type"] == RESULT_RECORD]
        since = ends[-1] + 1 if ends else 0
        after = records[since:]
        if max(self.given) < since and not unanswered and not any(
                r["type"] == "assistant" for r in after):
            return None  # the last turn ended, and none began since
        done = {r["block"].get("tool_use_id") for r in after if r["type"] == "tool_result"}
        cut = [b.get("name", "?") for r in after if r["type"] == "assistant"
               for b in r["content"] if b.get("type") == "tool_use" and b.get("id") not in done]
        calls = f" Its tool calls then running ({', '.join(cut)}) were {INTERRUPTED}." \
            if cut else ""
        return f"Your last turn was cut short by a restart.{calls} Go on from where you were."

    def forwarder_refused(self) -> int:
        return 0 if self.forwarder is None else self.forwarder.refused

    def paused(self) -> TurnOutcome:
        """Its turn ended on a call the forwarder refused at a budget (the member is
        `paused`): wait until the budget is raised or removed, if it is not already (a
        shutdown_request ends the wait, `Leave`), then tell Claude Code to go on — a
        recorded input like any other."""
        self.busy, self.settling = False, None
        self.m.gate.wait()
        self.m.session.append({"type": "user", "content": [{"type": "text", "text": GO_ON}]})
        return GOES_ON

    def approved_shutdown(self) -> bool:
        """Claude Code approved a shutdown request it was shown (its SendMessage ran in
        the MCP server): the member leaves, exit 0, as after the built-in loop's."""
        m = self.m
        return any(requests.get(m.ws, m.team, rid)["status"] == "approved"
                   for rid in m.shutdowns.asks)

    def journal(self, result: Json) -> None:
        """A `tool_call` event for one of Claude Code's own calls that ended (the team
        tools journal their own, in the MCP server)."""
        call = self.calls.pop(str(result.get("tool_use_id")), None)
        if call is None or call[0].startswith(process.TEAM_PREFIX):
            return
        name, given, seen = call
        content = result.get("content")
        text = content if isinstance(content, str) else json.dumps(content)
        journal_call(self.m.ws, self.m.team, self.m.name, name, given,
                     ToolResult(text, is_error=bool(result.get("is_error"))),
                     int((time.monotonic() - seen) * 1000))

    def pending(self, taken: transcript.Taken) -> bool:
        """Some input given to Claude Code is not taken in, by its transcript."""
        given = [text for index, text in self.inputs() if index in self.given]
        return bool(transcript.not_taken(given, taken))

    def settled(self) -> TurnOutcome:
        """With nothing said for POLL after a `result` that left input looking not taken:
        the transcript read again. Claude Code writes it a little after it acts, so input
        it took in (absorbed mid-turn, or its `user` entry) may land after the `result`:
        once everything is there and no turn began since (no new `dequeue`), the turn
        is over; a new `dequeue` means it took a queued turn, whose `result` ends it."""
        if self.settling is None:
            return GOES_ON
        taken = transcript.taken_in(self.home, self.session_id)
        if taken.dequeued > self.settling:
            self.settling = None  # another turn began: its own result ends it
            return GOES_ON
        if self.pending(taken):
            return GOES_ON
        self.settling = None
        self.busy = False
        return TurnOutcome(ended=True)

    def prompted(self, request_id: str, asked: Json) -> TurnOutcome:
        """Claude Code asks the member (its permission host) whether a call may run: only
        ExitPlanMode comes here (`process.HOSTED`), answered by the plan protocol. A
        shutdown that ended the wait for the lead's answer: the member leaves."""
        call = self.calls.get(str(asked.get("tool_use_id")))
        assert self.cli is not None
        self.cli.answer(request_id, self.plan.exit_plan_mode(asked, call and call[1]))
        leaving = self.m.shutdowns.leaving
        if leaving is not None:
            return TurnOutcome(exit_code=self.m.shutdowns.approve(
                leaving, "waiting for plan approval"))
        return GOES_ON

    def unsent(self) -> list[tuple[int, str]]:
        return [(i, text) for i, text in self.inputs() if i not in self.given]

    def heard(self, event: Json) -> TurnOutcome:
        """One stream-json event: a reply or a tool result mirrored into the session, the
        end of a turn."""
        kind, message = event.get("type"), event.get("message")
        self.settling = None  # Claude Code said something: it is at work, or ends a turn
        asked = process.prompt(event)
        if asked is not None:
            return self.prompted(str(event.get("request_id")), asked)
        if kind == "system":
            self.plan.heard(event)
        elif kind == "assistant" and isinstance(message, dict):
            content = message.get("content") or []
            self.m.session.append({"type": "assistant", "mirrored": True,
                                   "content": content,
                                   "stop_reason": message.get("stop_reason")})
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    self.calls[str(block.get("id"))] = (
                        str(block.get("name")), block.get("input"), time.monotonic())
        elif kind == "user" and isinstance(message, dict) and isinstance(
                message.get("content"), list):
            for block in message["content"]:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    self.m.session.append({"type": "tool_result", "mirrored": True,
                                           "block": block})
                    self.journal(block)
            if self.approved_shutdown():  # through SendMessage: finish as section 6 says
                return TurnOutcome(exit_code=self.m.shutdowns.leave())
        elif kind == "result":
            refused = self.forwarder_refused() > self.refused
            self.refused = self.forwarder_refused()
            ended = {"type": RESULT_RECORD, "subtype": event.get("subtype"),
                     "is_error": bool(event.get("is_error"))}
            # held at a budget: recorded, so a restart before the raise still waits for it
            self.m.session.append({**ended, HELD: True} if refused and ended["is_error"]
                                  else ended)
            # a turn written after its last tool call is still queued: another turn follows
            # (or the transcript lags behind what it took in: `settled` reads it again)
            taken = transcript.taken_in(self.home, self.session_id)
            self.busy = self.pending(taken)
            self.settling = taken.dequeued if self.busy else None
            if event.get("is_error"):
                if refused:  # a call held at a budget (raised since, maybe)
                    return self.paused()
                self.m.standing.update(last_error=f"claude code: {event.get('result')}"[:500])
            if not self.busy:
                return TurnOutcome(ended=True)
        return GOES_ON


def held_at_budget(records: list[Json]) -> bool:
    """The session's last turn ended held at a budget, and no GO_ON followed it."""
    for record in reversed(records):
        if record.get("type") == RESULT_RECORD:
            return bool(record.get(HELD))
        if record.get("type") == "user" and GO_ON in json.dumps(record.get("content")):
            return False
    return False


__all__ = ["ClaudeCodeRuntime"]
