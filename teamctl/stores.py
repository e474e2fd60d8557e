"""`init` (the root's teamd.toml, and with `--store` its store and schema), `export` and
`import` (a team moved between stores as the files of section 2), `hosts` (the machines
sharing a PostgreSQL store): CONTRACT §9, §10, §15.
Registered on the app by teamctl.cli.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from teamctl import output
from teamctl.params import JsonOpt, TeamArg, store_option, ws
from teamd import settings
from teamd.files import Json

if TYPE_CHECKING:
    from teamd.actions.transfer import Progress

#: what `init --store` says of the [permissions], [hooks] and [prices] every host applies
SHARED = {"written": "[permissions], [hooks] and [prices] written into the store: every "
                     "host applies them",
          "kept": "[permissions], [hooks] and [prices]: the store's kept (another host's); "
                  "edit them here, then run this again to write them"}
#: a copy says how far it is on stderr each time a part of it passes this many more records
BIG = 10_000


def init(force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")
                          ] = False,
         store: Annotated[str | None, typer.Option(
             "--store", metavar="URL", help="Keep the records in this store (a postgresql:// "
             "URL, or files): written into teamd.toml without its password, its schema "
             "created; exit 0 when run again.", show_default=False)] = None,
         as_json: JsonOpt = False) -> None:
    """Write teamd.toml with every setting at its default (exit 2 if it exists, unless
    --force); with --store, name the store there (the rest of the file kept) and create
    its schema. With PostgreSQL, also write the file's [permissions], [hooks] and [prices]
    into the store, where every host reads them (run it again after editing them; a file
    made here from the defaults keeps the tables the store has).

    \b
    Example:
      teamctl init && $EDITOR teamd.toml
      PGPASSWORD=… teamctl init --store postgresql://teamd@db.example/teamd
    """
    url = store_option(store) or ws().store_url
    if url is None:
        ws().root.mkdir(parents=True, exist_ok=True)
        done: Json = {"settings": str(settings.write_defaults(ws(), force=force))}
    else:
        from teamd.store.setup import init_store

        done = init_store(ws(), url, force=force)
    if as_json:
        output.emit_json(done)
    elif url is None:
        print(f"wrote {done['settings']}")
    else:
        schema = f" (schema {done['schema']})" if done["schema"] else ""
        print(f"wrote {done['settings']}: store = {done['store']}{schema}")
        if done["shared"]:
            print(SHARED[done["shared"]])


def export(team: TeamArg,
           folder: Annotated[Path, typer.Argument(
               metavar="DIR", help="A files root to write the team into (made if missing).",
               show_default=False)],
           as_json: JsonOpt = False) -> None:
    """Write a team as the files of a teamd root (.teams/TEAM/, .tasks/TEAM/): its roster,
    member states, tasks, inboxes, requests, journal, sessions, transcripts and spend.
    A backup `jq` reads, and what `teamctl import` loads into another store. No lock
    files, no member logs. DIR must not hold the team already.

    \b
    Example:
      teamctl --store postgresql://teamd@db/teamd export shop /backup/shop
      jq -s length /backup/shop/.teams/shop/events.jsonl
    """
    from teamd.actions.transfer import export_team

    done = export_team(ws(), team, folder, _progress("export"))
    _report([done], as_json, many=False)


def import_cmd(folder: Annotated[Path, typer.Argument(
                   metavar="DIR", help="A files root (what `teamctl export` writes, or a "
                   "root teamd ran on).", show_default=False)],
               as_json: JsonOpt = False) -> None:
    """Load every team of a files root into this root's store, whole. A team the store
    has already is refused (exit 2, naming it) and then nothing is imported. A running
    teamd starts the imported members once their roster lands, last.

    \b
    Example:
      teamctl --store postgresql://teamd@db/teamd import /backup/shop
    """
    from teamd.actions.transfer import import_root

    _report(import_root(ws(), folder, _progress("import")), as_json, many=True)


def _progress(verb: str) -> Progress:
    """One line on stderr each time a part of the copy passes another BIG records."""
    shown: dict[tuple[str, str], int] = {}

    def tell(team: str, what: str, done: int) -> None:
        if done // BIG > shown.get((team, what), 0):
            shown[team, what] = done // BIG
            print(f"teamctl: {verb} {team}: {done} {what}", file=sys.stderr, flush=True)
    return tell


def _report(done: list[Json], as_json: bool, *, many: bool) -> None:
    if as_json:
        output.emit_json(done if many else done[0])
        return
    for d in done:
        print(f"copied team {d['team']} from {d['from']} to {d['to']}: {d['members']} "
              f"members, {d['tasks']} tasks, {d['messages']} messages waiting, "
              f"{d['requests']} requests, {d['session_records']} session records, "
              f"{d['transcripts']} transcripts, {d['events']} events")


def hosts(as_json: JsonOpt = False) -> None:
    """The hosts sharing this root's PostgreSQL store: alive or dead (a heartbeat younger
    than host_timeout), members placed on each, their room (max_members) and the leader's
    view of their lease. Dead hosts are listed too. Under the table, the members' working
    directories a host does not have (no member working in one is placed there).

    \b
    Example:
      teamctl --store postgresql://teamd@db/teamd hosts
      teamctl hosts --json | jq -r '.[] | select(.alive | not) | .name'
      teamctl hosts --json | jq -r '.[] | select(.cwd_missing != []) | .name'
    """
    from teamd.actions.hosting import host_list
    from teamd.workdirs import KEY

    found = host_list(ws())
    if as_json:
        output.emit_json(found)
        return
    if not found:
        print("no host has joined yet (start one with `teamd run --host NAME`)")
        return
    rows = [(h["name"], ("alive", "green") if h["alive"] else ("dead", "red"), h["placed"],
             h.get("max_members") or "-", h["load"], f"{h['age']:.1f}s ago",
             h.get("pid") or "-", h.get("lease"))
            for h in found]
    print(output.table(("HOST", "STATE", "MEMBERS", "MAX", "LOAD", "HEARTBEAT", "PID",
                        "LEASE"), rows))
    for h in found:
        if h[KEY]:
            print(f"{h['name']} has no {', '.join(map(output.safe, h[KEY]))} (a member "
                  "working there is not placed on it)")
