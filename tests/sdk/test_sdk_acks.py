"""The SDK's ObservationAck.handled on Connect counts every observation since its previous ack: the items of id-0
frames and of preludes too (docs/protocol.md [4.4], [4.5])."""

from __future__ import annotations

from sdk_processes import Running

from extension_sdk.proto import extension_pb2 as pb


def _chunks(*texts: str) -> pb.ObservationBatch:
    return pb.ObservationBatch(items=[pb.Observation(chunk=pb.ChunkSnapshot(type="text-delta", text=t)) for t in texts])


def test_an_ack_counts_the_id0_frames_and_preludes_since_the_previous_ack(mathx: Running) -> None:
    carrier = pb.HostFrame(id=2, before_tool_call=pb.BeforeToolCallRequest(
        snapshot=pb.ToolCallSnapshot(tool_name="add", tool_call_id="c1", input_json="{}"), want_decision=True))
    carrier.prelude.CopyFrom(_chunks("p1", "p2"))
    sent = [
        pb.HostFrame(id=0, observations=_chunks("a", "b", "c")),
        carrier,
        pb.HostFrame(id=3, observations=_chunks("d")),
        pb.HostFrame(id=4, observations=_chunks()),
    ]
    out = list(mathx.stub.Connect(iter(sent), metadata=mathx.md, timeout=10))
    assert [(f.id, f.WhichOneof("body")) for f in out] == [(2, "before_tool_call"), (3, "observations"),
                                                           (4, "observations")]
    assert [out[1].observations.handled, out[2].observations.handled] == [3 + 2 + 1, 0]
