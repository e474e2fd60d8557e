"""Command line entry: `python -m teamd.scripted --scenario FILE.json` (or the name of a
scenario shipped in the package, `--scenario walkthrough`: the README's walk-through).

This module owns running the scripted API as its own process (for the offline demo and for
tests that need the server outside the test process): it loads the scenario, prints the URL
as the one line on stdout once listening, and serves until SIGTERM or SIGINT, then exits 0.
A bad scenario file is exit 2 with one line on stderr.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path

from teamd.scripted.scenario import Scenario
from teamd.scripted.server import ScriptedServer

log = logging.getLogger(__name__)

_STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}
#: the scenarios shipped in the package, by name (package data: found after `pip install`)
SHIPPED = Path(__file__).with_name("scenarios")
SHIPPED_NAMES = ", ".join(sorted(p.stem for p in SHIPPED.glob("*.json")))


def scenario_path(given: str) -> Path:
    """A scenario file as given, else the shipped scenario of that name."""
    path = Path(given)
    shipped = SHIPPED / f"{given}.json"
    return shipped if not path.exists() and shipped.is_file() else path


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m teamd.scripted",
        description="Serve a scripted Anthropic Messages API driven by scenario rules.",
    )
    parser.add_argument("--scenario", required=True,
                        help=f"scenario JSON file, or a shipped one by name: {SHIPPED_NAMES}")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--log", default=None, help="append one JSON line per request here")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging to stderr")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    try:
        path = scenario_path(args.scenario)
        scenario = Scenario.load(path)
    except ValueError as exc:
        shipped = "" if path.exists() else f" (nor a shipped one: {SHIPPED_NAMES})"
        print(f"teamd.scripted: {exc}{shipped}", file=sys.stderr)
        return 2

    # Block the stop signals before any thread exists so every thread inherits the mask
    # and the signal can only be taken by sigwait below: no handler racing a wait, and no
    # signal landing in the HTTP thread.
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    server = ScriptedServer(scenario, host=args.host, port=args.port, log_path=args.log)
    try:
        server.start()
    except OSError as exc:
        print(f"teamd.scripted: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    try:
        print(server.url, flush=True)
        received = signal.sigwait(_STOP_SIGNALS)
        log.info("got %s, stopping", signal.Signals(received).name)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
