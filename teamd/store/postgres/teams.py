"""Teams and their rosters in PostgreSQL (CONTRACT §2, §4, §9 create, delete, remove).

A team is its row in `teams` (the roster, `config.json`'s document) and its board's row in
`boards`; members' states are rows of `members`. Made in one transaction: spend, board,
journal, roster. Deleted in one transaction: the `team_deleted` line ends its journal, the
board goes first, and its rows are removed — or, archived, renamed to the archive's name
`{team}-{stamp}` (no team can be called that), inboxes and requests dropped.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from teamd.errors import BadInput, TeamdError
from teamd.files import Json
from teamd.names import stamp, validate_name
from teamd.store.changes import Kind
from teamd.store.postgres.base import Base, jsonb, lock_name, text

#: the tables a team's rows are in, and which an archive keeps
KEPT = ("teams", "members", "tasks", "journal", "sessions", "transcripts", "removed")
DROPPED = ("boards", "inbox", "inbox_marks", "requests", "team_docs", "journal_parts",
           "rejected")

class Teams(Base):
    """team_names, team_exists, describe_team, create_team, delete_team, archives,
    read_archived_spec, keep_removed, removed; the roster's units and records."""

    def team_names(self) -> list[str]:
        return [r[0] for r in self.db.rows("SELECT team FROM teams ORDER BY team")]

    def describe_team(self, team: str) -> str:
        return self.where("teams", validate_name(team, "team name"))

    def create_team(self, team: str, roster: Json, spend: Json) -> bool:
        validate_name(team, "team name")
        with self.db.unit(lock_name("roster", team)):
            if self.team_exists(team):
                return False
            if self.db.one("SELECT 1 FROM boards WHERE team = %s", (team,)) is not None:
                raise BadInput(f"team {team!r}: the board of a deleted team is left over in "
                               f"{self.where('boards', team)}; delete that row to create "
                               "the team again")
            self.db.execute("INSERT INTO team_docs (team, what, doc) VALUES (%s, 'spend', %s)",
                            (team, jsonb(spend)))
            self.db.execute("INSERT INTO boards (team) VALUES (%s)", (team,))
            self.db.execute("INSERT INTO journal_parts (team, part, size) VALUES (%s, 0, 0)",
                            (team,))
            self.db.execute("INSERT INTO teams (team, doc) VALUES (%s, %s)",
                            (team, jsonb(roster)))
            self.db.changed(Kind.TEAM, team)
        return True

    def delete_team(self, team: str, last: Json, *, purge: bool) -> str | None:
        archive = None if purge else f"{team}-{stamp(float(last['ts']))}"
        with self.db.unit(*(lock_name(what, team) for what in ("roster", "board", "journal"))):
            if not self.team_exists(team):
                raise TeamdError(f"team {team!r} is gone")
            self.db.execute("INSERT INTO journal (team, part, size, doc) SELECT team, part, "
                            "%s, %s FROM journal_parts WHERE team = %s",
                            (len(text(last)) + 1, text(last), team))
            self.db.execute("DELETE FROM boards WHERE team = %s", (team,))  # the board first
            for table in DROPPED:
                self.db.execute(f"DELETE FROM {table} WHERE team = %s", (team,))
            for table in KEPT:
                if archive is None:
                    self.db.execute(f"DELETE FROM {table} WHERE team = %s", (team,))
                elif table == "teams":
                    self.db.execute("INSERT INTO archives (archive, team, doc) SELECT %s, "
                                    "team, doc FROM teams WHERE team = %s", (archive, team))
                    self.db.execute("DELETE FROM teams WHERE team = %s", (team,))
                else:
                    self.db.execute(f"UPDATE {table} SET team = %s WHERE team = %s",
                                    (archive, team))
            self.db.changed(Kind.TEAM, team)
            self.db.changed(Kind.JOURNAL, team)
        return archive

    def archives(self, team: str) -> list[str]:
        validate_name(team, "team name")
        return [r[0] for r in self.db.rows(
            "SELECT archive FROM archives WHERE team = %s ORDER BY archive", (team,))]

    def read_archived_spec(self, team: str, archive: str) -> Json | None:
        doc = self.db.one("SELECT doc FROM archives WHERE team = %s AND archive = %s",
                          (team, archive))
        return None if doc is None else dict(doc)

    def keep_removed(self, team: str, name: str, stamp: str) -> str | None:
        kept = f"{validate_name(name, 'member name')}-{stamp}"
        with self.db.unit(lock_name("inbox", team, name), lock_name("session", team, name)):
            moved = 0
            for table in ("inbox", "sessions"):
                moved += self.db.execute(f"UPDATE {table} SET name = %s WHERE team = %s AND "
                                         "name = %s", (kept, team, name)).rowcount
            if not moved:
                return None
            self.db.execute("INSERT INTO removed (team, name, kept) VALUES (%s, %s, %s)",
                            (team, name, kept))
            self.db.changed(Kind.INBOX, team, name)
            self.db.changed(Kind.SESSION, team, name)
        return f"removed/{kept}"

    def removed(self, team: str, name: str) -> list[str]:
        validate_name(name, "member name")
        return [f"removed/{r[0]}" for r in self.db.rows(
            "SELECT kept FROM removed WHERE team = %s AND name = %s ORDER BY kept",
            (team, name))]

    def kept_key(self, team: str, name: str, kept: str | None) -> tuple[str, str]:
        """The (team, name) the rows of a member's records are kept under: its own, a
        removed member's (`removed/{name}-{ts}`), or a deleted team's archive."""
        if kept is None:
            return team, name
        if kept.startswith("removed/"):
            return team, kept.removeprefix("removed/")
        return kept, name

    # -- the roster (CONTRACT §4) -------------------------------------------------------
    @contextmanager
    def roster_unit(self, team: str) -> Iterator[bool]:
        with self.db.unit(lock_name("roster", team)):
            yield self.team_exists(team)

    @contextmanager
    def member_unit(self, team: str, name: str, *, create: bool = True) -> Iterator[bool]:
        with self.db.unit(lock_name("member", team, name)):
            if not self.team_exists(team):
                yield False
            elif create:
                yield True
            else:
                yield self.read_state(team, name) is not None

    def read_spec(self, team: str) -> Json | None:
        doc = self.db.one("SELECT doc FROM teams WHERE team = %s", (team,))
        return None if doc is None else dict(doc)

    def describe_spec(self, team: str) -> str:
        return self.where("teams", team)

    def write_spec(self, team: str, doc: Json) -> None:
        with self.db.unit():
            self.db.execute("UPDATE teams SET doc = %s WHERE team = %s", (jsonb(doc), team))
            self.db.changed(Kind.SPEC, team)

    def read_state(self, team: str, name: str) -> Json | None:
        doc = self.db.one("SELECT doc FROM members WHERE team = %s AND name = %s", (team, name))
        return None if doc is None else dict(doc)

    def write_state(self, team: str, name: str, doc: Json) -> None:
        validate_name(name, "member name")
        with self.db.unit():
            self.db.execute("INSERT INTO members (team, name, doc) VALUES (%s, %s, %s) "
                            "ON CONFLICT (team, name) DO UPDATE SET doc = excluded.doc",
                            (team, name, jsonb(doc)))
            self.db.changed(Kind.MEMBER, team, name)

    def drop_state(self, team: str, name: str) -> None:
        with self.db.unit():
            self.db.execute("DELETE FROM members WHERE team = %s AND name = %s", (team, name))
            self.db.changed(Kind.MEMBER, team, name)

