"""Deprecated, retired and unknown models, from the tables the installed `anthropic` SDK
ships.

The SDK keeps `DEPRECATED_MODELS` (model → end-of-life date, e.g. "November 30th, 2026") and
warns on every call. `teamctl spawn` and `teamd` warn once instead (CONTRACT.md section 12).
It also lists the models it knows (its `Model` type): `teamctl spawn` warns for a name not
among them — a typo, or a model retired and dropped (CONTRACT.md section 9).
`teamctl` must never import the SDK (it is its fast path), so the tables are read from the
SDK's source text: the package is found with `importlib.util.find_spec` (which executes
nothing of a top-level package) and the file is parsed with `ast`, never run.
"""

from __future__ import annotations

import ast
import datetime as dt
import difflib
import functools
import importlib.util
import logging
import re
from dataclasses import dataclass
from pathlib import Path

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
    """Every model the installed SDK lists (its `Model` type, and the deprecated ones);
    empty if the list cannot be read."""
    root = _sdk_folder()
    if root is None:
        return frozenset()
    for rel in _MODEL_FILES:
        try:
            tree = ast.parse((root / rel).read_text(encoding="utf-8"), str(root / rel))
        except (OSError, UnicodeDecodeError, SyntaxError):
            continue
        names = {node.value for stmt in tree.body if _assigns(stmt, _MODEL_NAMES)
                 for node in ast.walk(stmt) if isinstance(node, ast.Constant)
                 and isinstance(node.value, str) and node.value.startswith("claude")}
        if names:
            return frozenset(names | set(table()))
    log.debug("no model list found in the anthropic SDK at %s", root)
    return frozenset()


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
