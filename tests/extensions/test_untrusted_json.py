"""Tool outputs decoded as untrusted (host/extensions/_untrusted_json.py): exactly what is converted, and counted."""

from __future__ import annotations

import pytest

from host.extensions._untrusted_json import loads_untrusted


def test_non_finite_numbers_become_null_and_are_counted() -> None:
    value, seen = loads_untrusted('{"a": NaN, "b": [Infinity, -Infinity, 1.5]}')
    assert value == {"a": None, "b": [None, None, 1.5]}
    assert (seen.non_finite, seen.surrogates) == (3, 0)


def test_lone_surrogates_become_replacement_characters_in_keys_and_values() -> None:
    value, seen = loads_untrusted('{"k\\udcff": ["x\\ud800y", "ok"]}')
    assert value == {"k\ufffd": ["x\ufffdy", "ok"]}
    assert seen.surrogates == 2


def test_a_valid_surrogate_pair_is_one_character_and_kept() -> None:
    value, seen = loads_untrusted('"\\ud83d\\ude00"')
    assert value == "\U0001F600"
    assert not seen


def test_text_that_is_not_json_still_raises() -> None:
    with pytest.raises(ValueError):
        loads_untrusted("{not json")
