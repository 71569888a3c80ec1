"""The per-chunk path's hand-written record is byte for byte what protobuf writes for the same chunk."""

from __future__ import annotations

import pytest

from host.extensions._chunk_item import chunk_item
from host.extensions._convert import MAX_TEXT_BYTES, chunk_to_observation
from host.extensions._frames import observation_item
from host.extensions._snapshots import ChunkSnapshot

CASES = [
    ("text-delta", "hello", None, None),
    ("text-delta", "", None, None),  # an empty optional text is still present
    ("", "x", None, None),  # an empty type is not written at all (proto3 scalar)
    ("tool-call", None, "lookup", "call_1"),
    ("tool-input-delta", "é" * 70, None, "call_2"),  # 140 bytes: a two-byte length
    ("text-delta", "z" * 20_000, None, None),  # nested lengths over 16 KB: three-byte varints
]


@pytest.mark.parametrize(("type_", "text", "tool_name", "tool_call_id"), CASES)
def test_chunk_record_equals_protobufs(type_: str, text: str | None, tool_name: str | None,
                                       tool_call_id: str | None) -> None:
    snapshot = ChunkSnapshot(type=type_, text=text, tool_name=tool_name, tool_call_id=tool_call_id)
    assert chunk_item(type_, text, tool_name, tool_call_id) == observation_item(chunk_to_observation(snapshot))


def test_text_protobuf_would_refuse_takes_the_bounded_path() -> None:
    assert chunk_item("text-delta", "bad \ud800 surrogate", None, None) is None


def test_text_over_the_inline_bound_takes_the_bounded_path() -> None:
    assert chunk_item("text-delta", "x" * (MAX_TEXT_BYTES // 4 + 1), None, None) is None
