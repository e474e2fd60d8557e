"""What the installed `anthropic` SDK says about models: its deprecated and retired models
(`DEPRECATED_MODELS`) and its model list (the `Model` type, which the price table must cover
and `teamctl spawn` checks a name against).

The SDK keeps `DEPRECATED_MODELS` (model → end-of-life date, e.g. "November 30th, 2026") and
warns on every call. `teamctl spawn` and `teamd` warn once instead (CONTRACT.md section 12):
teamd in its log and, as `model_deprecated`, in the journal of each team using the model.
`teamctl spawn` also warns for a name the SDK does not list — a typo, or a model retired and
dropped (CONTRACT.md section 9). `teamctl` must never import the SDK (it is its fast path),
so the tables are read from the SDK's source text: the package is found with
`importlib.util.find_spec` (which executes nothing of a top-level package) and the file is
parsed with `ast`, never run.
"""

from __future__ import annotations

import ast
import datetime as dt
import difflib
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
# Where they keep the list of models: the `Model` type alias, a Literal of names (or str)
_MODEL_FILES = ("types/model.py", "types/model_param.py")
_MODEL_NAMES = ("Model", "ModelParam")
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


def warning_for(model: str) -> str | None:
    """The one line `teamctl spawn` gives for `model`: deprecated or retired, or not a
    model the installed SDK knows; None for a current model (or an SDK not readable)."""
    found = lookup(model)
    if found is not None:
        return found.warning()
    listed = models()
    if not listed or model in listed:
        return None
    close = difflib.get_close_matches(model, sorted(listed), n=1, cutoff=0.6)
    return (f"model {model} is not a model the installed SDK knows (a typo, or one retired "
            "and dropped): calls to it may fail" + (f"; did you mean {close[0]}?" if close
                                                     else ""))


@functools.cache
def models() -> frozenset[str]:
    """Every model the installed SDK knows: its list and its deprecated ones; empty if the
    list cannot be read."""
    listed = sdk_models()
    return frozenset((*listed, *table())) if listed else frozenset()


def _assigns(stmt: ast.stmt, names: tuple[str, ...]) -> bool:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else \
        [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
    return any(isinstance(t, ast.Name) and t.id in names for t in targets)


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
    """The model names the installed SDK lists (its `Model` literals, in its order); empty if
    the list cannot be read."""
    root = _sdk_folder()
    if root is None:
        return ()
    for rel in _MODEL_FILES:
        try:
            tree = ast.parse((root / rel).read_text(encoding="utf-8"), str(root / rel))
        except (OSError, UnicodeDecodeError, SyntaxError):
            continue
        names = tuple(dict.fromkeys(
            node.value for stmt in tree.body if _assigns(stmt, _MODEL_NAMES)
            for node in ast.walk(stmt) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and node.value.startswith("claude-")))
        if names:
            return names
    log.debug("no model list found in the anthropic SDK at %s", root)
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
        value = getattr(node, "value", None)
        if value is None or not _assigns(node, (_TABLE_NAME,)):
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
