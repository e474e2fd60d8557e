"""`teamd`: the supervisor's command line (`teamd run`)."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from teamd import __version__, crashpoints
from teamd.errors import TeamdError
from teamd.layout import Workspace


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="teamd",
        description="Supervise a team of Claude agents as real OS processes.",
    )
    parser.add_argument("--version", action="version", version=f"teamd {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run", help="run the supervisor in the foreground (what systemd starts)",
        description="Fork every member whose desired state is running, restart it by "
        "policy, and stop them on SIGTERM (members resume at the next start). One "
        "supervisor per root: a second one exits 2.")
    run.add_argument("--root", metavar="DIR",
                     help="workspace root (default: $TEAMD_ROOT, else the current directory)")
    run.add_argument("--store", metavar="URL",
                     help="where the records live: files, or a postgresql:// URL (default: "
                     "$TEAMD_STORE, else teamd.toml's store, else files); a password here "
                     "shows in `ps`: prefer PGPASSWORD or ~/.pgpass")
    run.add_argument("--host", metavar="NAME",
                     help="this machine's name among the hosts sharing a PostgreSQL store "
                     "(default: $TEAMD_HOST, else the hostname); one teamd per host name")
    run.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return parser


def store_option(url: str | None) -> str | None:
    """`--store URL`, checked (exit 2, one line, masked); a password in it draws one
    warning line (the command line shows in `ps`), once: not again after `take_key`
    re-executes teamd with the same arguments."""
    if url is None:
        return None
    from teamd import apikey
    from teamd.store import urls

    warning = urls.command_line_warning(urls.check(url))
    if warning and apikey.FD_ENV not in os.environ:  # not said again by the re-executed
        print(f"teamd: {warning}", file=sys.stderr)
    return url


def host_option(ws: Workspace, name: str | None) -> None:
    """`--host NAME`: this teamd's host, and its members' (TEAMD_HOST, which they
    inherit). Exit 2 for a name that cannot be one, or without a store that has hosts."""
    from teamd import hostname
    if name is None:
        return
    from teamd.placement import pin_for
    pin_for(ws, name, local_state=False)  # the same checks as `spawn --host`
    os.environ[hostname.ENV] = name


def take_key(ws: Workspace) -> None:
    """Hold the API key out of every environment block (re-executing `teamd` if it was in
    ours), then become non-dumpable: nothing running as our user reads our memory."""
    from teamd import apikey

    def key_file() -> str:  # read only when the environment has no key
        from teamd import settings

        return settings.load_file(ws).api_key_file

    apikey.take(key_file)
    from teamd.proc import set_dumpable  # after: a re-execution needs none of this

    set_dumpable(False)


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    # journald stamps each line itself; in a terminal the time is worth printing
    fmt = "%(levelname)s %(name)s: %(message)s"
    if "JOURNAL_STREAM" not in os.environ:
        fmt = "%(asctime)s " + fmt
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format=fmt)
    try:
        ws = Workspace.at(args.root, store_option(args.store))
        host_option(ws, args.host)
        take_key(ws)
        from teamd.supervisor import Supervisor

        crashpoints.identify("teamd")
        sys.exit(Supervisor(ws).run())
    except TeamdError as exc:
        print(f"teamd: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
