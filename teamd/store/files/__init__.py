"""The files store: the records of CONTRACT §3–7 and §11–12 as files under `.teams/` and
`.tasks/` (section 2), readable with `cat` and `jq`.

It is the only code that builds a path there, takes a lock there, or stats, globs or
renames there. Its parts, one concern each: `paths` (the layout), `teams` (teams coming and
going), `roster`, `board`, `inboxes`, `requests` (and "always" permissions), `journal`,
`sessions`, `money` (spend, back-off, call slots), `supervision` (teamd's lock and records),
`feed` (inotify as `Change`s). The write primitives they share (atomic replace, locked
append, the bounded line scan) are `teamd.files` and `teamd.linescan`.
"""

from __future__ import annotations

from teamd.store.files.board import Board
from teamd.store.files.feed import Feeds
from teamd.store.files.inboxes import Inboxes
from teamd.store.files.journal import Journal
from teamd.store.files.money import Money
from teamd.store.files.requests import Requests
from teamd.store.files.roster import Roster
from teamd.store.files.sessions import Sessions
from teamd.store.files.supervision import Supervision
from teamd.store.files.teams import Teams


class FilesStore(Teams, Roster, Board, Inboxes, Requests, Journal, Sessions, Money,
                 Supervision, Feeds):
    """The `Store` (teamd.store.api) kept as files under a workspace root."""
