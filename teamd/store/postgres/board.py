"""The board, requests and "always" answers in PostgreSQL (CONTRACT §5, §6, §11).

A board is its row in `boards`, whose `top_id` is the team's id high-water mark: advanced
in the board's unit, in the same transaction as the task of the new id, never lowered, so
an id is never handed out twice nor reused. A claim (`claim_unit`) shares the board's lock
with other claims and locks its task's row with `SELECT … FOR UPDATE SKIP LOCKED`, reading
it in the same statement — a claim that finds it locked has lost — so racers for different
tasks do not queue behind one another; a `board_unit` holds the board's lock alone. Tasks
are rows of `tasks`, requests of `requests`; the team's "always" answers are
`permissions.json`'s document in `team_docs`. Each unit is the transaction holding the
advisory lock of what it guards.
"""

from __future__ import annotations

import copy
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial

from psycopg import sql

from teamd.errors import BadInput, TeamdError
from teamd.files import Json
from teamd.store.changes import Kind
from teamd.store.errors import BadRecord, check_task, good_tasks
from teamd.store.postgres.base import Base, jsonb, lock_name

log = logging.getLogger(__name__)

#: what a request id may be (the files store's name for its record, too)
REQUEST_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
PERMISSIONS = "permissions"
SCHEMA = 1


def _request_id(request_id: str) -> str:
    if not REQUEST_ID.fullmatch(request_id or ""):
        raise BadInput(f"invalid request id {request_id!r}")
    return request_id


class Board(Base):
    """board_exists, board_unit, claim_unit, task_ids, read_task, read_tasks, write_task,
    next_task_id, top_task_id; request_unit, create/read/write/list requests; always_rules,
    add_always."""

    def board_exists(self, team: str) -> bool:
        return self.db.one("SELECT 1 FROM boards WHERE team = %s", (team,)) is not None

    @contextmanager
    def board_unit(self, team: str) -> Iterator[None]:
        with self.db.unit(lock_name("board", team)):
            if not self.board_exists(team):
                raise TeamdError(f"team {team!r} has no board in {self.description}")
            yield

    @contextmanager
    def claim_unit(self, team: str, task_id: int) -> Iterator[Json | None]:
        """The board's lock shared (claims of other tasks go on beside this one; a
        `board_unit` waits for them all), the task's row locked `FOR UPDATE SKIP LOCKED`
        and read in the same statement: found, or skipped (another claim holds it)."""
        locked = sql.SQL(
            "WITH t AS (SELECT doc FROM tasks WHERE team = {0} AND id = {1} "
            "FOR UPDATE SKIP LOCKED) "
            "SELECT (SELECT doc FROM t), EXISTS (SELECT 1 FROM boards WHERE team = {0})"
        ).format(sql.Literal(team), sql.Literal(int(task_id)))
        with self.db.unit(lock_name("board", team), shared=True, first=locked) as rows:
            [(doc, board)] = rows
            if not board:
                raise TeamdError(f"team {team!r} has no board in {self.description}")
            yield None if doc is None else check_task(doc, task_id,
                                                      self.where("tasks", team, task_id))

    def task_ids(self, team: str) -> list[int]:
        return [int(r[0]) for r in self.db.rows(
            "SELECT id FROM tasks WHERE team = %s ORDER BY id", (team,))]

    def read_task(self, team: str, task_id: int) -> Json | None:
        doc = self.db.one("SELECT doc FROM tasks WHERE team = %s AND id = %s",
                          (team, int(task_id)))
        return None if doc is None else check_task(doc, task_id, self.where("tasks", team, task_id))

    def read_tasks(self, team: str) -> list[Json]:
        rows = self.db.rows("SELECT id, doc FROM tasks WHERE team = %s ORDER BY id", (team,))
        return good_tasks((int(task_id), partial(copy.copy, doc),
                           self.where("tasks", team, task_id)) for task_id, doc in rows)

    def write_task(self, team: str, task: Json) -> None:
        task_id = int(task["id"])
        with self.db.unit():
            self.db.execute("INSERT INTO tasks (team, id, doc) VALUES (%s, %s, %s) "
                            "ON CONFLICT (team, id) DO UPDATE SET doc = excluded.doc",
                            (team, task_id, jsonb(task)))
            self.db.changed(Kind.TASK, team, str(task_id))

    def next_task_id(self, team: str) -> int:
        with self.db.unit():
            new = self.db.one("UPDATE boards SET top_id = greatest(top_id, coalesce((SELECT "
                              "max(id) FROM tasks WHERE team = %s), 0)) + 1 WHERE team = %s "
                              "RETURNING top_id", (team, team))
            if new is None:
                raise TeamdError(f"team {team!r} has no board in {self.description}")
            self.db.changed(Kind.TASK_IDS, team)
        return int(new)

    def top_task_id(self, team: str) -> int:
        return int(self.db.one("SELECT top_id FROM boards WHERE team = %s", (team,)) or 0)

    def raise_top_task_id(self, team: str, top: int) -> None:
        with self.db.unit():
            self.db.execute("UPDATE boards SET top_id = greatest(top_id, %s) WHERE team = %s",
                            (int(top), team))
            self.db.changed(Kind.TASK_IDS, team)

    # -- requests (CONTRACT §6) -----------------------------------------------------------
    @contextmanager
    def request_unit(self, team: str, request_id: str) -> Iterator[bool]:
        with self.db.unit(lock_name("request", team, _request_id(request_id))):
            yield self.db.one("SELECT 1 FROM requests WHERE team = %s AND id = %s",
                              (team, request_id)) is not None

    def create_request(self, team: str, doc: Json) -> bool:
        request_id = _request_id(str(doc["request_id"]))
        with self.db.unit(lock_name("request", team, request_id)):
            made = self.db.execute("INSERT INTO requests (team, id, doc) VALUES (%s, %s, %s) "
                                   "ON CONFLICT DO NOTHING",
                                   (team, request_id, jsonb(doc))).rowcount
            if made:
                self.db.changed(Kind.REQUEST, team, request_id)
        return bool(made)

    def read_request(self, team: str, request_id: str) -> Json | None:
        doc = self.db.one("SELECT doc FROM requests WHERE team = %s AND id = %s",
                          (team, _request_id(request_id)))
        if doc is not None and not isinstance(doc, dict):
            raise BadRecord(self.where("requests", team, request_id), "not a JSON object")
        return None if doc is None else dict(doc)

    def write_request(self, team: str, doc: Json) -> None:
        request_id = _request_id(str(doc["request_id"]))
        with self.db.unit():
            self.db.execute("INSERT INTO requests (team, id, doc) VALUES (%s, %s, %s) "
                            "ON CONFLICT (team, id) DO UPDATE SET doc = excluded.doc",
                            (team, request_id, jsonb(doc)))
            self.db.changed(Kind.REQUEST, team, request_id)

    def list_requests(self, team: str) -> list[Json]:
        out: list[Json] = []
        for request_id, doc in self.db.rows("SELECT id, doc FROM requests WHERE team = %s",
                                            (team,)):
            if not isinstance(doc, dict):
                log.error("%s: skipped, not a request", self.where("requests", team,
                                                                   request_id))
                continue
            out.append(doc)
        return out

    # -- permissions answered "always" (CONTRACT §11) -----------------------------------
    def always_rules(self, team: str) -> list[str]:
        doc = self.db.one("SELECT doc FROM team_docs WHERE team = %s AND what = %s",
                          (team, PERMISSIONS))
        return list((doc or {}).get("allow", []))

    def add_always(self, team: str, rule: str) -> bool:
        with self.db.unit(lock_name("doc", team, PERMISSIONS)):
            doc = self.db.one("SELECT doc FROM team_docs WHERE team = %s AND what = %s",
                              (team, PERMISSIONS)) or {"schema": SCHEMA, "allow": []}
            if rule in doc.setdefault("allow", []):
                return False
            doc["allow"].append(rule)
            self.db.execute("INSERT INTO team_docs (team, what, doc) VALUES (%s, %s, %s) "
                            "ON CONFLICT (team, what) DO UPDATE SET doc = excluded.doc",
                            (team, PERMISSIONS, jsonb(doc)))
            self.db.changed(Kind.SPEC, team)
        return True
