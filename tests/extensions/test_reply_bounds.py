"""The bounds of one extension tool call (host/extensions/_reply_bounds.py) and their manifest fields, with a clock the test sets."""

from __future__ import annotations

import json

import pytest

from host import ManifestError, parse_manifest
from host.extensions._reply_bounds import PRELIMINARY_BURST, PRELIMINARY_RATE, ToolReplyBounds, decode_bounded
from host.extensions._convert import PREVIEW_BYTES


def test_a_json_value_within_the_cap_is_decoded_as_is() -> None:
    """Under the cap nothing changes: the value, and no original size."""
    assert decode_bounded('{"a": [1, 2, "é"]}', 64) == ({"a": [1, 2, "é"]}, None)


def test_a_non_ascii_string_over_the_cap_is_cut_on_a_character_boundary_with_the_marker() -> None:
    """"é" is two bytes: a 5-byte cap keeps two of them and counts the rest in bytes."""
    text = json.dumps("é" * 10, ensure_ascii=False)
    assert decode_bounded(text, 5) == ("éé…[truncated 16 bytes]", 22)


def test_an_object_over_the_cap_becomes_the_truncated_marker_without_being_decoded() -> None:
    """Not a string: {"$truncated": true, "bytes": N, "preview": first PREVIEW_BYTES of its JSON text}."""
    text = json.dumps({"k": "v" * 5000})
    assert decode_bounded(text, 100) == ({"$truncated": True, "bytes": len(text), "preview": text[:PREVIEW_BYTES]},
                                         len(text))


def test_preliminaries_after_the_burst_are_held_and_the_latest_goes_out_when_due() -> None:
    """The burst passes at once; then one held preliminary, replaced by newer ones, goes out 1/RATE later."""
    b = ToolReplyBounds(1024, 10_000)
    assert [b.offer(str(i), 0.0) for i in range(PRELIMINARY_BURST)] == [str(i) for i in range(PRELIMINARY_BURST)]
    assert b.offer("a", 0.0) is None and b.offer("b", 0.0) is None
    assert b.due_in(0.0) == pytest.approx(1 / PRELIMINARY_RATE)
    assert b.take(0.0) is None
    assert b.take(1 / PRELIMINARY_RATE) == "b"
    assert (b.received, b.delivered) == (PRELIMINARY_BURST + 2, PRELIMINARY_BURST + 1)


def test_preliminaries_over_the_per_call_cap_are_dropped_and_counted() -> None:
    """max_preliminaries 2: the third is dropped, whatever the rate allows."""
    b = ToolReplyBounds(1024, 2)
    assert [b.offer(t, 0.0) for t in ("1", "2", "3")] == ["1", "2", None]
    assert b.summary() == "3 preliminary results: 2 delivered, 1 coalesced or dropped (1 over limits.toolPreliminaries=2)"


def test_tool_output_cap_over_the_receive_limit_is_refused_naming_the_field() -> None:
    """limits.toolOutputKb above 16384 (the 16 MiB receive cap) is a manifest error on that field."""
    with pytest.raises(ManifestError) as err:
        parse_manifest({"name": "x", "command": ["x"], "limits": {"toolOutputKb": 20_000}}, source="x.yaml")
    assert err.value.file == "x.yaml" and err.value.field == "limits.toolOutputKb"
    assert err.value.reason == "Input should be less than or equal to 16384"
