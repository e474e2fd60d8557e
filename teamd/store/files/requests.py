"""Request records `requests/{id}.json` and the team's `permissions.json` (CONTRACT §6, §11).

A record is replaced whole under its own lock (`{id}.json.lock`), which is the request's
unit: the compare-and-set of an answer happens inside it. `permissions.json`
(`{"schema", "allow": [rule, …]}`) only ever grows, under its lock.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from teamd import files
from teamd.errors import TeamdError
from teamd.files import Json
from teamd.store.files.base import Base
from teamd.store.files.records import read_record
from teamd.store.files.units import unit

log = logging.getLogger(__name__)

SCHEMA = 1


class Requests(Base):
    """request_unit, create/read/write/list requests; always_rules, add_always."""

    @contextmanager
    def request_unit(self, team: str, request_id: str) -> Iterator[bool]:
        path = self.paths.request(team, request_id)
        if not path.parent.is_dir():  # taking the lock would make the folder
            yield False
            return
        with unit(path):
            yield path.is_file()

    def create_request(self, team: str, doc: Json) -> bool:
        path = self.paths.request(team, str(doc["request_id"]))
        files.ensure_dir(path.parent)
        with unit(path):
            if path.exists():
                return False
            files.write_json(path, doc)
        return True

    def read_request(self, team: str, request_id: str) -> Json | None:
        return read_record(self.paths.request(team, request_id))

    def write_request(self, team: str, doc: Json) -> None:
        files.write_json(self.paths.request(team, str(doc["request_id"])), doc)

    def list_requests(self, team: str) -> list[Json]:
        folder = self.paths.requests_dir(team)
        out: list[Json] = []
        if folder.is_dir():
            for path in folder.glob("*.json"):
                try:
                    record = files.read_json(path)
                except TeamdError as exc:
                    # records are written atomically, so this is a hand edit: report,
                    # skip (one bad file must not stop every member that checks its plan
                    # gate)
                    log.error("%s: skipped, not a request (%s)", path, exc)
                    continue
                if record:
                    out.append(record)
        return out

    # -- permissions answered "always" -----------------------------------------------------
    def always_rules(self, team: str) -> list[str]:
        doc = read_record(self.paths.permissions(team))
        return list((doc or {}).get("allow", []))

    def add_always(self, team: str, rule: str) -> bool:
        path = self.paths.permissions(team)
        with unit(path):
            doc = files.read_json(path) or {"schema": SCHEMA, "allow": []}
            if rule in doc.setdefault("allow", []):
                return False
            doc["allow"].append(rule)
            files.write_json(path, doc)
        return True
