"""A tool's `parameters` checked against the JSON Schema meta-schema when the tool is declared, so an invalid
schema fails at import with the field that is wrong, never later at the model.

jsonschema's check against the 2020-12 meta-schema costs ~1.3 ms per schema (its `$dynamicRef`s are resolved
anew each time), paid by every extension process at every start for every tool. Most tool schemas use a handful
of plain keywords whose meta-schema rules are simple, so `_plainly_valid` decides those first: it answers True
only when each keyword is one it knows and each value obeys that keyword's rule in the meta-schema; anything
else (an unknown keyword, `$ref`, `pattern`, a `$schema`, a value it is not sure of) goes to jsonschema, which
also words every error. tests/sdk/test_schema_check.py checks that it never accepts what jsonschema refuses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for

from ._convert import UnconvertibleValue, encode_json

_SIMPLE_TYPES = frozenset(("array", "boolean", "integer", "null", "number", "object", "string"))
_MAX_DEPTH = 32  # deeper schemas go to jsonschema


def check_tool_schema(extension: str, tool: str, schema: dict[str, Any]) -> None:
    """Raise ValueError naming the extension, the tool and the schema's wrong field when `schema` is not a valid
    JSON Schema (by the draft its `$schema` names; the latest draft without one) or has no JSON form."""
    where = f"extension {extension!r}, tool {tool!r}: parameters"
    try:
        encode_json(schema)
    except (UnconvertibleValue, ValueError) as exc:
        raise ValueError(f"{where} is not JSON: {exc}") from None
    if _plainly_valid(schema, 0):
        return
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        path = "/".join(str(p) for p in exc.absolute_path) or "(the schema itself)"
        raise ValueError(f"{where} is not a valid JSON Schema: at {path}: {exc.message}") from None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_count(value: Any) -> bool:
    """The meta-schema's nonNegativeInteger (strictly: an int; 3.0 goes to jsonschema)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_unique_strings(value: Any) -> bool:
    return (isinstance(value, list) and all(isinstance(v, str) for v in value)
            and len(set(value)) == len(value))


def _is_type(value: Any) -> bool:
    if isinstance(value, str):
        return value in _SIMPLE_TYPES
    return (isinstance(value, list) and len(value) > 0 and all(isinstance(v, str) and v in _SIMPLE_TYPES
                                                              for v in value) and len(set(value)) == len(value))


def _is_schema_map(value: Any, depth: int) -> bool:
    return isinstance(value, dict) and all(_plainly_valid(v, depth + 1) for v in value.values())


def _is_schema_list(value: Any, depth: int) -> bool:
    return isinstance(value, list) and len(value) > 0 and all(_plainly_valid(v, depth + 1) for v in value)


def _plainly_valid(schema: Any, depth: int) -> bool:
    """True only when `schema` is certainly valid under the 2020-12 meta-schema (False: ask jsonschema)."""
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return False
    for key, value in schema.items():
        rule = _RULES.get(key)
        if rule is None or not rule(value, depth):
            return False
    return True


_RULES: dict[str, Callable[[Any, int], bool]] = {  # keyword -> rule(value, depth)
    "type": lambda v, d: _is_type(v),
    "properties": _is_schema_map,
    "$defs": _is_schema_map,
    "items": lambda v, d: _plainly_valid(v, d + 1),
    "additionalProperties": lambda v, d: _plainly_valid(v, d + 1),
    "not": lambda v, d: _plainly_valid(v, d + 1),
    "anyOf": _is_schema_list,
    "oneOf": _is_schema_list,
    "allOf": _is_schema_list,
    "required": lambda v, d: _is_unique_strings(v),
    "enum": lambda v, d: isinstance(v, list),
    "const": lambda v, d: True,
    "default": lambda v, d: True,
    "examples": lambda v, d: isinstance(v, list),
    "title": lambda v, d: isinstance(v, str),
    "description": lambda v, d: isinstance(v, str),
    "$comment": lambda v, d: isinstance(v, str),
    "format": lambda v, d: isinstance(v, str),
    "minimum": lambda v, d: _is_number(v),
    "maximum": lambda v, d: _is_number(v),
    "exclusiveMinimum": lambda v, d: _is_number(v),
    "exclusiveMaximum": lambda v, d: _is_number(v),
    "multipleOf": lambda v, d: _is_number(v) and v > 0,
    "minLength": lambda v, d: _is_count(v),
    "maxLength": lambda v, d: _is_count(v),
    "minItems": lambda v, d: _is_count(v),
    "maxItems": lambda v, d: _is_count(v),
    "minProperties": lambda v, d: _is_count(v),
    "maxProperties": lambda v, d: _is_count(v),
    "uniqueItems": lambda v, d: isinstance(v, bool),
    "readOnly": lambda v, d: isinstance(v, bool),
    "writeOnly": lambda v, d: isinstance(v, bool),
    "deprecated": lambda v, d: isinstance(v, bool),
}
