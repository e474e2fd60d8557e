"""Sessions and transcripts in PostgreSQL (CONTRACT §6, §8, §15).

A session record is a row of `sessions` (`doc` the record's JSON), in order by `seq`; an
append is one transaction under the session's lock (so `seq` order is commit order), and
durable once it returns. A row whose `doc` is NULL holds bytes that are no whole record
(`bad`: a hand edit, or a fault test's torn line): readers skip it, and the member itself
(`mend`) moves it to `rejected`. A transcript is one row holding the whole conversation.
A removed member's rows and a deleted team's are found by the names `keep_removed` and
`delete_team` gave them (`Teams.kept_key`).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence

from teamd.files import Json
from teamd.store.changes import Kind
from teamd.store.postgres.base import lock_name, text
from teamd.store.postgres.feed import Feeds
from teamd.store.postgres.inboxes import Inboxes
from teamd.store.postgres.teams import Teams

#: where a transcript is (`keep_transcript`'s answer): this, then `{name}-{stamp}.jsonl`
TRANSCRIPTS = "transcripts/"


class Sessions(Teams, Inboxes, Feeds):
    """read_session, append_session, describe_session, keep_transcript, read_transcript,
    list_transcripts, follow_session."""


    def read_session(self, team: str, name: str, *, mend: bool = False,
                     kept: str | None = None) -> list[Json]:
        key, who = self.kept_key(team, name, kept)
        rows = self.db.rows("SELECT seq, doc, bad FROM sessions WHERE team = %s AND name = %s "
                            "ORDER BY seq", (key, who))
        bad = [(seq, bytes(junk)) for seq, doc, junk in rows if doc is None]
        if mend and bad and kept is None:
            with self.db.unit(lock_name("session", team, name)):
                self.reject(team, name, "sessions", [("bad", junk) for _, junk in bad])
                self.db.execute("DELETE FROM sessions WHERE seq = ANY(%s)",
                                ([seq for seq, _ in bad],))
                self.db.changed(Kind.SESSION, team, name)
        return [doc for _, doc, _ in rows if isinstance(doc, dict)]

    def append_session(self, team: str, name: str, records: Sequence[Json]) -> None:
        self.append_rows("session", team, name, records,
                         lambda: self.db.changed(Kind.SESSION, team, name))

    def describe_session(self, team: str, name: str) -> str:
        return self.where("sessions", team, name)

    def keep_transcript(self, team: str, name: str, stamp: str,
                        records: Sequence[Json]) -> str:
        place = f"{TRANSCRIPTS}{name}-{stamp}.jsonl"
        with self.db.unit():
            self.db.execute("INSERT INTO transcripts (team, name, place, doc) VALUES "
                            "(%s, %s, %s, %s) ON CONFLICT (team, place) DO UPDATE SET "
                            "doc = excluded.doc", (team, name, place, text(list(records))))
            self.db.changed(Kind.SESSION, team, name)
        return place

    def read_transcript(self, team: str, name: str, where: str, *,
                        kept: str | None = None) -> list[Json] | None:
        key = team if kept is None or kept.startswith("removed/") else kept
        # by its file's name: a team moved here from the files store (`teamctl import`)
        # names its transcripts by their paths there
        place = TRANSCRIPTS + where.rsplit("/", 1)[-1]
        doc = self.db.one("SELECT doc FROM transcripts WHERE team = %s AND place = %s",
                          (key, place))
        return None if doc is None else [r for r in doc if isinstance(r, dict)]

    def list_transcripts(self, team: str) -> list[tuple[str, str, str]]:
        rows = self.db.rows("SELECT name, place FROM transcripts WHERE team = %s", (team,))
        return sorted((name, place[len(TRANSCRIPTS) + len(name) + 1:-len(".jsonl")], place)
                      for name, place in rows)

    def follow_session(self, team: str, name: str, *, skip: int = 0, poll: float = 1.0
                       ) -> Generator[Json, None, None]:
        seq, shown = 0, 0
        with self.changes([team], kinds=frozenset({Kind.SESSION, Kind.TEAM}),
                          poll_fallback=poll) as feed:
            while True:
                feed.drain()
                rows = self.db.rows("SELECT seq, doc FROM sessions WHERE team = %s AND "
                                    "name = %s AND seq > %s AND doc IS NOT NULL ORDER BY seq",
                                    (team, name, seq))
                for at, doc in rows:
                    seq, shown = at, shown + 1
                    if shown > skip and isinstance(doc, dict):
                        yield doc
                if not rows and not self.team_exists(team):
                    return
                if not rows:
                    feed.wait(poll)
