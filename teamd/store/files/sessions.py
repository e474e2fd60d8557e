"""Sessions `sessions/{name}.jsonl` and transcripts `transcripts/{name}-{ts}.jsonl`
(CONTRACT §6, §8).

A session is appended a line at a time, fsynced before anything depends on it; its owner
mends it (a torn tail or a bad line moved to `{name}.rejected.jsonl`) when it loads it. A
transcript is written whole, atomically. `follow_session` is `attach`'s: new lines as they
land, across the member's restarts.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Sequence
from pathlib import Path

from teamd import files
from teamd.files import Json
from teamd.names import ARCHIVE_TS_RE, NAME_RE
from teamd.store.files.base import Base
from teamd.watch import Watcher


class Sessions(Base):
    """read_session, append_session, describe_session, keep_transcript, read_transcript,
    list_transcripts, follow_session."""

    def read_session(self, team: str, name: str, *, mend: bool = False,
                     kept: str | None = None) -> list[Json]:
        path = self._session(team, name, kept)
        found = files.read_jsonl(path)
        if mend and not found.clean:
            found = files.rewrite_jsonl(path)  # move a torn tail or bad line aside first
        return found.records

    def _session(self, team: str, name: str, kept: str | None) -> Path:
        """The session file of a member, or the one `kept` in a removed member's folder
        (`removed/{name}-{ts}/session.jsonl`) or a deleted team's archive."""
        if kept is None:
            return self.paths.session(team, name)
        folder = self.root / kept  # an absolute `kept` stays itself
        if folder.parent == self.paths.removed_dir(team):
            return folder / "session.jsonl"
        return folder / "sessions" / f"{self.paths.session(team, name).name}"

    def read_transcript(self, team: str, name: str, where: str, *,
                        kept: str | None = None) -> list[Json] | None:
        session = self._session(team, name, kept)
        for base in (self.root, session.parents[3]):
            candidate = base / where
            if candidate.is_file():
                return files.read_jsonl(candidate).records
        # an archived team: transcripts/ sits beside sessions/
        candidate = session.parent.parent / "transcripts" / Path(where).name
        return files.read_jsonl(candidate).records if candidate.is_file() else None

    def append_session(self, team: str, name: str, records: Sequence[Json]) -> None:
        files.append_jsonl(self.paths.session(team, name), records, durable=True)

    def describe_session(self, team: str, name: str) -> str:
        return str(self.paths.session(team, name))

    def keep_transcript(self, team: str, name: str, stamp: str,
                        records: Sequence[Json]) -> str:
        folder = self.paths.transcripts_dir(team)
        transcript = folder / f"{name}-{stamp}.jsonl"
        files.ensure_dir(folder)
        files.atomic_write_bytes(transcript, b"".join(files.dumps_line(m) for m in records))
        return str(transcript.relative_to(self.root))

    def list_transcripts(self, team: str) -> list[tuple[str, str, str]]:
        folder = self.paths.transcripts_dir(team)
        found = []
        for path in folder.glob("*.jsonl") if folder.is_dir() else ():
            name, _, stamp = path.stem.rpartition("-")  # a stamp has no '-', a name may
            if NAME_RE.fullmatch(name) and ARCHIVE_TS_RE.fullmatch(stamp):
                found.append((name, stamp, str(path.relative_to(self.root))))
        return sorted(found)

    def follow_session(self, team: str, name: str, *, skip: int = 0, poll: float = 1.0
                       ) -> Generator[Json, None, None]:
        """Session records past the first `skip`, as they are appended; ends when the
        team's folder is gone. A session file replaced (rewritten with a bad line set
        aside) is read again, skipping the records already shown; one not there yet is
        waited for."""
        path, team_dir = self.paths.session(team, name), self.paths.team_dir(team)
        shown = skip
        with Watcher([p for p in (team_dir, path.parent) if p.is_dir()]) as watcher:
            fd: int | None = None
            offset = count = 0
            try:
                while True:
                    ino = files.inode(path)
                    if fd is not None:
                        size = os.fstat(fd).st_size
                        data = os.pread(fd, size - offset, offset) if size > offset else b""
                        cut = data.rfind(b"\n") + 1  # a torn tail waits for its newline
                        offset += cut
                        for rec in files.parse_lines(data[:cut]).records:
                            count += 1
                            if count > shown:
                                yield rec
                    if ino is not None and (fd is None or os.fstat(fd).st_ino != ino):
                        if fd is not None:
                            os.close(fd)
                        fd = _open(path)
                        shown, offset, count = max(shown, count), 0, 0
                        watcher.add(path.parent)  # sessions/ may be new
                        continue
                    if not team_dir.is_dir():
                        return
                    watcher.wait(poll)
            finally:
                if fd is not None:
                    os.close(fd)


def _open(path: Path) -> int | None:
    try:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
