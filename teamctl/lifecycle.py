"""`shutdown`, `stop`, `restart`, `up`, `down`, `remove` and `delete`: members and teams
coming and going (CONTRACT §6, §9).

Registered on the app by teamctl.cli. Each command parses its arguments and prints; the
sequences and their waits are `teamd.protocols`' (the library, not the CLI), what
they write is `teamd.actions`'.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from teamctl import complete, gitviews
from teamctl.params import WAIT_DEFAULT, NameArg, TeamArg, TimeoutOpt, ws
from teamd import actions, pidfile, protocols
from teamd.errors import BadInput


def say(line: str) -> None:
    """What a wait announces, printed before it starts waiting."""
    print(line, flush=True)


def shutdown(
    team: TeamArg, name: NameArg,
    reason: Annotated[str, typer.Option(help="Why; the member sees it.")] = "",
    wait: Annotated[bool, typer.Option("--wait", help="Wait for the answer and the exit.")
                    ] = False,
    timeout: TimeoutOpt = WAIT_DEFAULT,
) -> None:
    """Ask a member to shut down (the handshake). A member with no process is answered for
    at once. With --wait: exit 0 when approved and gone, 1 when rejected or timed out, 130
    on Ctrl-C (the request stays pending).

    \b
    Example:
      teamctl shutdown shop alice --reason 'done for today' --wait && teamctl delete shop
    """
    w = ws()
    result = actions.shutdown(w, team, name, reason=reason)
    rid = result["request"]["request_id"]
    if result["answered"]:
        print(f"{name} was not running: shut down (request {rid})")
        return
    asked = f"asked {name} to shut down (request {rid})"
    if not wait:
        print(asked)
        return
    protocols.await_shutdown(w, team, rid, name, timeout, announce=asked, say=say)
    print(f"{name} shut down")


def stop(team: TeamArg, name: NameArg,
         force: Annotated[bool, typer.Option("--force", help="Required: skip the handshake.")
                          ] = False,
         timeout: TimeoutOpt = WAIT_DEFAULT) -> None:
    """Stop a member for good without asking it: desired=stopped, then SIGTERM and, after
    stop_timeout, SIGKILL (sent by the supervisor). Waits until it is gone.

    \b
    Example:
      teamctl stop shop alice --force
    """
    if not force:
        raise BadInput("stop needs --force (to ask the member nicely, use `teamctl shutdown`)")
    protocols.stop(ws(), team, name, timeout, say=say)
    print(f"{name} stopped")


def restart(team: TeamArg,
            name: Annotated[str | None, typer.Argument(
                help="Member name (default: every member).", show_default=False,
                autocompletion=complete.member)] = None) -> None:
    """Stop the member (every member without NAME) if running, clear failed/backoff, and
    start it again.

    \b
    Example:
      teamctl restart shop alice
    """
    if name is None:
        names = actions.restart_all(ws(), team)
        print(f"restart of {', '.join(names) or 'nobody'} requested")
    else:
        actions.restart(ws(), team, name)
        print(f"restart of {name} requested")
    if not pidfile.supervised(ws()):
        print("note: no supervisor is running; it will start with `teamd run`", file=sys.stderr)


def up(team: TeamArg) -> None:
    """Start every member that is stopped (desired=stopped, shut down or failed), like
    `docker compose up`.

    \b
    Example:
      teamctl up shop
    """
    names = actions.restart_all(ws(), team, only_stopped=True)
    print(f"starting {', '.join(names)}" if names else "every member is already up")
    if names and not pidfile.supervised(ws()):
        print("note: no supervisor is running; they start with `teamd run`", file=sys.stderr)


def down(team: TeamArg,
         force: Annotated[bool, typer.Option("--force", help="No handshake: stop everyone.")
                          ] = False,
         wait: Annotated[bool, typer.Option("--wait", help="Wait until every member is down.")
                         ] = False,
         timeout: TimeoutOpt = WAIT_DEFAULT) -> None:
    """Shut every member down with the handshake (or --force), keeping the team, like
    `docker compose down` without the removal. `teamctl up` starts them again.

    \b
    Example:
      teamctl down shop --wait
    """
    w = ws()
    done = actions.down(w, team, force=force)
    opened = done["requests"]
    said = (f"asked {', '.join(r['recipient'] for r in opened) or 'nobody'} to shut down"
            + (f"; stopping {', '.join(done['stopped'])}" if done["stopped"] else "")
            + (f"; {', '.join(done['answered'])} shut down (not running)"
               if done["answered"] else ""))
    if not wait:
        print(said)
        return
    protocols.await_down(w, team, opened, timeout, announce=said, say=say)
    print(f"team {team} is down")


def remove(team: TeamArg, name: NameArg,
           force: Annotated[bool, typer.Option("--force", help="No handshake: stop it.")
                            ] = False,
           timeout: TimeoutOpt = WAIT_DEFAULT) -> None:
    """Take a member out of the team for good: the shutdown handshake (or --force), then
    out of the roster; its unfinished tasks go back to pending.

    \b
    Example:
      teamctl remove shop alice
    """
    gone = protocols.remove(ws(), team, name, force=force, timeout=timeout)
    print(f"removed {name} from team {team}")
    gitviews.report_release(gone.get("worktree_report"))


def delete(team: TeamArg,
           force: Annotated[bool, typer.Option("--force", help="No handshake: stop everyone.")
                            ] = False,
           timeout: TimeoutOpt = WAIT_DEFAULT,
           purge: Annotated[bool, typer.Option(
               "--purge", help="Keep no archive of its journal, sessions and transcripts.")
           ] = False) -> None:
    """Shut every member down (handshake, or --force), then remove the team's folders. Its
    journal, sessions and transcripts are kept in .teams/.archive/TEAM-TIME/ (unless
    --purge), where `teamctl logs TEAM` still finds them.

    \b
    Example:
      teamctl delete shop --timeout 60
    """
    w = ws()
    with_worktrees = [m for m in actions.require_team(w, team)["members"] if m.get("worktree")]
    archive = protocols.delete(w, team, force=force, purge=purge, timeout=timeout, say=say)
    kept = f"; its journal and transcripts are in {archive}" if archive else ""
    print(f"deleted team {team}{kept}")
    gitviews.report_after_delete(with_worktrees)
