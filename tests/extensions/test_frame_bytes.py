"""Observation frames assembled from pre-serialized parts parse to the frames protobuf would build."""

from __future__ import annotations

import pytest
from extension_sdk.proto import extension_pb2 as pb

from host.extensions._frames import (
    context_field,
    more_observations,
    observation_batch,
    observation_item,
    observations_frame,
    serialize,
    varint,
)


def _items() -> list[pb.Observation]:
    return [
        pb.Observation(chunk=pb.ChunkSnapshot(type="text-delta", text="héllo " * 40)),
        pb.Observation(before_tool_call=pb.ToolCallSnapshot(tool_name="lookup", tool_call_id="c1", input_json='{"k":1}')),
        pb.Observation(step_finish=pb.StepSnapshot(step_number=3, finish_reason="stop", text="x" * 300)),
    ]


@pytest.mark.parametrize("value", [1, 127, 128, 300, 16_383, 16_384, 2**32 + 5, 2**63])
def test_varint_matches_protobuf_encoding(value: int) -> None:
    assert varint(value) == pb.HostFrame(id=value).SerializeToString()[1:]  # after the field key


def test_varint_of_zero_is_one_zero_byte() -> None:
    assert varint(0) == b"\x00"


@pytest.mark.parametrize("fid", [0, 1, 200, 70_000])
def test_assembled_frame_parses_to_the_frame_protobuf_builds(fid: int) -> None:
    ctx = pb.CallContext(session_id="s-1", request_id="req-9")
    items = _items()
    data = observations_frame(fid, observation_batch(context_field(ctx), [observation_item(o) for o in items]))
    expected = pb.HostFrame(id=fid, observations=pb.ObservationBatch(context=ctx, items=items))
    assert pb.HostFrame.FromString(data) == expected
    assert data == expected.SerializeToString()


def test_empty_batch_is_a_valid_ack_request() -> None:
    data = observations_frame(7, observation_batch(context_field(pb.CallContext()), []))
    frame = pb.HostFrame.FromString(data)
    assert frame.id == 7 and frame.HasField("observations") and not frame.observations.items


def test_serialize_passes_bytes_through_and_serializes_messages() -> None:
    frame = pb.HostFrame(id=3, cancel=pb.CancelCall(id=2))
    assert serialize(frame) == frame.SerializeToString()
    assert serialize(b"\x08\x03") == b"\x08\x03"


def test_other_turns_batches_ride_in_more_observations_in_order() -> None:
    a, b, c = (pb.CallContext(session_id=f"s-{i}", request_id=f"req-{i}") for i in "abc")
    items = _items()
    data = observations_frame(5, observation_batch(context_field(a), [observation_item(items[0])]))
    data += more_observations([observation_batch(context_field(b), [observation_item(o) for o in items[1:]]),
                               observation_batch(context_field(c), [observation_item(items[0])])])
    expected = pb.HostFrame(id=5, observations=pb.ObservationBatch(context=a, items=items[:1]), more_observations=[
        pb.ObservationBatch(context=b, items=items[1:]), pb.ObservationBatch(context=c, items=items[:1])])
    assert pb.HostFrame.FromString(data) == expected
