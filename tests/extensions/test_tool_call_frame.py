"""The beforeToolCall frame a decider receives is the same bytes however the dispatcher builds it: the one-validator
path fills its frame in place, the others build the snapshot message once and copy it in. Both must give what the
keyword constructors give, every cap and optional field included."""

from __future__ import annotations

from typing import Any

import pytest

from extension_sdk.proto import extension_pb2 as pb
from host import CallContext, ToolCallSnapshot
from host.extensions._convert import MAX_VALUE_BYTES, Budget, context_to_proto, json_text_and_size

from test_dispatch import dispatcher, extension

OK = pb.ExtensionFrame(before_tool_call=pb.BeforeToolCallResponse())

CONTEXTS = [
    None,
    CallContext(session_id="s", request_id="r1"),
    CallContext(session_id="s", request_id="r1", traceparent="00-" + "a" * 32 + "-" + "b" * 16 + "-01",
                tracestate="k=v"),
    CallContext(),
]
SNAPSHOTS = [
    ToolCallSnapshot(tool_name="search", tool_call_id="call_1", input={"q": "hookwire"}, step_number=0),
    ToolCallSnapshot(tool_name="search", tool_call_id="call_1", input={"q": "hookwire"}),
    ToolCallSnapshot(tool_name="tool", tool_call_id="c", input=None, step_number=7, dynamic=True),
    ToolCallSnapshot(tool_name="tool", tool_call_id="c", input=[1, 2], dynamic=False),
    ToolCallSnapshot(tool_name="wétter", tool_call_id="c-é", input={"city": "Zürich ☃"}, step_number=2),
    ToolCallSnapshot(tool_name="n" * 2000, tool_call_id="c", input={"k": 1}),
    ToolCallSnapshot(tool_name="big", tool_call_id="c", input={"blob": "x" * (MAX_VALUE_BYTES + 10)}),
]


def reference(snapshot: ToolCallSnapshot, context: CallContext | None) -> pb.HostFrame:
    """The frame as the keyword constructors build it (what the dispatcher sent before it filled frames in place)."""
    text, size = json_text_and_size(snapshot.input)
    name, call_id = snapshot.tool_name, snapshot.tool_call_id
    if size <= MAX_VALUE_BYTES and len(name) <= 1024 and len(call_id) <= 1024 and name.isascii() and call_id.isascii():
        snap = pb.ToolCallSnapshot(tool_name=name, tool_call_id=call_id, input_json=text)
    else:
        budget = Budget()
        snap = pb.ToolCallSnapshot(tool_name=budget.text(name, 1024), tool_call_id=budget.text(call_id, 1024),
                                   input_json=budget.json(snapshot.input))
    if snapshot.step_number is not None:
        snap.step_number = snapshot.step_number
    if snapshot.dynamic is not None:
        snap.dynamic = snapshot.dynamic
    request = pb.BeforeToolCallRequest(snapshot=snap, want_decision=True)
    if context is not None:
        request.context.CopyFrom(context_to_proto(context))
    return pb.HostFrame(before_tool_call=request)


async def sent_frames(others: dict[str, Any], snapshot: ToolCallSnapshot, context: CallContext | None) -> list[bytes]:
    exts = [extension("v", {"beforeToolCall": {"decisions": True}}),
            *(extension(name, {"beforeToolCall": policy}) for name, policy in others.items())]
    d, scripted, _ = dispatcher(exts, {e.name: OK for e in exts})
    await d.before_tool_call(snapshot, context, None)
    return [scripted.sent[e.name].SerializeToString(deterministic=True) for e in exts if e.name in scripted.sent]


@pytest.mark.parametrize("others", [{}, {"obs": {}}, {"v2": {"decisions": True}},
                                    {"m": {"decisions": True, "phase": "mutate"}}],
                         ids=["one-validator", "with-observer", "two-validators", "with-mutator"])
@pytest.mark.parametrize("context", CONTEXTS, ids=["no-context", "context", "traced", "empty-context"])
@pytest.mark.parametrize("snapshot", SNAPSHOTS, ids=["plain", "no-step", "null-dynamic", "static", "non-ascii",
                                                     "long-name", "over-cap"])
async def test_decider_frame_is_the_keyword_constructors_bytes(others: dict[str, Any], context: CallContext | None,
                                                               snapshot: ToolCallSnapshot) -> None:
    want = reference(snapshot, context).SerializeToString(deterministic=True)
    frames = await sent_frames(others, snapshot, context)
    assert frames and all(f == want for f in frames)
