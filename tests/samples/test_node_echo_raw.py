"""node_echo (Node.js, no SDK) driven over raw gRPC with the host's env contract."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import grpc
import pytest

from extension_sdk.proto import extension_pb2 as pb

from ._harness import NODE_DIR, REPO, Running, node_command, node_missing_reason, spawn

_reason = node_missing_reason()
pytestmark = pytest.mark.skipif(_reason is not None, reason=f"node_echo cannot run: {_reason}")


@pytest.fixture(scope="module")
def node() -> Iterator[Running]:
    with spawn(node_command(), cwd=REPO, name="node_echo") as running:
        yield running


def test_describe_names_hooks_and_tools_without_connect(node: Running) -> None:
    info = node.describe()
    assert (info.name, info.protocol_version) == ("node_echo", "1")
    assert "beforeTurn" in info.hooks
    assert {t.name for t in info.tools} == {"echo", "observed", "fetch", "trace"}
    assert "connect" not in info.features
    assert json.loads(next(t for t in info.tools if t.name == "echo").input_schema_json)["required"] == ["text"]


def test_call_without_token_is_unauthenticated(node: Running) -> None:
    with pytest.raises(grpc.RpcError) as err:
        node.stub.Describe(pb.DescribeRequest(protocol_version="1"), timeout=10)
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_call_with_wrong_token_is_unauthenticated(node: Running) -> None:
    with pytest.raises(grpc.RpcError) as err:
        node.stub.Describe(pb.DescribeRequest(protocol_version="1"), metadata=(("x-hookwire-token", "nope"),), timeout=10)
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_echo_returns_text_reversed_with_node_prefix(node: Running) -> None:
    assert node.final_output("echo", {"text": "hookwire"}) == "node: eriwkooh"


def test_echo_without_text_reports_a_tool_error(node: Running) -> None:
    events = node.execute("echo", {"nope": 1})
    assert events[-1].WhichOneof("event") == "error"
    assert "input.text" in events[-1].error.message


def test_before_turn_appends_to_the_system_prompt(node: Running) -> None:
    response = node.before_turn(system="You are terse.", model_id="m")
    assert response.config.system.startswith("You are terse.\n\n")
    assert "Node.js" in response.config.system
    assert not response.config.HasField("max_steps")


def test_observations_are_accepted_and_counted(node: Running) -> None:
    before = node.final_output("observed", {})
    ctx = pb.CallContext(session_id="s1", request_id="r1")
    step = pb.StepSnapshot(step_number=0, finish_reason="stop", text="hi")
    node.stub.OnStepFinish(pb.OnStepFinishRequest(context=ctx, snapshot=step), metadata=node.metadata, timeout=10)
    batch = pb.ObservationBatch(
        context=ctx,
        items=[
            pb.Observation(chunk=pb.ChunkSnapshot(type="text-delta", text="h")),
            pb.Observation(after_tool_call=pb.ToolResultSnapshot(tool_name="t", tool_call_id="c", input_json="{}")),
        ],
    )
    ack = node.stub.Observe(batch, metadata=node.metadata, timeout=10)
    assert ack.handled == 2
    after = node.final_output("observed", {})
    assert after["onStepFinish"] == before["onStepFinish"] + 1
    assert after["onChunk"] == before["onChunk"] + 1
    assert after["afterToolCall"] == before["afterToolCall"] + 1


def test_shutdown_rpc_makes_the_process_exit() -> None:
    with spawn(node_command(), cwd=REPO, name="node_echo") as node:
        node.stub.Shutdown(pb.ShutdownRequest(grace_ms=500), metadata=node.metadata, timeout=10)
        assert node.proc.wait(timeout=10) == 0


def test_stdin_eof_makes_the_process_exit() -> None:
    with spawn(node_command(), cwd=REPO, name="node_echo") as node:
        assert node.proc.stdin is not None
        node.proc.stdin.close()
        assert node.proc.wait(timeout=10) == 0


def test_without_magic_cookie_it_explains_and_exits_1() -> None:
    result = subprocess.run(node_command(), cwd=NODE_DIR, env={"PATH": "/usr/bin:/bin"}, capture_output=True, timeout=20)
    assert result.returncode == 1
    assert b"hookwire extension" in result.stderr
    assert result.stdout == b""
