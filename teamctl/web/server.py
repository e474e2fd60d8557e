"""Serving the web view: the socket bound, the one line of standard output (the URL with
this run's token), `--open`'s one-time code, uvicorn run until Ctrl-C.

Its log goes to standard error and never holds the token: uvicorn's access log, which
would print `?token=…`, is off.
"""

from __future__ import annotations

import logging
import socket
import sys

import uvicorn

from teamctl.web import app
from teamctl.web.guard import Keys, loopback
from teamd.layout import Workspace

log = logging.getLogger("teamctl.web")


def _hosts(bind: str, port: int) -> set[str]:
    """What a browser may put in `Host` for this server: the bound address (and, bound to
    loopback, `localhost`; bound to every address, loopback and this machine's names)."""
    names = {bind}
    if loopback(bind) or bind in ("0.0.0.0", "::"):
        names |= {"127.0.0.1", "localhost", "[::1]"}
    if bind in ("0.0.0.0", "::"):
        names |= {socket.gethostname(), socket.getfqdn()}
    names = {f"[{n}]" if ":" in n and not n.startswith("[") else n for n in names}
    return {f"{n.lower()}:{port}" for n in names}


def serve(ws: Workspace, port: int, bind: str, open_browser: bool) -> None:
    """Serve until Ctrl-C (then return: the command exits 0)."""
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((bind, port))
    sock.listen(128)
    sock.set_inheritable(False)
    port = sock.getsockname()[1]
    keys = Keys(hosts=_hosts(bind, port), port=port)
    shown = f"[{bind}]" if family == socket.AF_INET6 else bind
    if bind in ("0.0.0.0", "::"):
        shown = socket.gethostname()
    base = f"http://{shown}:{port}/"
    print(f"{base}?token={keys.token}", flush=True)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s teamctl web: %(message)s", datefmt="%H:%M:%S")
    log.info("serving %s on %s (Ctrl-C stops)", ws.root, base)
    if open_browser:
        import webbrowser

        if not webbrowser.open(f"{base}?code={keys.one_time_code()}"):
            log.warning("no browser to open here: open the URL printed above")
    config = uvicorn.Config(app.build(ws, keys), log_level="warning", access_log=False,
                            timeout_graceful_shutdown=1, lifespan="off")
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass  # uvicorn hands the Ctrl-C on once it has stopped
    finally:
        sock.close()
    log.info("stopped")
