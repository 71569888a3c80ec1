"""The per-chunk path's encoding: an onChunk observation written straight to its `ObservationBatch.items` record.

A streamed turn enqueues one observation per chunk. Building a `ChunkSnapshot` model, then a protobuf `Observation`,
then serializing it cost ~12 µs per chunk; the record is four optional strings under two length prefixes, so it is
written here by hand (plain protobuf wire format, byte for byte what `observation_item(chunk_to_observation(...))`
gives: tests/extensions/test_chunk_item.py). `chunk_item` returns None when the slow path must decide (a text over
the inline bound, or a string protobuf would refuse): the caller then builds the snapshot as before.
"""

from __future__ import annotations

from ._convert import MAX_TEXT_BYTES
from ._frames import varint

_ITEM = b"\x12"  # ObservationBatch.items = 2, length-delimited
_CHUNK = b"\x22"  # Observation.chunk = 4, length-delimited
_TYPE, _TEXT, _TOOL_NAME, _TOOL_CALL_ID = b"\x0a", b"\x12", b"\x1a", b"\x22"  # ChunkSnapshot fields 1-4
_INLINE_TEXT = MAX_TEXT_BYTES // 4  # longer texts take the bounded path (_convert.chunk_to_observation)
_LEN = [bytes((n,)) for n in range(128)]  # one-byte varints


def _field(key: bytes, value: str) -> bytes:
    data = value.encode()
    n = len(data)
    return key + (_LEN[n] if n < 128 else varint(n)) + data


def chunk_item(type_: str, text: str | None, tool_name: str | None, tool_call_id: str | None) -> bytes | None:
    """The serialized items record of `Observation(chunk=ChunkSnapshot(...))`, or None for the bounded path."""
    try:
        body = _field(_TYPE, type_) if type_ else b""  # proto3 scalar: an empty type is not written
        if text is not None:  # the optional fields are written when set, empty or not
            if len(text) > _INLINE_TEXT:
                return None
            body += _field(_TEXT, text)
        if tool_name is not None:
            body += _field(_TOOL_NAME, tool_name)
        if tool_call_id is not None:
            body += _field(_TOOL_CALL_ID, tool_call_id)
    except UnicodeEncodeError:  # lone surrogates: the bounded path replaces them as protobuf needs
        return None
    n = len(body)
    obs = _CHUNK + (_LEN[n] if n < 128 else varint(n)) + body
    n = len(obs)
    return _ITEM + (_LEN[n] if n < 128 else varint(n)) + obs
