"""The web view's routes (Starlette), behind `guard.Guard`:

- pages `/`, `/t/TEAM`, `/t/TEAM/m/NAME`: one HTML shell whose script renders the JSON;
- `/static/…`: its CSS and JavaScript, package data read once (no outside asset);
- `/api/teams`, `/api/t/TEAM`, `/api/t/TEAM/m/NAME`: the documents of `documents`;
- `/api/live`: server-sent events, one `data:` line of changed team names per change;
- `POST /api/t/TEAM/act`: an action of `acts`, its result or its error as JSON.

Server-sent events are written by hand on Starlette's StreamingResponse: three header
lines and `data:` frames need no extra dependency. The library calls block (files, locks,
a 0.1 s CPU sample), so each runs in Starlette's thread pool.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from teamctl.web import acts, documents
from teamctl.web.guard import Guard, Keys
from teamctl.web.live import Hub
from teamd.errors import BadInput, TeamdError
from teamd.layout import Workspace

SECURITY_HEADERS = {
    "content-security-policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'; form-action 'self'",
    "x-content-type-options": "nosniff", "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}
TYPES = {"css": "text/css; charset=utf-8", "js": "text/javascript; charset=utf-8"}


def _assets() -> dict[str, bytes]:
    folder = resources.files("teamctl.web") / "static"
    return {f.name: f.read_bytes() for f in folder.iterdir() if f.is_file()}


def _failure(exc: Exception, status_for_bad: int) -> JSONResponse:
    if isinstance(exc, BadInput):
        return JSONResponse({"error": str(exc)}, status_for_bad, headers=SECURITY_HEADERS)
    if isinstance(exc, TeamdError):
        return JSONResponse({"error": str(exc)}, 409, headers=SECURITY_HEADERS)
    where = f"{exc.filename}: " if isinstance(exc, OSError) and exc.filename else ""
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return JSONResponse({"error": f"{where}{text}"}, 500, headers=SECURITY_HEADERS)


async def _json(build: Callable[[], Any], status_for_bad: int = 404) -> Response:
    try:
        doc = await run_in_threadpool(build)
    except (TeamdError, OSError) as exc:
        return _failure(exc, status_for_bad)
    return JSONResponse(doc, headers=SECURITY_HEADERS)


def build(ws: Workspace, keys: Keys) -> Guard:
    """The whole application for root `ws`, guarded by `keys`."""
    assets = _assets()
    shell = assets.pop("page.html").replace(b"{{csrf}}", keys.csrf.encode())
    hub = Hub(ws)

    async def page(_: Request) -> Response:
        return Response(shell, headers={**SECURITY_HEADERS,
                                        "content-type": "text/html; charset=utf-8"})

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in assets:
            return Response("404: no such asset\n", 404, media_type="text/plain")
        kind = TYPES.get(name.rsplit(".", 1)[-1], "application/octet-stream")
        return Response(assets[name], headers={**SECURITY_HEADERS, "content-type": kind})

    async def teams(_: Request) -> Response:
        return await _json(lambda: documents.teams_doc(ws))

    async def team(request: Request) -> Response:
        p, q = request.path_params, request.query_params
        return await _json(lambda: documents.team_doc(
            ws, p["team"], q.get("member") or None, q.get("event") or None))

    async def member(request: Request) -> Response:
        p = request.path_params
        return await _json(lambda: documents.member_doc(ws, p["team"], p["name"]))

    async def act(request: Request) -> Response:
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError):
            return _failure(BadInput("the body must be JSON"), 400)
        team_name = request.path_params["team"]
        return await _json(lambda: {"ok": True,
                                    "result": acts.run(ws, team_name, body)}, 400)

    async def live(request: Request) -> Response:
        queue = hub.subscribe()

        async def frames() -> AsyncIterator[str]:
            try:
                yield "retry: 1000\n: live\n\n"
                while True:
                    changed = await queue.get()
                    if changed is None:  # the feed stopped: the page reconnects, anew
                        return
                    yield f"data: {json.dumps(sorted(changed))}\n\n"
            finally:
                hub.unsubscribe(queue)

        return StreamingResponse(frames(), media_type="text/event-stream",
                                 headers={**SECURITY_HEADERS, "x-accel-buffering": "no"})

    app = Starlette(routes=[
        Route("/", page), Route("/t/{team}", page), Route("/t/{team}/m/{name}", page),
        Route("/static/{name}", asset), Route("/api/teams", teams),
        Route("/api/t/{team}", team), Route("/api/t/{team}/m/{name}", member),
        Route("/api/live", live), Route("/api/t/{team}/act", act, methods=["POST"]),
    ])
    return Guard(app, keys)
