"""The seam between a member and its agent (CONTRACT §6, §14): what a runtime must do, and
what one of its turns comes to.

A member (`teamd.agent.member`) does what every member does whatever its agent: intake and
exactly-once delivery from the inbox, the shutdown, plan and permission protocols, idle and
sleep, its status, budgets, hooks. Its agent — the built-in loop on the Messages API
(`teamd.agent.builtin`), or, later, the Claude Code CLI driven over stream-json — sits
behind `Runtime`: it is started once per process, asked for one turn at a time, and
stopped on SIGTERM. A runtime takes the member's inbox in (`Member.take_in`) when it is
ready for input, and answers with a `TurnOutcome`; the member does the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class TurnOutcome:
    """What one turn of the agent came to.

    `exit_code`: the process leaves with it (0 after an approved shutdown);
    `ended`: the agent ended its turn (the member answers a shutdown asked and left
    unanswered, runs `teammate_idle`, then goes idle once nothing is left to do);
    `stuck`: the agent cannot go on until new input comes (an answer retrying cannot
    mend): the member waits for its next message, and does not go to sleep meanwhile."""

    exit_code: int | None = None
    ended: bool = False
    stuck: bool = False


#: a turn that goes on: more to do before the agent answers
GOES_ON = TurnOutcome()


class Runtime(Protocol):
    """An agent a member runs. One instance per member process."""

    def opening(self) -> str:
        """The first user turn of a member's new conversation (recorded once, before
        `start`): the built-in loop is given the member's prompt; an agent that has the
        prompt in its system prompt, a turn that sets it to work on it."""

    def start(self) -> int | None:
        """Settle what the last process of this member left unfinished (a tool call cut
        by a restart); an exit code ends the process at once."""

    def awaits_input(self) -> bool:
        """Has the agent answered, so that nothing happens until new input (a message, a
        task) comes? Then the member is idle."""

    def take_turn(self) -> TurnOutcome:
        """One step of the agent's work: take the member's inbox in, let the agent act on
        what its conversation holds, and say what came of it."""

    def stop(self) -> None:
        """SIGTERM: take down what the agent runs (tools' process groups, a CLI), at once.
        The conversation is already on disk."""
