"""Observation frames assembled from pre-serialized parts.

An observation goes to every subscriber, so it is serialized once (`observation_item`) and each extension's
frame is the concatenation of those bytes under its own header (`observations_frame`). This is plain protobuf
wire format: a repeated message field is a run of (key, length, bytes) records, and a `HostFrame` parsed from
these bytes equals the one protobuf would build from the same messages (tests/extensions/test_frame_bytes.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from extension_sdk.proto import extension_pb2 as pb

_FRAME_ID = b"\x08"  # HostFrame.id = 1, varint
_FRAME_OBSERVATIONS = b"\x22"  # HostFrame.observations = 4, length-delimited
_BATCH_CONTEXT = b"\x0a"  # ObservationBatch.context = 1, length-delimited
_BATCH_ITEM = b"\x12"  # ObservationBatch.items = 2, length-delimited


def varint(value: int) -> bytes:
    """A protobuf base-128 varint (value >= 0)."""
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def observation_item(obs: pb.Observation) -> bytes:
    """One `ObservationBatch.items` record: serialized once, shared by every subscriber's frame."""
    data = obs.SerializeToString()
    return _BATCH_ITEM + varint(len(data)) + data


def context_field(ctx: pb.CallContext) -> bytes:
    """The `ObservationBatch.context` record."""
    data = ctx.SerializeToString()
    return _BATCH_CONTEXT + varint(len(data)) + data


def observation_batch(context: bytes, items: list[bytes]) -> bytes:
    """A serialized `ObservationBatch` (context record + item records)."""
    return context + b"".join(items)


def observations_frame(fid: int, batch: bytes) -> bytes:
    """A serialized `HostFrame` with `id` (0: no answer wanted, left out) and `observations`."""
    head = _FRAME_ID + varint(fid) if fid else b""
    return head + _FRAME_OBSERVATIONS + varint(len(batch)) + batch


_FRAME_MORE_OBSERVATIONS = b"\x4a"  # HostFrame.more_observations = 9, length-delimited, repeated


def more_observations(batches: Iterable[bytes]) -> bytes:
    """`HostFrame.more_observations` records (feature "multi-batch"), appended to a serialized observations frame."""
    return b"".join(_FRAME_MORE_OBSERVATIONS + varint(len(b)) + b for b in batches)


def serialize(frame: pb.HostFrame | bytes) -> bytes:
    """The Connect stream's request serializer: frames arrive as messages or already as bytes."""
    return frame if type(frame) is bytes else frame.SerializeToString()  # type: ignore[union-attr]


_FRAME_PRELUDE = b"\x3a"  # HostFrame.prelude = 7, length-delimited


def with_prelude(frame: pb.HostFrame, batch: bytes) -> bytes:
    """A serialized `HostFrame` carrying `batch` (a serialized ObservationBatch) as its `prelude`."""
    return frame.SerializeToString() + _FRAME_PRELUDE + varint(len(batch)) + batch
