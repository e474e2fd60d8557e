"""The systemd notify protocol, spoken straight to ``$NOTIFY_SOCKET``.

This module owns everything ``teamd run`` says to its service manager: ``READY=1`` after the
first reconcile, ``STATUS=`` lines, ``WATCHDOG=1`` pings, ``STOPPING=1`` and ``RELOADING=1``
(see ``sd_notify(3)``). It uses the standard library's ``socket`` only: no libsystemd binding,
no extra package. It also owns the rules around the protocol that the supervisor must keep:

- when ``NOTIFY_SOCKET`` is unset (a terminal, a test, a container without systemd) every
  call is a no-op;
- a failed send never raises: the supervisor must outlive a restarted or vanished systemd or
  journald, so a failure is logged once as a warning and then only at debug level;
- teammates never speak for the supervisor: :func:`scrub_child_env` removes the protocol's
  variables from each member process's environment, and a :class:`Notifier` inherited across
  a ``fork()`` stays silent in the member's process;
- :func:`format_status` renders the roster's status counts for ``STATUS=``.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
from collections.abc import Mapping, MutableMapping

from teamd import roster

logger = logging.getLogger(__name__)

#: The environment variables of the protocol; a forked teammate must not see them.
NOTIFY_ENV_KEYS: tuple[str, ...] = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")

#: Member statuses in the contract's table order (CONTRACT.md section 4).
STATUS_ORDER: tuple[str, ...] = roster.STATUSES

# sd_notify field names are upper-case identifiers ("READY", "STATUS", "MONOTONIC_USEC").
_FIELD_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")

# A send to systemd's socket only blocks if its receive queue is full; never let that stall
# the supervisor's loop for long.
_SEND_TIMEOUT = 2.0


def _socket_address(value: str) -> bytes | None:
    """Turn a ``NOTIFY_SOCKET`` value into an ``AF_UNIX`` address, or None if unusable.

    Like ``sd_notify(3)`` we accept an absolute path, or ``@name`` for a socket in the
    abstract namespace: there the name begins with a NUL byte instead of the '@' (which is
    only how the abstract namespace is spelled in text, as in ``ss -x``). Anything else
    (a relative path, the ``vsock:`` addresses of systemd 254+) is not for us.
    """
    if value.startswith("/"):
        return os.fsencode(value)
    if value.startswith("@") and len(value) > 1:
        return b"\0" + os.fsencode(value[1:])
    return None


def watchdog_interval(
    environ: Mapping[str, str] | None = None, pid: int | None = None
) -> float | None:
    """Seconds between ``WATCHDOG=1`` pings, or None when no watchdog is asked of ``pid``.

    systemd passes ``WATCHDOG_USEC`` (the unit's ``WatchdogSec=``) and, to say whom it is
    meant for, ``WATCHDOG_PID``; a process whose pid is not that one (a member's process
    that kept the environment) must not ping. We ping at half the period, as ``sd_watchdog_enabled``
    recommends, so one late loop iteration does not get the supervisor killed.
    """
    env = os.environ if environ is None else environ
    me = os.getpid() if pid is None else pid
    raw_usec = env.get("WATCHDOG_USEC", "").strip()
    if not raw_usec:
        return None
    try:
        usec = int(raw_usec)
    except ValueError:
        logger.warning("ignoring malformed WATCHDOG_USEC=%r", raw_usec)
        return None
    if usec <= 0:
        return None
    raw_pid = env.get("WATCHDOG_PID", "").strip()
    if raw_pid:
        try:
            target = int(raw_pid)
        except ValueError:
            logger.warning("ignoring malformed WATCHDOG_PID=%r", raw_pid)
            return None
        if target != me:
            return None
    return usec / 2 / 1_000_000


def scrub_child_env(environ: MutableMapping[str, str]) -> None:
    """Remove the notify protocol's variables, so a forked teammate never speaks for us.

    With ``NotifyAccess=main`` systemd would drop a member process's datagrams anyway, but
    one that pinged the watchdog or sent ``READY=1`` under another setting would mask a hung
    supervisor; and the variables would leak into every ``bash`` the teammate runs.
    """
    for key in NOTIFY_ENV_KEYS:
        environ.pop(key, None)


def format_status(counts: Mapping[str, int]) -> str:
    """One line for ``STATUS=``: ``"3 members: 1 active, 2 idle"``.

    Statuses come in the contract's table order, zero counts are left out, and a status
    this module does not know (a newer roster) is still shown, after the known ones.
    """
    shown = {status: n for status, n in counts.items() if n > 0}
    total = sum(shown.values())
    head = f"{total} member" if total == 1 else f"{total} members"
    if not shown:
        return head
    order = [s for s in STATUS_ORDER if s in shown]
    order += sorted(s for s in shown if s not in STATUS_ORDER)
    return head + ": " + ", ".join(f"{shown[s]} {s}" for s in order)


def _one_line(value: str) -> str:
    # A newline inside a value would start a new field (a STATUS= text could inject
    # "READY=1"): fold every line break into a space.
    return " ".join(value.splitlines())


class Notifier:
    """A sender of notify datagrams to one socket; disabled (a no-op) without one.

    Build it with :meth:`from_env`. The socket is created on the first send
    (``SOCK_DGRAM | SOCK_CLOEXEC``, unconnected: every datagram is addressed, so a
    restarted systemd that re-creates its socket is reached again without reconnecting).
    The object remembers the pid that made it; after a ``fork()`` a member process's copy
    sends nothing. Methods are safe to call from several threads.
    """

    def __init__(
        self,
        socket_path: str | None,
        *,
        watchdog_usec: str | None = None,
        watchdog_pid: str | None = None,
    ) -> None:
        self._socket_path = socket_path
        self._address = _socket_address(socket_path) if socket_path else None
        if socket_path and self._address is None:
            logger.warning(
                "NOTIFY_SOCKET=%r is not a path or @abstract name; ignoring it", socket_path
            )
        self._watchdog_env: dict[str, str] = {}
        if watchdog_usec is not None:
            self._watchdog_env["WATCHDOG_USEC"] = watchdog_usec
        if watchdog_pid is not None:
            self._watchdog_env["WATCHDOG_PID"] = watchdog_pid
        self._owner_pid = os.getpid()
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._warned = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Notifier:
        """A notifier for ``NOTIFY_SOCKET`` and ``WATCHDOG_*`` in ``environ`` (os.environ)."""
        env = os.environ if environ is None else environ
        return cls(
            env.get("NOTIFY_SOCKET") or None,
            watchdog_usec=env.get("WATCHDOG_USEC"),
            watchdog_pid=env.get("WATCHDOG_PID"),
        )

    def __repr__(self) -> str:
        return f"Notifier({self._socket_path!r}, enabled={self.enabled})"

    @property
    def enabled(self) -> bool:
        """True when there is a socket to talk to (whether or not it is still there)."""
        return self._address is not None

    def watchdog_interval(self) -> float | None:
        """Seconds between :meth:`watchdog` calls, or None when no watchdog is enabled."""
        if not self.enabled:
            return None
        return watchdog_interval(self._watchdog_env)

    # -- the messages teamd sends ------------------------------------------------------

    def ready(self, status: str | None = None) -> bool:
        """``READY=1``: start-up is complete (after the first reconcile)."""
        if status is None:
            return self.send(READY=1)
        return self.send(READY=1, STATUS=status)

    def status(self, text: str) -> bool:
        """``STATUS=text``: the one line ``systemctl status`` shows."""
        return self.send(STATUS=text)

    def stopping(self) -> bool:
        """``STOPPING=1``: a graceful stop has begun."""
        return self.send(STOPPING=1)

    def reloading(self) -> bool:
        """``RELOADING=1`` on SIGHUP; send :meth:`ready` again once teamd.toml is re-read.

        ``MONOTONIC_USEC`` goes with it, as systemd 253+ wants for reload tracking; older
        managers ignore the field.
        """
        return self.send(RELOADING=1, MONOTONIC_USEC=time.monotonic_ns() // 1000)

    def watchdog(self) -> bool:
        """``WATCHDOG=1``: the supervisor's loop is alive."""
        return self.send(WATCHDOG=1)

    # -- the protocol --------------------------------------------------------------------

    def send(self, **fields: str | int | bool) -> bool:
        """Send ``KEY=value`` fields as one datagram, one per line, in the given order.

        Booleans become ``1``/``0``, line breaks inside a value become spaces. Returns True
        when the datagram was sent, False when disabled or on failure (which is logged).
        A malformed field name is a programming error and raises ValueError.
        """
        lines = []
        for key, value in fields.items():
            if not _FIELD_NAME.match(key):
                raise ValueError(f"not a notify field name: {key!r}")
            if isinstance(value, bool):
                value = int(value)
            lines.append(f"{key}={_one_line(str(value))}")
        if not lines:
            return False
        return self.send_raw("\n".join(lines))

    def send_raw(self, message: str) -> bool:
        """Send ``message`` (e.g. ``"READY=1\\nSTATUS=…"``) as it is, as one datagram.

        Returns True when sent; False when disabled, in a member's process, or on failure.
        Never raises an OSError: the first failure is logged as a warning, later ones at
        debug level, so a gone systemd neither kills nor floods the supervisor.
        """
        address = self._address
        if address is None or not message:
            return False
        if os.getpid() != self._owner_pid:
            # An inherited copy after fork(): only the supervisor speaks for the unit.
            return False
        data = message.encode("utf-8")
        with self._lock:
            try:
                if self._sock is None:
                    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
                    sock.settimeout(_SEND_TIMEOUT)
                    self._sock = sock
                self._sock.sendto(data, address)
            except OSError as exc:
                self._report_failure(exc)
                # Start from a fresh socket next time, in case this one is what broke.
                self._close_locked()
                return False
        return True

    def _report_failure(self, exc: OSError) -> None:
        if self._warned:
            logger.debug("notify to %s failed: %s", self._socket_path, exc)
            return
        self._warned = True
        logger.warning(
            "cannot notify the service manager at %s: %s (further failures logged at debug)",
            self._socket_path,
            exc,
        )

    def _close_locked(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def close(self) -> None:
        """Close the socket; a later send opens a new one. Safe to call repeatedly."""
        with self._lock:
            self._close_locked()

    def __enter__(self) -> Notifier:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
