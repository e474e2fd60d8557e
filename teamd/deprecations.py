"""What the installed `anthropic` SDK says about models: its deprecated and retired models
(`DEPRECATED_MODELS`) and its model list (`ModelParam`, which the price table must cover).

The SDK keeps `DEPRECATED_MODELS` (model → end-of-life date, e.g. "November 30th, 2026") and
warns on every call. `teamctl spawn` and `teamd` warn once instead (CONTRACT.md section 12):
teamd in its log and, as `model_deprecated`, in the journal of each team using the model.
`teamctl` must never import the SDK (it is its fast path), so the table is read from the
SDK's source text: the package is found with `importlib.util.find_spec` (which executes
nothing of a top-level package) and the file is parsed with `ast`, never run.
"""

from __future__ import annotations

import ast
import datetime as dt
import functools
import importlib.util
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teamd import events
from teamd.layout import Workspace

log = logging.getLogger(__name__)

# Where SDK versions keep the table: its own module in 0.6x and later, the messages
# resource in earlier ones.
_TABLE_FILES = ("_data/deprecated_models.py", "resources/messages/messages.py")
_TABLE_NAME = "DEPRECATED_MODELS"
_MODEL_LIST = "types/model_param.py"
_ORDINAL = re.compile(r"(\d+)(st|nd|rd|th)\b")


@dataclass(frozen=True)
class Deprecation:
    model: str
    retires: str  # ISO date when the SDK's text could be read as one, else that text
    retired: bool  # the date has passed

    def warning(self) -> str:
        """One line for a person."""
        if self.retired:
            return f"model {self.model} was retired on {self.retires}: calls to it fail"
        return (f"model {self.model} is deprecated and retires on {self.retires}: "
                "choose a newer model (--model, or `model` in teamd.toml)")


def lookup(model: str, today: dt.date | None = None) -> Deprecation | None:
    """The deprecation of `model`, or None if the installed SDK lists none."""
    when = table().get(model)
    if when is None:
        return None
    day = _parse_date(when)
    today = dt.date.today() if today is None else today
    return Deprecation(model, day.isoformat() if day else when,
                       retired=day is not None and day <= today)


def journal_deprecated(ws: Workspace, team: str, members: Iterable[Mapping[str, Any]],
                       default: str, checked: set[tuple[str, str]]) -> None:
    """teamd's warning: `model_deprecated` once per model per start (`checked` remembers)
    into each team whose members use it, and a line in teamd's log."""
    for m in members:
        used = m.get("model") or default
        if (team, used) in checked:
            continue
        checked.add((team, used))
        found = lookup(used)
        if found is not None:
            log.warning("team %s: %s", team, found.warning())
            events.emit(ws, team, "model_deprecated", model=used, retires=found.retires)


@functools.cache
def table() -> dict[str, str]:
    """Model → end-of-life text, from the installed SDK; empty if it cannot be read."""
    root = _sdk_folder()
    if root is None:
        return {}
    for rel in _TABLE_FILES:
        path = root / rel
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if _TABLE_NAME not in source:
            continue
        found = _literal_table(source, str(path))
        if found is not None:
            return found
    log.debug("no %s table found in the anthropic SDK at %s", _TABLE_NAME, root)
    return {}


@functools.cache
def sdk_models() -> tuple[str, ...]:
    """The model names the installed SDK lists (`ModelParam`'s literals); empty if unread."""
    root = _sdk_folder()
    try:
        source = (root / _MODEL_LIST).read_text(encoding="utf-8") if root else ""
        tree = ast.parse(source)
    except (OSError, UnicodeDecodeError, SyntaxError):
        return ()
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and target.id == "ModelParam":
            return tuple(dict.fromkeys(
                n.value for n in ast.walk(node) if isinstance(n, ast.Constant)
                and isinstance(n.value, str) and n.value.startswith("claude-")))
    return ()


def _sdk_folder() -> Path | None:
    try:
        spec = importlib.util.find_spec("anthropic")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _literal_table(source: str, where: str) -> dict[str, str] | None:
    """The dict literal assigned to DEPRECATED_MODELS at the module's top level."""
    try:
        tree = ast.parse(source, where)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if not any(isinstance(t, ast.Name) and t.id == _TABLE_NAME for t in targets):
            continue
        try:
            data = ast.literal_eval(value)
        except ValueError:
            return None
        if isinstance(data, dict):
            return {str(k): str(v) for k, v in data.items()}
    return None


def _parse_date(text: str) -> dt.date | None:
    """"November 30th, 2026" (the SDK's form) or an ISO date; None otherwise."""
    plain = _ORDINAL.sub(r"\1", text.strip())
    for form in ("%B %d, %Y", "%b %d, %Y", "%Y-%m-%d"):
        try:
            return dt.datetime.strptime(plain, form).date()
        except ValueError:
            continue
    return None
