"""Reading one of the files store's JSON documents as a record: a document that is not one
raises `BadRecord` naming its file (CONTRACT §2: written whole, so it is a hand edit)."""

from __future__ import annotations

from pathlib import Path

from teamd import files
from teamd.errors import TeamdError
from teamd.files import Json
from teamd.store.errors import BadRecord


def read_record(path: Path) -> Json | None:
    """The document at `path`, or None when there is none."""
    try:
        return files.read_json(path)
    except TeamdError as exc:
        raise BadRecord(str(path), str(exc).removeprefix(f"{path}: ")) from None
