"""The scripted server's record of requests: in memory, as a JSONL log, and waits on it.

This module owns what is kept of every `/v1/messages` request (who sent it, the rule that
answered, the status, the path with its query, the betas asked for, the client's address,
the body and reply; its key — `x-api-key` or the bearer token — only as a SHA-256), the
per-agent request count rules' `nth` tests, the requests in flight and their peak, the
requests to any other endpoint (`other_requests`), the log file (one write per line on an
O_APPEND descriptor) and `wait_for`.
`ScriptedServer` is a `Recorder`; the HTTP handler records through it.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from teamd.scripted.request import RequestView

Record = dict[str, Any]
Predicate = Callable[[Record], bool]


class Recorder:
    """Every `/v1/messages` request seen, oldest first, and the waits on them."""

    def __init__(self, log_path: str | os.PathLike[str] | None = None) -> None:
        self.log_path = os.fspath(log_path) if log_path is not None else None
        self._log_fd: int | None = None
        self._log_lock = threading.Lock()
        # One condition guards the records and the per-agent counters; wait_for sleeps on it.
        self._cond = threading.Condition()
        self._records: list[Record] = []
        self._counts: dict[tuple[str | None, str | None], int] = {}
        # `/v1/messages` requests being answered now, and the most there ever were at once
        self.in_flight = 0
        self.peak_in_flight = 0
        # every other request to the API's endpoints (not the `/_` control ones), oldest
        # first: {"method", "path", "received_at"} (Claude Code's `HEAD /api/hello`, …)
        self._other: list[Record] = []

    def _open_log(self) -> None:
        if self.log_path is not None:
            self._log_fd = os.open(
                self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600
            )

    @property
    def requests(self) -> list[Record]:
        """Copies of the recorded `/v1/messages` requests, oldest first."""
        with self._cond:
            return [dict(r) for r in self._records]

    @property
    def other_requests(self) -> list[Record]:
        """Copies of the requests to endpoints other than `/v1/messages`, oldest first."""
        with self._cond:
            return [dict(r) for r in self._other]

    def _record_other(self, method: str, path: str) -> None:
        if path.split("?", 1)[0].startswith("/_"):
            return  # the control endpoints are the test's, not the client's
        with self._cond:
            self._other.append({"method": method, "path": path, "received_at": time.time()})
            self._cond.notify_all()

    def wait_for(
        self, predicate: Predicate | None = None, timeout: float = 5.0, *, since: int = 0
    ) -> Record:
        """Block until a recorded request (index >= since) satisfies predicate; return it.

        Raises TimeoutError listing what did arrive, so a failing test says why.
        """
        deadline = time.monotonic() + timeout
        checked = since
        with self._cond:
            while True:
                while checked < len(self._records):
                    record = self._records[checked]
                    checked += 1
                    if predicate is None or predicate(record):
                        return dict(record)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    seen = self._records[since:]
                    summary = "; ".join(
                        f"#{i + since} agent={r['agent']} rule={r['rule']} status={r['status']}"
                        f" last_user_text={r['last_user_text'][:60]!r}"
                        for i, r in enumerate(seen[-5:], start=max(0, len(seen) - 5))
                    )
                    raise TimeoutError(
                        f"no matching request to the scripted API within {timeout:g}s"
                        f" ({len(seen)} request(s) seen since #{since}"
                        f"{': ' + summary if summary else ''})"
                    )
                self._cond.wait(remaining)

    def reset_peak(self) -> None:
        """Start counting `peak_in_flight` afresh (from the requests in flight now)."""
        with self._cond:
            self.peak_in_flight = self.in_flight

    def _in_flight(self, change: int) -> None:
        with self._cond:
            self.in_flight += change
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            self._cond.notify_all()

    def _count(self, agent: str | None, team: str | None) -> int:
        with self._cond:
            n = self._counts.get((team, agent), 0) + 1
            self._counts[(team, agent)] = n
            return n

    def _record(
        self,
        received_at: float,
        view: RequestView,
        body: Any,
        rule: str | int,
        status: int,
        *,
        stream: bool, api_key: str | None = None,
        reply: list[dict[str, Any]] | None,
        path: str = "/v1/messages", betas: list[str] | None = None, peer: str | None = None,
    ) -> None:
        record: Record = {
            "received_at": received_at, "agent": view.agent,
            "api_key_sha256": hashlib.sha256(api_key.encode()).hexdigest() if api_key else None,
            "team": view.team,
            "n": view.n,
            "stream": stream, "rule": rule, "path": path, "betas": list(betas or []),
            "peer": peer,  # the client's address: which host sent it, across namespaces
            "status": status,
            "last_user_text": view.last_user_text, "n_messages": view.n_messages,
            "body": body,
            "reply": reply,
        }
        # The log line is written before waiters are woken, so a test that saw the request
        # in memory also finds it in the file.
        self._write_log(record)
        with self._cond:
            self._records.append(record)
            self._cond.notify_all()

    def _write_log(self, record: Record) -> None:
        if self._log_fd is None:
            return
        line = (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode("utf-8")
        with self._log_lock:
            if self._log_fd is None:
                return
            # One write on an O_APPEND descriptor: readers never see half a line.
            os.write(self._log_fd, line)

    def _close_log(self) -> None:
        with self._log_lock:
            if self._log_fd is not None:
                os.close(self._log_fd)
                self._log_fd = None
