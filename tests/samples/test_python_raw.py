"""The Python samples as processes, driven over raw gRPC with the host's env contract (no host code)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from extension_sdk.proto import extension_pb2 as pb

from ._harness import Running, python_command, spawn


@pytest.fixture(scope="module")
def tools() -> Iterator[Running]:
    with spawn(python_command("tools"), name="tools") as running:
        yield running


@pytest.fixture(scope="module")
def router() -> Iterator[Running]:
    with spawn(python_command("router"), name="router") as running:
        yield running


@pytest.fixture()
def guard() -> Iterator[Running]:
    with spawn(python_command("guard"), name="guard") as running:
        yield running


# -- tools --------------------------------------------------------------------------------------


def test_tools_describes_three_tools_with_count_to_streaming(tools: Running) -> None:
    specs = {t.name: t for t in tools.describe().tools}
    assert set(specs) == {"calculator", "convert_units", "count_to"}
    assert specs["count_to"].streaming and not specs["calculator"].streaming
    assert json.loads(specs["convert_units"].input_schema_json)["properties"]["quantity"]["enum"] == ["length", "mass", "temperature"]


def test_calculator_tool_evaluates(tools: Running) -> None:
    assert tools.final_output("calculator", {"expression": "2*(3+4)"}) == 14


def test_calculator_tool_reports_code_as_a_tool_error(tools: Running) -> None:
    last = tools.execute("calculator", {"expression": "__import__('os')"})[-1]
    assert last.WhichOneof("event") == "error"
    assert last.error.name == "CalculatorError" and "not allowed" in last.error.message


def test_convert_units_tool_converts(tools: Running) -> None:
    out = tools.final_output("convert_units", {"value": 100, "from": "C", "to": "F", "quantity": "temperature"})
    assert out == {"value": 212.0, "unit": "F", "text": "100 C = 212 F"}


def test_count_to_streams_progress_then_the_total(tools: Running) -> None:
    events = tools.execute("count_to", {"n": 3})
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds == ["preliminary_json"] * 3 + ["output_json"]
    assert json.loads(events[0].preliminary_json) == {"progress": 1, "of": 3}
    assert json.loads(events[-1].output_json) == 3


def test_count_to_rejects_out_of_range_n(tools: Running) -> None:
    last = tools.execute("count_to", {"n": 1000})[-1]
    assert last.WhichOneof("event") == "error" and "from 1 to 100" in last.error.message


# -- guard --------------------------------------------------------------------------------------


def test_guard_blocks_a_destructive_tool_with_a_reason(guard: Running) -> None:
    response = guard.before_tool_call("fs_delete_file", {"path": "a.txt"})
    assert response.decision.action == pb.ToolCallDecision.BLOCK
    assert "fs_delete_file" in response.decision.reason and "read-only" in response.decision.reason


def test_guard_makes_no_decision_for_a_safe_tool(guard: Running) -> None:
    response = guard.before_tool_call("read_file", {"path": "a.txt"})
    assert not response.HasField("decision") or response.decision.action == pb.ToolCallDecision.ACTION_UNSPECIFIED
    assert not response.HasField("error")


def test_guard_turn_body_read_only_false_lets_destructive_tools_run(guard: Running) -> None:
    guard.before_turn(body={"readOnly": False}, system="S")
    response = guard.before_tool_call("delete_file")
    assert response.decision.action != pb.ToolCallDecision.BLOCK


def test_guard_env_allowlist_lets_a_named_tool_run() -> None:
    with spawn(python_command("guard"), name="guard", extra_env={"GUARD_ALLOW_TOOLS": "scratch_write"}) as guard:
        assert guard.before_tool_call("scratch_write").decision.action != pb.ToolCallDecision.BLOCK
        assert guard.before_tool_call("file_write").decision.action == pb.ToolCallDecision.BLOCK


# -- router -------------------------------------------------------------------------------------


def test_router_precise_mode_sets_temperature_zero(router: Running) -> None:
    config = router.before_turn(body={"mode": "precise"}, system="S").config
    assert config.HasField("temperature") and config.temperature == 0.0
    assert config.max_steps == 8


def test_router_continuation_turn_gets_fewer_steps(router: Running) -> None:
    assert router.before_turn(continuation=True, system="S").config.max_steps == 3


def test_router_persona_is_appended_to_system(router: Running) -> None:
    config = router.before_turn(body={"persona": "a pirate"}, system="Base.").config
    assert config.system == "Base.\n\nPersona for this turn: a pirate"


def test_router_unknown_mode_is_reported_as_a_hook_error(router: Running) -> None:
    response = router.before_turn(body={"mode": "wild"}, system="S")
    assert response.error.name == "RoutingError" and "body.mode" in response.error.message


# -- bridge users without a bridge --------------------------------------------------------------


def test_audit_log_without_bridge_reports_the_missing_permission() -> None:
    with spawn(python_command("audit_log"), name="audit_log") as audit:
        snapshot = pb.ToolResultSnapshot(tool_name="t", tool_call_id="c", input_json="{}", success=True, output_json="1")
        ack = audit.stub.AfterToolCall(
            pb.AfterToolCallRequest(context=pb.CallContext(session_id="s1"), snapshot=snapshot), metadata=audit.metadata, timeout=10
        )
        assert "workspace: read-write" in ack.error.message


def test_token_meter_accepts_chunks_without_a_bridge() -> None:
    with spawn(python_command("token_meter"), name="token_meter") as meter:
        chunk = pb.ChunkSnapshot(type="text-delta", text="hi")
        ack = meter.stub.OnChunk(pb.OnChunkRequest(context=pb.CallContext(session_id="s1"), snapshot=chunk), metadata=meter.metadata, timeout=10)
        assert not ack.HasField("error")
