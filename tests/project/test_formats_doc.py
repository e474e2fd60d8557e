"""docs/formats.md is the user's reference for the files: it must say what the code does.

Each enumeration the code owns (message types, statuses, settings and their defaults, journal
events) is compared with the table the page keeps between `<!-- name -->` markers, both ways,
so adding a type, status, event or setting without documenting it fails here."""

from __future__ import annotations

import re
from pathlib import Path

from teamd import inbox, roster, settings

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "formats.md").read_text()
SOURCES = [p for d in ("teamd", "teamctl") for p in (REPO / d).rglob("*.py")]


def table(marker: str) -> list[list[str]]:
    """The rows (cells, stripped) of the table between `<!-- marker -->` and its end."""
    block = DOC.split(f"<!-- {marker} -->", 1)[1].split(f"<!-- /{marker} -->", 1)[0]
    rows = [line.strip().strip("|").split("|") for line in block.strip().splitlines()]
    return [[c.strip() for c in row] for row in rows[2:]]  # past the header and the rule


def names(cell: str) -> set[str]:
    return set(re.findall(r"`([a-z_]+)`", cell))


def test_every_message_type_is_documented_and_no_other() -> None:
    documented = set().union(*(names(row[0]) for row in table("message-types")))
    assert documented == set(inbox.TYPES)


def test_every_status_is_documented_and_no_other() -> None:
    documented = set().union(*(names(row[0]) for row in table("statuses")))
    assert documented == set(roster.STATUSES)


def test_every_setting_is_documented_with_its_default() -> None:
    rows = {next(iter(names(row[0]))): row[1].strip("`") for row in table("settings")}
    defaults = settings.Settings()
    assert set(rows) == set(defaults.as_toml_table())  # the flat keys; the tables apart
    for key, shown in rows.items():
        value = getattr(defaults, key)
        # an empty text shows as `""` (as the contract writes it)
        assert shown == ((value or '""') if isinstance(value, str) else str(value)), key


def emitted_events() -> set[str]:
    """Event names the code journals: `emit(ws, team, "name", …)` and `"event": "name"`,
    plus names chosen between literals (`name = "task_completed" if … else "task_updated"`)."""
    found: set[str] = set()
    for path in SOURCES:
        text = path.read_text()
        found.update(re.findall(r"\bemit\(\s*[\w.]+,\s*[\w.]+,\s*\"([a-z_]+)\"", text))
        found.update(re.findall(r"\"event\":\s*\"([a-z_]+)\"", text))
        for pair in re.findall(r"\bname = \"([a-z_]+)\" if [^\n]* else \"([a-z_]+)\"", text):
            found.update(pair)
    return found


def test_every_event_the_code_journals_is_documented() -> None:
    documented = set().union(*(names(row[0]) for row in table("events")))
    missing = emitted_events() - documented
    assert not missing, f"journaled but not in docs/formats.md: {sorted(missing)}"
    source = "\n".join(p.read_text() for p in SOURCES)
    ghosts = {name for name in documented if f'"{name}"' not in source}
    assert not ghosts, f"documented but never journaled: {sorted(ghosts)}"


def test_the_readme_points_at_the_formats_not_outside_the_project() -> None:
    readme = (REPO / "README.md").read_text()
    assert "docs/formats.md" in readme
    assert "../shared" not in readme
