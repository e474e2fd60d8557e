"""The check of a tool call's input against its tool's JSON Schema (`tool_specs`), before
any handler sees it, and the shortening of inputs for the journal.

Only the schema features the specs use: type (one or a list), enum, minLength, minimum,
exclusiveMinimum, array items, required and no additional properties. A failure raises
`ToolError` naming the input and what is wrong, which the model reads as an error result.
"""

from __future__ import annotations

from typing import Any

from teamd.agent.tool_specs import TOOL_SPECS
from teamd.agent.tools_files import ToolError

__all__ = ["INPUT_SHOWN", "short", "validate_input"]

INPUT_SHOWN = 200  # characters of each string input kept in a tool_call event

_PY_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "array": (list,), "object": (dict,), "null": (type(None),)}


def _type_ok(value: Any, types: list[str]) -> bool:
    for t in types:
        if isinstance(value, bool) and t in ("integer", "number"):
            continue  # JSON true is not a number
        if isinstance(value, _PY_TYPES[t]):
            return True
    return False


def _check_value(where: str, value: Any, schema: dict[str, Any]) -> None:
    types = schema.get("type", [])
    types = [types] if isinstance(types, str) else types
    if types and not _type_ok(value, types):
        raise ToolError(f"{where} must be {' or '.join(types)}, got {type(value).__name__} "
                        f"{short(value, 40)!r}")
    if "enum" in schema and value not in schema["enum"]:
        raise ToolError(f"{where} must be one of {', '.join(map(str, schema['enum']))}; "
                        f"got {value!r}")
    if isinstance(value, str) and len(value) < schema.get("minLength", 0):
        raise ToolError(f"{where} must not be empty")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            raise ToolError(f"{where} must be at least {schema['minimum']}, got {value}")
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            raise ToolError(f"{where} must be more than {schema['exclusiveMinimum']}, "
                            f"got {value}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            _check_value(f"{where}[{i}]", item, schema["items"])


def validate_input(name: str, tool_input: Any) -> dict[str, Any]:
    """Check `tool_input` against the tool's schema; ToolError says what is wrong."""
    schema = TOOL_SPECS[name]["input_schema"]
    if not isinstance(tool_input, dict):
        raise ToolError(f"{name} input must be a JSON object, got {type(tool_input).__name__}")
    props: dict[str, Any] = schema["properties"]
    unknown = sorted(set(tool_input) - set(props))
    if unknown:
        allowed = ", ".join(props) or "none"
        raise ToolError(f"{name} has no input {', '.join(map(repr, unknown))}; "
                        f"allowed: {allowed}")
    missing = [k for k in schema["required"] if k not in tool_input]
    if missing:
        raise ToolError(f"{name} needs {', '.join(map(repr, missing))}")
    for key, value in tool_input.items():
        _check_value(f"{name}.{key}", value, props[key])
    return tool_input


def short(value: Any, limit: int = INPUT_SHOWN) -> Any:
    """`value` with every string cut to `limit` characters and long lists to 20 items."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + f"… ({len(value)} chars)"
    if isinstance(value, dict):
        return {str(k): short(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [short(v, limit) for v in value[:20]] + (["…"] if len(value) > 20 else [])
    return value

