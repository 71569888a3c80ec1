"""A snapshot's free-form JSON (here a tool call's input) is the text json.dumps makes, fallbacks included.

The host encodes it with the C encoder directly (host/extensions/_convert.py `_dumps`), not through json.dumps.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from host.extensions._convert import tool_call_to_proto
from host.extensions._snapshots import ToolCallSnapshot


class _Point(BaseModel):
    x: int
    label: str


def _input_json(value: Any) -> str:
    return tool_call_to_proto(ToolCallSnapshot(tool_name="t", tool_call_id="c", input=value)).input_json


@pytest.mark.parametrize("value", [
    {"q": "hookwire", "n": 3, "f": 1.5, "ok": True, "none": None},
    {"nested": {"list": [1, [2, {"deep": "é—ü"}]]}, "emoji": "🙂"},
    {7: "int key", 2.5: "float key", True: "bool key", None: "null key"},
    "a bare string with \"quotes\" and \\ and \n",
    [],
    12345678901234567890,
    -0.0,
])
def test_tool_input_json_is_what_json_dumps_writes(value: Any) -> None:
    assert _input_json(value) == json.dumps(value, ensure_ascii=False, allow_nan=False)


def test_values_json_cannot_hold_go_through_the_default_conversion() -> None:
    value = {"tuple": (1, 2), "set": {3}, "bytes": b"caf\xc3\xa9", "model": _Point(x=1, label="p"),
             "error": ValueError("bad input")}
    assert json.loads(_input_json(value)) == {
        "tuple": [1, 2], "set": [3], "bytes": "café", "model": {"x": 1, "label": "p"},
        "error": {"name": "ValueError", "message": "bad input", "stack": ""},
    }


def test_nan_is_sent_as_the_values_repr() -> None:
    assert json.loads(_input_json({"score": float("nan")})) == "{'score': nan}"


def test_a_cycle_is_sent_as_the_values_repr() -> None:
    cyclic: list[Any] = [1]
    cyclic.append(cyclic)
    assert json.loads(_input_json({"c": cyclic})) == "{'c': [1, [...]]}"


def test_a_lone_surrogate_is_escaped_to_ascii() -> None:
    assert _input_json({"s": "a\ud800é"}) == '{"s": "a\\ud800\\u00e9"}'
