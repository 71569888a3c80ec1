"""Describe and ExecuteTool against real extension processes."""

from __future__ import annotations

import json
import re
from typing import Any

from sdk_processes import Running

from extension_sdk.proto import PROTOCOL_VERSION, extension_pb2 as pb


def run_tool(ext: Running, name: str, args: Any) -> list[pb.ToolEvent]:
    request = pb.ExecuteToolRequest(name=name, input_json=json.dumps(args), tool_call_id="call-1")
    return list(ext.stub.ExecuteTool(request, metadata=ext.md, timeout=10))


def output(events: list[pb.ToolEvent]) -> Any:
    assert [e.WhichOneof("event") for e in events][-1] == "output_json", events
    return json.loads(events[-1].output_json)


def test_handshake_line_names_protocol_and_unix_target(greeter: Running) -> None:
    assert re.fullmatch(r"hookwire\|1\|unix:/\S+/ext\.sock\n", greeter.handshake)


def test_describe_lists_hooks_tools_features_and_protocol(greeter: Running) -> None:
    desc = greeter.stub.Describe(pb.DescribeRequest(protocol_version="1"), metadata=greeter.md, timeout=10)
    assert (desc.name, desc.version, desc.protocol_version) == ("greeter", "1.0.0", PROTOCOL_VERSION)
    assert list(desc.hooks) == ["beforeTurn"]
    assert list(desc.features) == ["connect", "connect-tools", "prelude", "multi-batch"]
    assert desc.sdk.startswith("extension_sdk/")
    [tool] = desc.tools
    assert (tool.name, tool.description, tool.streaming) == ("greet", "Greets someone", False)
    assert json.loads(tool.input_schema_json)["required"] == ["name"]


def test_greet_world_says_hello(greeter: Running) -> None:
    assert output(run_tool(greeter, "greet", {"name": "World"})) == "Hello, World!"


def test_add_sync_tool(mathx: Running) -> None:
    assert output(run_tool(mathx, "add", {"a": 3, "b": 4})) == 7


def test_multiply_async_tool(mathx: Running) -> None:
    assert output(run_tool(mathx, "multiply", {"a": 5, "b": 6})) == 30


def test_throwing_tool_gives_error_event_and_process_lives_on(mathx: Running) -> None:
    [event] = run_tool(mathx, "explode", {})
    assert event.WhichOneof("event") == "error"
    assert (event.error.name, event.error.message) == ("RuntimeError", "kaboom")
    assert "explode" in event.error.stack
    assert mathx.proc.poll() is None
    assert output(run_tool(mathx, "add", {"a": 1, "b": 1})) == 2


def test_unknown_tool_gives_error_event_naming_it(mathx: Running) -> None:
    [event] = run_tool(mathx, "nope", {})
    assert event.WhichOneof("event") == "error"
    assert "'nope'" in event.error.message and "'math'" in event.error.message


def test_streaming_tool_sends_preliminaries_then_final(mathx: Running) -> None:
    events = run_tool(mathx, "count", {"n": 3})
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds == ["preliminary_json"] * 3 + ["output_json"]
    assert [json.loads(e.preliminary_json) for e in events[:3]] == [{"step": 1}, {"step": 2}, {"step": 3}]
    assert json.loads(events[-1].output_json) == {"done": 3}


def test_streaming_tool_is_described_as_streaming(mathx: Running) -> None:
    desc = mathx.stub.Describe(pb.DescribeRequest(protocol_version="1"), metadata=mathx.md, timeout=10)
    assert {t.name: t.streaming for t in desc.tools}["count"] is True


def test_pydantic_parameters_give_schema_and_validated_instance(mathx: Running) -> None:
    desc = mathx.stub.Describe(pb.DescribeRequest(protocol_version="1"), metadata=mathx.md, timeout=10)
    schema = json.loads({t.name: t for t in desc.tools}["manhattan"].input_schema_json)
    assert set(schema["properties"]) == {"x", "y"}
    assert output(run_tool(mathx, "manhattan", {"x": 3, "y": -4})) == 7


def test_pydantic_validation_failure_is_a_tool_error(mathx: Running) -> None:
    [event] = run_tool(mathx, "manhattan", {"x": "left"})
    assert event.WhichOneof("event") == "error"
    assert event.error.name == "ValidationError"
