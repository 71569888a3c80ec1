"""A tool's `parameters` checked against the JSON Schema meta-schema when the tool is declared, so an invalid
schema fails at import with the field that is wrong, never later at the model."""

from __future__ import annotations

from typing import Any

from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for

from ._convert import UnconvertibleValue, encode_json


def check_tool_schema(extension: str, tool: str, schema: dict[str, Any]) -> None:
    """Raise ValueError naming the extension, the tool and the schema's wrong field when `schema` is not a valid
    JSON Schema (by the draft its `$schema` names; the latest draft without one) or has no JSON form."""
    where = f"extension {extension!r}, tool {tool!r}: parameters"
    try:
        encode_json(schema)
    except (UnconvertibleValue, ValueError) as exc:
        raise ValueError(f"{where} is not JSON: {exc}") from None
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        path = "/".join(str(p) for p in exc.absolute_path) or "(the schema itself)"
        raise ValueError(f"{where} is not a valid JSON Schema: at {path}: {exc.message}") from None
