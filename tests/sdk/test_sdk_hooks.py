"""Hook RPCs and the Connect stream against real extension processes."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from sdk_processes import Running

from extension_sdk.proto import extension_pb2 as pb


def before_turn(ext: Running, body: Any = None) -> pb.BeforeTurnResponse:
    snap = pb.TurnSnapshot(system="be nice", tool_names=["greeter_greet"], message_count=1, model_id="m")
    if body is not None:
        snap.body_json = json.dumps(body)
    req = pb.BeforeTurnRequest(context=pb.CallContext(session_id="s1"), snapshot=snap)
    return ext.stub.BeforeTurn(req, metadata=ext.md, timeout=10)


def test_before_turn_max_steps_42(greeter: Running) -> None:
    resp = before_turn(greeter)
    assert resp.HasField("config") and not resp.HasField("error")
    assert resp.config.HasField("max_steps") and resp.config.max_steps == 42
    assert not resp.config.HasField("extra_json")


def test_before_turn_wrong_type_lands_in_extra_json(greeter: Running) -> None:
    resp = before_turn(greeter, {"patch": {"maxSteps": "ten", "temperature": 0.5, "stopWhen": "x"}})
    assert not resp.config.HasField("max_steps")
    assert resp.config.temperature == 0.5
    assert json.loads(resp.config.extra_json) == {"maxSteps": "ten", "stopWhen": "x"}


def test_before_turn_accepts_snake_case(greeter: Running) -> None:
    resp = before_turn(greeter, {"patch": {"max_output_tokens": 100, "active_tools": ["a"]}})
    assert resp.config.max_output_tokens == 100
    assert list(resp.config.active_tools.values) == ["a"]


def test_before_tool_call_returns_block_decision(mathx: Running) -> None:
    snap = pb.ToolCallSnapshot(tool_name="rm", tool_call_id="c1", input_json='{"path": "/"}')
    req = pb.BeforeToolCallRequest(context=pb.CallContext(session_id="s1"), snapshot=snap, want_decision=True)
    resp = mathx.stub.BeforeToolCall(req, metadata=mathx.md, timeout=10)
    assert resp.decision.action == pb.ToolCallDecision.BLOCK
    assert resp.decision.reason == "rm is not allowed"


def test_hook_not_served_returns_empty_response(mathx: Running) -> None:
    req = pb.BeforeTurnRequest(snapshot=pb.TurnSnapshot(system="x"))
    resp = mathx.stub.BeforeTurn(req, metadata=mathx.md, timeout=10)
    assert not resp.HasField("config") and not resp.HasField("error")


def test_raising_observation_handler_reports_hook_error(mathx: Running) -> None:
    req = pb.OnChunkRequest(snapshot=pb.ChunkSnapshot(type="text-delta", text="boom"))
    ack = mathx.stub.OnChunk(req, metadata=mathx.md, timeout=10)
    assert (ack.error.hook, ack.error.name, ack.error.message) == ("onChunk", "ValueError", "chunk handler exploded")


def frames(items: list[pb.HostFrame]) -> Iterator[pb.HostFrame]:
    yield from items


def recorded(ext: Running) -> list[dict[str, Any]]:
    [event] = ext.stub.ExecuteTool(pb.ExecuteToolRequest(name="recorded", input_json="{}"), metadata=ext.md, timeout=10)
    return json.loads(event.output_json)


def test_connect_answers_in_order_with_ids_and_acks_observations(mathx: Running) -> None:
    ctx = pb.CallContext(session_id="s-connect")
    batch = pb.ObservationBatch(
        context=ctx,
        items=[
            pb.Observation(chunk=pb.ChunkSnapshot(type="text-delta", text="connect-1")),
            pb.Observation(chunk=pb.ChunkSnapshot(type="text-delta", text="boom")),
            pb.Observation(
                after_tool_call=pb.ToolResultSnapshot(
                    tool_name="add", tool_call_id="c9", input_json='{"a": 1}', step_number=2,
                    duration_ms=1.5, success=True, output_json="2",
                )
            ),
            pb.Observation(
                step_finish=pb.StepSnapshot(
                    step_number=2, finish_reason="stop", text="hi", usage=pb.Usage(input_tokens=3, total_tokens=5)
                )
            ),
        ],
    )
    no_answer = pb.HostFrame(
        id=0, observations=pb.ObservationBatch(items=[pb.Observation(chunk=pb.ChunkSnapshot(type="text-delta", text="connect-2"))])
    )
    decide = pb.HostFrame(
        id=7,
        before_tool_call=pb.BeforeToolCallRequest(
            context=ctx, snapshot=pb.ToolCallSnapshot(tool_name="cached", tool_call_id="c2", input_json="{}"), want_decision=True
        ),
    )
    out = list(mathx.stub.Connect(frames([pb.HostFrame(id=5, observations=batch), no_answer, decide]), metadata=mathx.md, timeout=10))
    assert [f.id for f in out] == [5, 7]
    ack = out[0].observations
    assert ack.handled == 4
    assert [(e.hook, e.name) for e in ack.errors] == [("onChunk", "ValueError")]
    decision = out[1].before_tool_call.decision
    assert decision.action == pb.ToolCallDecision.SUBSTITUTE and json.loads(decision.output_json) == {"cached": True}
    tail = recorded(mathx)[-5:]
    assert [(s["hook"], s.get("text") or s.get("toolName")) for s in tail] == [
        ("onChunk", "connect-1"), ("afterToolCall", "add"), ("onStepFinish", "hi"), ("onChunk", "connect-2"),
        ("beforeToolCall", "cached"),
    ]
    assert tail[1] == {
        "hook": "afterToolCall", "toolName": "add", "toolCallId": "c9", "input": {"a": 1}, "stepNumber": 2,
        "durationMs": 1.5, "success": True, "output": 2,
    }
    assert tail[2]["usage"] == {"inputTokens": 3, "totalTokens": 5}
    assert "reasoningText" not in tail[2]


def test_observe_unary_batch_reaches_handlers(mathx: Running) -> None:
    batch = pb.ObservationBatch(items=[pb.Observation(chunk=pb.ChunkSnapshot(type="tool-call", tool_name="add", tool_call_id="c3"))])
    ack = mathx.stub.Observe(batch, metadata=mathx.md, timeout=10)
    assert ack.handled == 1 and not ack.errors
    assert recorded(mathx)[-1] == {"hook": "onChunk", "type": "tool-call", "toolName": "add", "toolCallId": "c3"}


def test_connect_answers_a_frame_of_unknown_kind_with_its_id(greeter: Running) -> None:
    out = list(greeter.stub.Connect(frames([pb.HostFrame(id=3)]), metadata=greeter.md, timeout=10))
    assert [(f.id, f.WhichOneof("body")) for f in out] == [(3, None)]


def _tool_frame(fid: int, name: str, args: dict[str, Any]) -> pb.HostFrame:
    return pb.HostFrame(id=fid, execute_tool=pb.ExecuteToolRequest(name=name, input_json=json.dumps(args)))


def test_connect_streams_a_tools_events_under_its_frame_id(mathx: Running) -> None:
    out = list(mathx.stub.Connect(frames([_tool_frame(1, "count", {"n": 3})]), metadata=mathx.md, timeout=10))
    events = [(f.id, f.tool_event.WhichOneof("event")) for f in out]
    assert events == [(1, "preliminary_json")] * 3 + [(1, "output_json")]


def test_connect_runs_a_slow_tool_without_holding_up_the_frames_after_it(mathx: Running) -> None:
    hook = pb.HostFrame(id=2, before_tool_call=pb.BeforeToolCallRequest(
        snapshot=pb.ToolCallSnapshot(tool_name="cached", tool_call_id="c1", input_json="{}"), want_decision=True))
    out = list(mathx.stub.Connect(frames([_tool_frame(1, "nap", {"seconds": 0.5}), hook]), metadata=mathx.md, timeout=10))
    assert [f.id for f in out] == [2, 1]
    assert out[1].tool_event.WhichOneof("event") == "output_json"


def test_connect_cancel_frame_stops_a_tool_call(mathx: Running) -> None:
    cancel = pb.HostFrame(cancel=pb.CancelCall(id=1))
    t0 = time.monotonic()
    out = list(mathx.stub.Connect(frames([_tool_frame(1, "count", {"n": 3, "delay": 5}), cancel]),
                                  metadata=mathx.md, timeout=10))
    assert time.monotonic() - t0 < 4
    assert all(f.tool_event.WhichOneof("event") == "preliminary_json" for f in out)


def test_connect_reports_errors_of_unanswered_observation_frames_in_the_next_ack(mathx: Running) -> None:
    boom = pb.ObservationBatch(items=[pb.Observation(chunk=pb.ChunkSnapshot(type="text-delta", text="boom"))])
    out = list(mathx.stub.Connect(frames([pb.HostFrame(id=0, observations=boom),
                                          pb.HostFrame(id=4, observations=pb.ObservationBatch())]),
                                  metadata=mathx.md, timeout=10))
    assert [f.id for f in out] == [4]
    assert [(e.hook, e.name) for e in out[0].observations.errors] == [("onChunk", "ValueError")]
