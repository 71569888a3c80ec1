"""`_decode` (extension_sdk/_convert.py) of a snapshot's `_json` field: compact JSON takes the C scanner directly;
whatever else gives exactly what json.loads gives (or the text itself when it is not JSON)."""

from __future__ import annotations

import json
import math

import pytest

from extension_sdk._convert import _decode


@pytest.mark.parametrize("text", ['{"q":"hookwire"}', ' {"a": 1} ', '[1,2]\n', '"x"', "0", "true", "null",
                                  '{"a":[{"b":"\\u00e9"}]}', '\t[]'])
def test_json_decodes_as_json_loads_does(text: str) -> None:
    assert _decode(text) == json.loads(text)


@pytest.mark.parametrize("text", ["1 2", '{"a":1}x', "\ufeff{}", "nope", '{"a":', "[1,]"])
def test_text_json_loads_refuses_is_passed_through(text: str) -> None:
    assert _decode(text) == text


def test_nan_and_empty() -> None:
    assert math.isnan(_decode('{"a":NaN}')["a"])
    assert _decode("") is None
