"""The SDK's fast answer for plain tool schemas (extension_sdk/_schema_check.py `_plainly_valid`) against jsonschema's
check by the 2020-12 meta-schema: it may send a schema on to jsonschema, but it must never accept one that
jsonschema refuses. Every keyword it knows is tried with values that are right and wrong for it, alone, nested
under `properties` and `items`, and combined with a sibling keyword."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from extension_sdk import Extension
from extension_sdk._schema_check import _RULES, _plainly_valid

VALUES: list[Any] = [
    None, True, False, 0, 1, -1, 2.5, 3.0, -0.5, 2**70, "", "string", "integr", [], ["a"], ["a", "a"], ["a", 1],
    ["string"], ["string", "null"], ["string", "string"], [True], [{}], [{"type": "string"}], [{"type": "bogus"}],
    {}, {"type": "integer"}, {"type": "bogus"}, {"x": {"type": "string"}}, {"x": {"minimum": "1"}}, {"x": 1},
]


def _jsonschema_accepts(schema: Any) -> bool:
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError:
        return False
    return True


def _cases() -> list[Any]:
    singles = [{key: value} for key in _RULES for value in VALUES]
    nested = [wrap for case in singles for wrap in ({"type": "object", "properties": {"p": case}},
                                                      {"type": "array", "items": case})]
    pairs = [{**a, **b} for a, b in itertools.combinations(singles[::7], 2)]
    return singles + nested + pairs


def test_the_fast_answer_never_accepts_a_schema_the_meta_schema_refuses() -> None:
    wrongly_accepted = [case for case in _cases() if _plainly_valid(case, 0) and not _jsonschema_accepts(case)]
    assert wrongly_accepted == []


def test_the_fast_answer_takes_the_usual_tool_schemas_itself() -> None:
    usual = {
        "type": "object", "description": "Adds two integers",
        "properties": {
            "a": {"type": "integer", "minimum": 0, "description": "first"},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}, "uniqueItems": True},
            "mode": {"anyOf": [{"type": "string", "maxLength": 10}, {"type": "null"}], "default": None},
        },
        "required": ["a"], "additionalProperties": False,
    }
    assert _plainly_valid(usual, 0) is True


@pytest.mark.parametrize(("schema", "where_and_why"), [
    ({"type": "object", "properties": {"n": {"type": "integer", "minimum": "1"}}},
     "properties/n/minimum: '1' is not of type 'number'"),
    ({"type": "object", "required": ["a", "a"]}, "required: ['a', 'a'] has non-unique elements"),
    ({"type": ["string", "string"]}, "type: ['string', 'string'] is not valid under any of the given schemas"),
    ({"anyOf": []}, "anyOf: [] should be non-empty"),
])
def test_a_schema_the_fast_answer_refuses_still_gets_jsonschemas_error(schema: dict[str, Any],
                                                                        where_and_why: str) -> None:
    assert _plainly_valid(schema, 0) is False
    with pytest.raises(ValueError) as raised:
        Extension("schemas").tool(name="t", parameters=schema)(lambda args: None)
    assert str(raised.value) == (
        f"extension 'schemas', tool 't': parameters is not a valid JSON Schema: at {where_and_why}")
