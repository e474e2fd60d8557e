"""`teamctl web`, the command: its options and help. The server stack (the `web` extra)
is imported only when it runs, so no other command pays for it."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from teamctl.params import ws
from teamd.errors import BadInput


def web(port: Annotated[int, typer.Option(
            "--port", metavar="N", help="The port (0: a free one).")] = 0,
        bind: Annotated[str, typer.Option(
            "--bind", metavar="ADDR", help="The address to listen on. Anything but "
            "loopback needs --insecure: the token would travel in clear.")] = "127.0.0.1",
        open_browser: Annotated[bool, typer.Option(
            "--open", help="Open a browser on it (with a one-time code, not the token).")
                                ] = False,
        insecure: Annotated[bool, typer.Option(
            "--insecure", help="Allow a --bind other than loopback.")] = False) -> None:
    """Serve a live web view of every team of the root until Ctrl-C: the roster, the board,
    pending requests, the journal, spend over time, each member's conversation; and the
    person's actions (send, approve/reject, tasks, shutdown/stop/restart/remove, budget).

    Prints one line: the URL, with a fresh random token that sets a cookie (anyone with
    the URL can act as you: keep it private). Its log goes to standard error. Pages:
    /, /t/TEAM, /t/TEAM/m/NAME. Needs the extra: pip install 'teamd[web]'.

    \b
    Example:
      teamctl web --port 8080 --open
    """
    from teamctl.web.guard import loopback

    if not 0 <= port <= 65535:
        raise BadInput(f"--port {port}: a port is 0 to 65535")
    if not loopback(bind) and not insecure:
        raise BadInput(f"--bind {bind} is not loopback: add --insecure (the token would "
                       "travel in clear over the network)")
    w = ws()
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        print("teamctl: error: the web view needs its server stack: pip install "
              "'teamd[web]'", file=sys.stderr)
        raise typer.Exit(1) from None
    if not loopback(bind):
        print(f"teamctl: warning: serving on {bind} over plain HTTP: the token travels in "
              "clear", file=sys.stderr)
    from teamctl.web import server

    server.serve(w, port, bind, open_browser)
