"""Safe on a shared machine (CONTRACT §16): the token and its cookie, 401 without it, 403
for a foreign Host or Origin and for a POST without the CSRF token (nothing changed),
`--open`'s one-time code, loopback unless `--insecure`, the API key in no response, one
line on standard output, Ctrl-C exit 0, and without the server stack one line and exit 1.
Plain HTTP from the test (http.client sets any Host); the real `teamctl web` serves."""

from __future__ import annotations

import http.client
import json
import re
import socket
import subprocess
from pathlib import Path

from teamd import actions
from teamd.layout import Workspace
from teamd.scripted import ScriptedServer
from tests.harness import TEAM, make_team, running_teamd, wait_status, wait_until
from tests.helpers_proc import TEAMCTL, clean_env, snapshot
from tests.web.webkit import Web, running_web

KEY = "fake-api03-WEBVIEW-SECRET-7d41c9"


def ask(web: Web, path: str, *, method: str = "GET", cookie: bool = True,
        host: str | None = None, headers: dict[str, str] | None = None,
        body: object = None) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", web.port, timeout=20)
    sent = {"Host": host or f"127.0.0.1:{web.port}", **(headers or {})}
    if cookie:
        sent["Cookie"] = f"teamd_web_{web.port}={web.token}"
    data = None if body is None else json.dumps(body).encode()
    if data is not None:
        sent["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=sent)
    reply = conn.getresponse()
    out = (reply.status, {k.lower(): v for k, v in reply.getheaders()}, reply.read())
    conn.close()
    return out


def csrf_of(web: Web) -> str:
    found = re.search(rb'name="csrf-token" content="([^"]+)"', ask(web, "/")[2])
    assert found
    return found.group(1).decode()


def test_token_cookie_host_origin_and_csrf(ws: Workspace, web: Web) -> None:
    make_team(ws, None, "alice")
    for path in ("/", f"/t/{TEAM}", "/static/app.js", "/api/teams", "/api/live"):
        assert ask(web, path, cookie=False)[0] == 401, path
    assert ask(web, "/?token=not-it", cookie=False)[0] == 401
    status, headers, _ = ask(web, f"/t/{TEAM}?token={web.token}&x=1", cookie=False)
    assert (status, headers["location"]) == (303, f"/t/{TEAM}?x=1")
    cookie = headers["set-cookie"]
    assert cookie.startswith(f"teamd_web_{web.port}={web.token};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert ask(web, "/api/teams")[0] == 200
    assert ask(web, "/api/teams", host=f"localhost:{web.port}")[0] == 200
    assert ask(web, "/api/teams", host=f"evil.example:{web.port}")[0] == 403  # rebinding
    assert ask(web, "/api/teams", host="127.0.0.1:1")[0] == 403
    assert ask(web, "/api/teams", headers={"Origin": "http://evil.example"})[0] == 403

    before = snapshot(ws.root)
    act = {"action": "budget", "usd": 9}
    where = f"/api/t/{TEAM}/act"
    assert ask(web, where, method="POST", body=act)[0] == 403  # no CSRF token
    assert ask(web, where, method="POST", body=act, headers={"X-CSRF-Token": "x"})[0] == 403
    good = {"X-CSRF-Token": csrf_of(web)}
    assert ask(web, where, method="POST", body=act, headers={
        **good, "Origin": "http://evil.example"})[0] == 403
    assert ask(web, where, method="POST", body=act, cookie=False, headers=good)[0] == 401
    assert snapshot(ws.root) == before  # every refusal changed nothing
    refused = ask(web, where, method="POST", headers=good,
                  body={"action": "send", "to": "nobody", "content": "hi"})
    assert refused[0] == 400 and "unknown recipient" in json.loads(refused[2])["error"]
    assert snapshot(ws.root) == before
    assert ask(web, where, method="POST", body=act, headers=good)[0] == 200  # the same, let in
    assert snapshot(ws.root) != before


def test_the_api_key_is_in_no_response(ws: Workspace, server: ScriptedServer, workdir: Path
                                       ) -> None:
    make_team(ws, workdir, "alice")
    env = {**clean_env(), "ANTHROPIC_API_KEY": KEY}
    with running_teamd(ws, server.url, ANTHROPIC_API_KEY=KEY) as daemon, \
            running_web(ws, env=env) as web:
        wait_status(ws, "alice", "idle")
        actions.send(ws, TEAM, "alice", "hello")
        wait_until(lambda: len(server.requests) >= 2, 20, "alice to answer")
        paths = ["/", f"/t/{TEAM}", f"/t/{TEAM}/m/alice", "/api/teams", f"/api/t/{TEAM}",
                 f"/api/t/{TEAM}/m/alice", f"/api/t/{TEAM}?event=model_call",
                 "/static/app.js", "/static/style.css"]
        for path in paths:
            status, headers, body = ask(web, path)
            assert status == 200, path
            assert KEY.encode() not in body and KEY not in str(headers), path
        assert KEY not in daemon.output()
    assert KEY not in web.output()


def test_stdout_is_one_line_and_ctrl_c_exits_0(ws: Workspace, web: Web) -> None:
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=[A-Za-z0-9_-]{40,}\n", web.line)
    assert ask(web, "/api/teams")[0] == 200
    stream = http.client.HTTPConnection("127.0.0.1", web.port, timeout=20)
    stream.request("GET", "/api/live", headers={
        "Host": f"127.0.0.1:{web.port}", "Cookie": f"teamd_web_{web.port}={web.token}"})
    opened = stream.getresponse()
    assert opened.status == 200 and opened.getheader("content-type", "").startswith(
        "text/event-stream")
    assert opened.readline() == b"retry: 1000\n"  # a page's event stream, still open
    assert web.stop() == 0
    stream.close()
    assert web.extra_stdout == ""  # the URL was the only line
    assert web.token not in web.output()  # the log never carries it


def test_open_hands_the_browser_a_one_time_code(ws: Workspace, tmp_path: Path) -> None:
    opened = tmp_path / "opened.txt"
    env = {**clean_env(), "BROWSER": f"/bin/sh -c 'echo \"$0\" > {opened}' %s"}
    with running_web(ws, "--open", env=env) as web:
        url = wait_until(lambda: opened.exists() and opened.read_text().strip(), 20,
                         "the browser to be opened")
        assert web.token not in url  # a command line shows in `ps`
        code = url.split("?code=", 1)[1]
        status, headers, _ = ask(web, f"/?code={code}", cookie=False)
        assert status == 303 and headers["set-cookie"].startswith(
            f"teamd_web_{web.port}={web.token};")
        assert ask(web, f"/?code={code}", cookie=False)[0] == 401  # one time only


def test_loopback_unless_insecure(ws: Workspace) -> None:
    refused = subprocess.run([str(TEAMCTL), "--root", str(ws.root), "web", "--bind",
                              "0.0.0.0"], capture_output=True, text=True, env=clean_env(),
                             timeout=30, check=False)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and "--insecure" in refused.stderr
    with running_web(ws, "--bind", "0.0.0.0", "--insecure") as web:
        assert web.url.startswith(f"http://{socket.gethostname()}:")
        assert ask(web, "/api/teams", host=f"{socket.gethostname()}:{web.port}")[0] == 200
        assert ask(web, "/api/teams", host=f"evil.example:{web.port}")[0] == 403
    assert "token travels in clear" in web.output()


def test_without_the_server_stack(ws: Workspace, tmp_path: Path) -> None:
    blocked = tmp_path / "blocked"
    (blocked / "starlette").mkdir(parents=True)
    (blocked / "starlette" / "__init__.py").write_text("raise ImportError('not installed')\n")
    done = subprocess.run([str(TEAMCTL), "--root", str(ws.root), "web"], capture_output=True,
                          text=True, env={**clean_env(), "PYTHONPATH": str(blocked)},
                          timeout=30, check=False)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.count("\n") == 1 and "pip install 'teamd[web]'" in done.stderr
