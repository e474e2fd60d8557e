"""`logs`, `transcript` and `attach`: a team's journal and a member's conversation, as
commands (CONTRACT §7, §9). Registered on the app by teamctl.cli.

`logs` streams: it prints as it reads, its memory flat whatever the journal's size
(`teamd.events.stream`); with no team it interleaves every team's journal by time
(`teamctl.interleave`). A removed member is still known by its journal lines and by the
session `remove` kept aside (`.teams/TEAM/removed/NAME-TS/`); a deleted team by its latest
archive. How a record or a session reads is `teamctl.output`'s and `teamctl.transcript`'s.
"""

from __future__ import annotations

import re
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Annotated, Any

import typer

from teamctl import complete, output
from teamctl.params import NameArg, TeamArg, ws
from teamd import actions, events, files, roster
from teamd.errors import BadInput, TeamdError
from teamd.files import Json
from teamd.layout import LEAD, SUPERVISOR, USER, Workspace, validate_member_name

# -- --since and --until -----------------------------------------------------------------
_AGE_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d)$")
_CLOCK_RE = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$")
_UNITS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def moment(text: str, flag: str = "--since", now: float | None = None) -> float:
    """Epoch seconds for `--since` or `--until`: an ISO 8601 date-time (local time unless
    it says otherwise), `HH:MM[:SS]` today, or an age such as `90s`, `10m`, `2h`, `1d`."""
    now = time.time() if now is None else now
    value = text.strip()
    age = _AGE_RE.match(value)
    if age:
        return now - float(age.group(1)) * _UNITS[age.group(2)]
    clock = _CLOCK_RE.match(value)
    if clock:
        hour, minute, second = int(clock.group(1)), int(clock.group(2)), int(clock.group(3) or 0)
        if hour < 24 and minute < 60 and second < 60:
            today = datetime.fromtimestamp(now)
            return today.replace(hour=hour, minute=minute, second=second,
                                 microsecond=0).timestamp()
    else:
        try:
            return datetime.fromisoformat(value).timestamp()  # naive: local time
        except ValueError:
            pass
    raise BadInput(f"{flag} {text!r}: use an ISO 8601 date-time (2025-11-23T14:05), "
                   "HH:MM[:SS] (today) or an age (90s, 10m, 2h)")


# -- whose journal, whose session ----------------------------------------------------------
def _journal_of(w: Workspace, team: str) -> tuple[Json | None, str | None]:
    """(roster or None, archive or None) of a team, or of its latest archive once it was
    deleted (`archive`: one of `archives(team)`, to read its journal and sessions by). An
    unreadable roster hides no journal: it is said, and read."""
    try:
        return actions.require_team(w, team), None
    except TeamdError as exc:
        if not isinstance(exc, BadInput):
            print(f"note: the roster of team {team} cannot be read ({exc}); its journal "
                  "is read all the same", file=sys.stderr)
            return None, None
        archives = w.store.archives(team)
        if not archives:
            raise
        return w.store.read_archived_spec(team, archives[-1]), archives[-1]


def _colors(config: Json | None) -> dict[str, str]:
    if not config:
        return {}
    return {m["name"]: m.get("color") for m in config.get("members", []) if m.get("color")}


def _removed_session(w: Workspace, team: str, config: Json, name: str) -> str:
    """Where `remove` kept the session a removed member left (the latest, if the name was
    removed twice), or BadInput: no such member, now or before."""
    kept = w.store.removed(team, name)
    if not kept:
        raise roster.unknown_member(config, name)
    return str(kept[-1])


# -- logs ----------------------------------------------------------------------------------
def _values(value: Any) -> Iterator[str]:
    """Every field value of a record, whole, as text (what -g searches besides the line)."""
    if isinstance(value, dict):
        for inner in value.values():
            yield from _values(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _values(inner)
    elif isinstance(value, str):
        yield value
    elif value is not None:
        yield str(value)


class _Printer:
    """How `logs` shows a record: one line (painted for a terminal), or JSON."""

    def __init__(self, full: bool, as_json: bool, width: int = 0) -> None:
        self.full = full
        self.as_json = as_json
        self.width = width  # of the team column, when every team is shown
        self.colors: dict[str, dict[str, str]] = {}

    def line(self, team: str, rec: Json, paint: Callable[[str, str | None], str]) -> str:
        name = str(rec.get("member") or "-")
        where = f"{team:{self.width}} " if self.width else ""
        color = self.colors.get(team, {}).get(name)
        return (f"{paint(output.when(rec.get('ts')), 'dim')} {paint(where, 'bold')}"
                f"{paint(output.safe(f'{name:12}'), color)} "
                f"{output.describe_event(rec, full=self.full)}")

    def plain(self, team: str, rec: Json) -> str:
        return self.line(team, rec, lambda text, _color: text)

    def show(self, team: str, rec: Json) -> None:
        if self.as_json:
            shown = {"team": team, **rec} if self.width else rec
            sys.stdout.write(files.dumps_line(shown).decode())
        else:
            sys.stdout.write(self.line(team, rec, output.paint) + "\n")


def logs(team: Annotated[str | None, typer.Argument(
             help="Team name (default: every team, interleaved by time).",
             show_default=False, autocompletion=complete.team)] = None,
         names: Annotated[list[str] | None, typer.Argument(
             help="Only events about these members (removed ones too).", show_default=False,
             autocompletion=complete.member)] = None,
         lines: Annotated[int | None, typer.Option(
             "--lines", "-n", metavar="N", help="Start with the last N events shown.")
         ] = None,
         since: Annotated[str | None, typer.Option(
             metavar="T", help="Only events since T: 2025-11-23T14:05, 14:05[:30] (today), "
             "or an age: 90s, 10m, 2h.")] = None,
         until: Annotated[str | None, typer.Option(
             metavar="T", help="Only events until T (the forms of --since).")] = None,
         grep: Annotated[str | None, typer.Option(
             "--grep", "-g", metavar="RE", help="Only events where this Python regular "
             "expression matches the printed line or a whole field value.")] = None,
         full: Annotated[bool, typer.Option(
             "--full", "-l", help="Print values whole (not cut with …).")] = False,
         follow: Annotated[bool, typer.Option(
             "--follow", "-f", help="Keep printing new events (from the end, after the last "
             "-n when given); ends when the team is deleted.")] = False,
         verbose: Annotated[bool, typer.Option(
             "--verbose", "-v", help="Also model calls and idle notifications.")] = False,
         as_json: Annotated[bool, typer.Option("--json", help="One JSON event per line.")
                            ] = False) -> None:
    """The team's event journal (events.jsonl and its rotated files), oldest first, like
    journalctl; with no TEAM every team's, interleaved by time, each line naming its team
    (--json: a "team" field). Streamed: -n reads from the end, memory stays flat. A
    deleted team's latest archive is read. A process's own stderr is in
    .teams/TEAM/logs/NAME.log. A line not from today shows its date.

    \b
    Examples:
      teamctl logs shop alice bob -n 20
      teamctl logs shop --since 10m -f
      teamctl logs --since 09:00 --until 10:30 -g 'FAILED|denied'
      teamctl logs shop --json | jq 'select(.event == "tool_call" and .ok == false)'
    """
    w = ws()
    if lines is not None and lines < 0:
        raise BadInput("-n takes a number of events >= 0")
    start = moment(since, "--since") if since else None
    end = moment(until, "--until") if until else None
    if end is not None and follow:
        raise BadInput("--until and --follow do not go together (nothing new is older)")
    try:
        pattern = re.compile(grep) if grep is not None else None
    except re.error as exc:
        raise BadInput(f"-g {grep!r}: not a regular expression ({exc})") from None
    printer = _Printer(full, as_json)

    def keeps(team: str, who: list[str]) -> Callable[[Json], bool]:
        def keep(rec: Json) -> bool:
            if not events.concerns(rec, who) or not (verbose or not events.is_chatter(rec)):
                return False
            if end is not None and events.ts_of(rec) > end:
                return False
            return pattern is None or bool(pattern.search(printer.plain(team, rec))) or \
                any(pattern.search(v) for v in _values(rec))
        return keep

    history = not follow or lines is not None or start is not None
    if team is None:
        _every_team(w, printer, keeps, lines, start, follow, history)
    else:
        _one_team(w, team, names or [], printer, keeps, lines, start, follow, history)


def _one_team(w: Workspace, team: str, who: list[str], printer: _Printer,
              keeps: Callable[[str, list[str]], Callable[[Json], bool]], lines: int | None,
              start: float | None, follow: bool, history: bool) -> None:
    config, archive = _journal_of(w, team)
    if config is not None and archive is None:
        for name in who:
            if name not in (LEAD, SUPERVISOR, USER) and roster.find(config, name) is None:
                _removed_session(w, team, config, name)  # else: unknown member
    if archive is not None:
        print(f"note: team {team} was deleted; reading its archive {archive}", file=sys.stderr)
    printer.colors[team] = _colors(config)
    following = follow and archive is None
    bad = 0

    def unreadable(_line: bytes) -> None:
        nonlocal bad
        bad += 1  # skipped; said once at the end

    try:
        for rec in events.stream(w, team, archive=archive, match=keeps(team, who),
                                 last=lines, since=start, follow=following,
                                 history=history, on_bad=unreadable):
            printer.show(team, rec)
            if following:
                sys.stdout.flush()
    except KeyboardInterrupt:
        return  # Ctrl-C ends a follow: exit 0
    finally:
        if bad:
            where = w.store.describe_journal(team, archive)
            print(f"teamctl: skipped {bad} unreadable line(s) in {where} (or its rotated "
                  "files)", file=sys.stderr)
    if following:
        _deleted(team, printer)


def _deleted(team: str, printer: _Printer) -> None:
    print(f"-- team {team} was deleted --", file=sys.stderr if printer.as_json else sys.stdout,
          flush=True)


def _every_team(w: Workspace, printer: _Printer,
                keeps: Callable[[str, list[str]], Callable[[Json], bool]], lines: int | None,
                start: float | None, follow: bool, history: bool) -> None:
    """Every team's journal, interleaved by time; -n counts across them all."""
    from teamctl.interleave import Source, interleave

    teams = w.store.team_names()
    if not teams:
        print(f"no teams in {w.root}", file=sys.stderr)
        return
    printer.width = max(len(t) for t in teams)
    bad: dict[str, int] = {}

    def source(team: str) -> Source:
        def records(caught_up: Callable[[], None]) -> Iterator[Json]:
            def unreadable(_line: bytes) -> None:
                bad[team] = bad.get(team, 0) + 1
            return events.stream(w, team, match=keeps(team, []), last=lines,
                                 since=start, follow=follow, history=history,
                                 on_bad=unreadable, on_caught_up=caught_up)
        return records

    for team in teams:
        try:
            printer.colors[team] = _colors(roster.load(w, team))
        except TeamdError:
            pass  # an unreadable roster: its journal is shown all the same, uncoloured
    last: deque[tuple[str, Json]] | None = deque(maxlen=lines) if lines is not None else None
    try:
        for item in interleave({t: source(t) for t in teams}):
            if item is None:  # every history read: the last N of them all, then live
                for team, rec in last or ():
                    printer.show(team, rec)
                last = None
                sys.stdout.flush()
            elif item[1] is None:
                _deleted(item[0], printer)
            elif last is not None:
                last.append((item[0], item[1]))
            else:
                printer.show(item[0], item[1])
                if follow:
                    sys.stdout.flush()
    except KeyboardInterrupt:
        return  # Ctrl-C ends a follow: exit 0
    finally:
        for team, count in bad.items():
            print(f"teamctl: skipped {count} unreadable line(s) in "
                  f"{w.store.describe_journal(team)} (or its "
                  "rotated files)", file=sys.stderr)


# -- transcript and attach -------------------------------------------------------------------
def member_session(w: Workspace, team: str, name: str
                    ) -> tuple[str | None, str | None, str | None]:
    """(where the session was kept aside, or None for a member's own; colour; a note or
    None) of a member of a team, of a member removed from it (the session it left: nothing
    more will come), or of a member of the team's latest archive."""
    config, archive = _journal_of(w, team)
    validate_member_name(name)
    member = roster.find(config, name) if config else None
    if archive is not None:
        note = f"team {team} was deleted; reading its archive {archive}"
        return archive, None, note
    if member is None:
        kept = _removed_session(w, team, config or {"name": team, "members": []}, name)
        return kept, None, (f"{name} was removed from team {team}; reading the session "
                            f"it left, in {kept}")
    return None, member.get("color"), None


def _show_transcript(team: str, name: str, lines: int | None, follow: bool) -> None:
    from teamctl import transcript as tr

    w = ws()
    kept, color, note = member_session(w, team, name)
    if note is not None:
        print(f"note: {note}", file=sys.stderr)
    if lines is not None and lines < 0:
        raise BadInput("-n takes a number of records >= 0")
    records = tr.history(w, team, name, kept)
    renderer = tr.Renderer(name, color)
    shown = records[-lines:] if lines else ([] if lines == 0 else records)
    for rec in shown:
        for line in tr.render(renderer, rec):
            print(line)
    if not records and not follow:
        print(f"{name} has no conversation yet", file=sys.stderr)
    if not follow or note is not None:
        return
    sys.stdout.flush()
    seen = sum(1 for r in records if r.get("type") != "turn")
    try:
        for rec in w.store.follow_session(team, name, skip=seen):
            for line in tr.render(renderer, rec):
                print(line)
            sys.stdout.flush()
    except KeyboardInterrupt:
        return  # Ctrl-C ends an attach: exit 0
    print(f"-- team {team} was deleted --", flush=True)


def transcript(team: TeamArg, name: NameArg,
               lines: Annotated[int | None, typer.Option(
                   "--lines", "-n", metavar="N", help="Only the last N records.")] = None
               ) -> None:
    """A member's conversation as a person reads it: its text, each tool call and its
    (shortened) result, messages in and out, compactions — across restarts. A removed
    member's is the session it left.

    \b
    Example:
      teamctl transcript shop alice -n 30
    """
    _show_transcript(team, name, lines, follow=False)


def attach(team: TeamArg, name: NameArg,
           lines: Annotated[int | None, typer.Option(
               "--lines", "-n", metavar="N", help="Start with the last N records.")] = None
           ) -> None:
    """Watch a member work, live: its transcript, then each new step as it happens (across
    restarts and compactions). Ctrl-C detaches; the member goes on.

    \b
    Example:
      teamctl attach shop alice -n 10
    """
    _show_transcript(team, name, lines, follow=True)
