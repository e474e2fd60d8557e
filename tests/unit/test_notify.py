"""teamd.notify against a real AF_UNIX datagram socket standing in for systemd's."""

from __future__ import annotations

import logging
import os
import socket
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from teamd.notify import Notifier, format_status, scrub_child_env, watchdog_interval

RECV_DEADLINE = 5.0  # seconds; a datagram sent on the same host arrives at once


def _recv(sock: socket.socket) -> str:
    data, _ = sock.recvfrom(65536)
    return data.decode("utf-8")


def _assert_nothing_waiting(sock: socket.socket) -> None:
    sock.setblocking(False)
    try:
        with pytest.raises(BlockingIOError):
            sock.recvfrom(65536)
    finally:
        sock.settimeout(RECV_DEADLINE)


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    # AF_UNIX paths are limited to 108 bytes; pytest's tmp_path can be longer than that.
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tdn-", dir="/tmp") as d:
        yield Path(d)


@pytest.fixture
def path_listener(short_tmp: Path) -> Iterator[tuple[socket.socket, str]]:
    path = str(short_tmp / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(RECV_DEADLINE)
    try:
        yield sock, path
    finally:
        sock.close()


@pytest.fixture
def abstract_listener() -> Iterator[tuple[socket.socket, str]]:
    if not sys.platform.startswith("linux"):
        pytest.skip("the abstract socket namespace is Linux-only")
    name = f"teamd-test-{os.getpid()}-{uuid.uuid4().hex}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    sock.settimeout(RECV_DEADLINE)
    try:
        yield sock, "@" + name
    finally:
        sock.close()


def test_path_socket_receives_exact_datagrams(path_listener: tuple[socket.socket, str]) -> None:
    sock, path = path_listener
    n = Notifier.from_env({"NOTIFY_SOCKET": path})
    assert n.enabled
    try:
        assert n.ready() is True
        assert _recv(sock) == "READY=1"
        assert n.status("2 members: 1 active, 1 idle")
        assert _recv(sock) == "STATUS=2 members: 1 active, 1 idle"
        assert n.watchdog()
        assert _recv(sock) == "WATCHDOG=1"
        assert n.stopping()
        assert _recv(sock) == "STOPPING=1"
        assert n.ready(status="0 members")
        assert _recv(sock) == "READY=1\nSTATUS=0 members"
        assert n.send(READY=True, STATUS="x", ERRNO=0)
        assert _recv(sock) == "READY=1\nSTATUS=x\nERRNO=0"
        assert n.send_raw("READY=1\nSTATUS=raw text")
        assert _recv(sock) == "READY=1\nSTATUS=raw text"
        assert n.reloading()
        fields = dict(line.split("=", 1) for line in _recv(sock).split("\n"))
        assert fields["RELOADING"] == "1"
        assert int(fields["MONOTONIC_USEC"]) > 0
        _assert_nothing_waiting(sock)
    finally:
        n.close()


def test_abstract_socket(abstract_listener: tuple[socket.socket, str]) -> None:
    sock, name = abstract_listener
    with Notifier.from_env({"NOTIFY_SOCKET": name}) as n:
        assert n.enabled
        assert n.ready()
        assert _recv(sock) == "READY=1"
        assert n.watchdog()
        assert _recv(sock) == "WATCHDOG=1"


def test_status_newlines_cannot_inject_fields(path_listener: tuple[socket.socket, str]) -> None:
    sock, path = path_listener
    with Notifier.from_env({"NOTIFY_SOCKET": path}) as n:
        assert n.status("line one\nREADY=1\r\nthree")
        assert _recv(sock) == "STATUS=line one READY=1 three"


def test_bad_field_name_is_a_programming_error(path_listener: tuple[socket.socket, str]) -> None:
    _, path = path_listener
    with Notifier.from_env({"NOTIFY_SOCKET": path}) as n, pytest.raises(ValueError):
        n.send(ready=1)


def test_disabled_notifier_is_a_no_op() -> None:
    n = Notifier.from_env({})
    assert not n.enabled
    assert n.ready() is False
    assert n.status("x") is False
    assert n.watchdog() is False
    assert n.stopping() is False
    assert n.send_raw("READY=1") is False
    assert n.watchdog_interval() is None
    n.close()
    n.close()
    assert not Notifier.from_env({"NOTIFY_SOCKET": ""}).enabled


def test_unusable_address_disables(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="teamd.notify"):
        n = Notifier.from_env({"NOTIFY_SOCKET": "relative/path.sock"})
    assert not n.enabled
    assert n.ready() is False
    assert "NOTIFY_SOCKET" in caplog.text


def test_vanished_socket_does_not_raise_and_warns_once(
    short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = str(short_tmp / "gone.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(path)
    listener.settimeout(RECV_DEADLINE)
    n = Notifier.from_env({"NOTIFY_SOCKET": path})
    assert n.ready()
    assert _recv(listener) == "READY=1"
    listener.close()
    os.unlink(path)
    with caplog.at_level(logging.DEBUG, logger="teamd.notify"):
        assert n.watchdog() is False
        assert n.status("still alive") is False
        assert n.stopping() is False
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert path in warnings[0].getMessage()

    # systemd comes back (re-creates its socket): the same notifier reaches it again.
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(path)
    listener.settimeout(RECV_DEADLINE)
    try:
        assert n.watchdog()
        assert _recv(listener) == "WATCHDOG=1"
    finally:
        listener.close()
        n.close()


def test_never_existing_socket_does_not_raise(short_tmp: Path) -> None:
    n = Notifier.from_env({"NOTIFY_SOCKET": str(short_tmp / "never.sock")})
    assert n.enabled
    assert n.ready() is False
    assert n.send_raw("STOPPING=1") is False
    n.close()
    # An abstract name nobody listens on fails the same quiet way.
    n = Notifier.from_env({"NOTIFY_SOCKET": f"@teamd-nobody-{uuid.uuid4().hex}"})
    assert n.watchdog() is False
    n.close()


def test_forked_child_copy_stays_silent(path_listener: tuple[socket.socket, str]) -> None:
    sock, path = path_listener
    n = Notifier.from_env({"NOTIFY_SOCKET": path})
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            sent = n.ready()
            os.write(w, b"1" if sent else b"0")
        finally:
            os._exit(0)
    os.close(w)
    try:
        assert os.read(r, 1) == b"0"
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    _assert_nothing_waiting(sock)
    assert n.ready()
    assert _recv(sock) == "READY=1"
    n.close()


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"WATCHDOG_USEC": "60000000"}, 30.0),
        ({"WATCHDOG_USEC": "60000000", "WATCHDOG_PID": "{me}"}, 30.0),
        ({"WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "{me}"}, 0.5),
        ({"WATCHDOG_USEC": "60000000", "WATCHDOG_PID": "{other}"}, None),
        ({"WATCHDOG_USEC": "60000000", "WATCHDOG_PID": "junk"}, None),
        ({"WATCHDOG_USEC": "0"}, None),
        ({"WATCHDOG_USEC": "soon"}, None),
        ({"WATCHDOG_PID": "{me}"}, None),
        ({}, None),
    ],
)
def test_watchdog_interval(env: dict[str, str], expected: float | None) -> None:
    me = os.getpid()
    resolved = {k: v.format(me=me, other=me + 1) for k, v in env.items()}
    assert watchdog_interval(resolved) == expected
    n = Notifier.from_env({"NOTIFY_SOCKET": "/run/user/0/systemd/notify", **resolved})
    assert n.watchdog_interval() == expected
    # Without a socket there is nobody to ping.
    assert Notifier.from_env(resolved).watchdog_interval() is None


def test_watchdog_interval_explicit_pid() -> None:
    env = {"WATCHDOG_USEC": "20000000", "WATCHDOG_PID": "4242"}
    assert watchdog_interval(env, pid=4242) == 10.0
    assert watchdog_interval(env, pid=4243) is None


def test_scrub_child_env() -> None:
    env = {
        "NOTIFY_SOCKET": "/run/systemd/notify",
        "WATCHDOG_USEC": "60000000",
        "WATCHDOG_PID": "1",
        "PATH": "/usr/bin",
        "ANTHROPIC_API_KEY": "k",
    }
    scrub_child_env(env)
    assert env == {"PATH": "/usr/bin", "ANTHROPIC_API_KEY": "k"}
    scrub_child_env(env)  # idempotent: missing keys are fine
    assert env == {"PATH": "/usr/bin", "ANTHROPIC_API_KEY": "k"}


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        ({}, "0 members"),
        ({"idle": 0, "active": 0}, "0 members"),
        ({"idle": 1}, "1 member: 1 idle"),
        ({"idle": 2, "active": 1}, "3 members: 1 active, 2 idle"),
        (
            {
                "failed": 1,
                "backoff": 1,
                "shutdown": 1,
                "stopping": 1,
                "sleeping": 1,
                "idle": 1,
                "active": 1,
                "starting": 1,
                "pending": 1,
            },
            "9 members: 1 pending, 1 starting, 1 active, 1 idle, 1 sleeping, 1 stopping,"
            " 1 shutdown, 1 backoff, 1 failed",
        ),
        ({"pending": 0, "sleeping": 4}, "4 members: 4 sleeping"),
        ({"zombie": 1, "idle": 1}, "2 members: 1 idle, 1 zombie"),
    ],
)
def test_format_status(counts: dict[str, int], expected: str) -> None:
    assert format_status(counts) == expected
