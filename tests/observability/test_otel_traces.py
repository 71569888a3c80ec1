"""OpenTelemetry through a real turn with two extensions, one Python (SDK) and one Node (sample_extensions/node_echo,
no SDK): the GenAI span tree, a span per extension hook, both extensions joining the host's trace (each receives its
call's traceparent; the Python SDK makes it its current OpenTelemetry context; the Node one also gets it in gRPC
metadata on its unary calls), a HostBridge call carrying it back into a `hookwire.bridge` span, and the
extensions' stderr lines logged as JSON with the trace id of the call they were written in.

The host app runs in a subprocess (tests/observability/fixtures/traced_turn.py) because the SDK's tracer provider is
process-global: configuring it here would make every later test in this process record spans.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
NODE_ECHO = Path(__file__).parents[2] / "sample_extensions" / "node_echo"


@pytest.fixture(scope="module")
def traced() -> dict[str, Any]:
    pytest.importorskip("opentelemetry.sdk", reason="opentelemetry-sdk is in the dev extra")
    if shutil.which("node") is None or not (NODE_ECHO / "node_modules").is_dir():
        pytest.skip("node_echo cannot run: no node, or no node_modules (make node-deps)")
    proc = subprocess.run([sys.executable, str(FIXTURES / "traced_turn.py"), str(NODE_ECHO / "manifest.yaml"),
                           str(FIXTURES / "traced.yaml")],
                          capture_output=True, text=True, timeout=120, cwd=FIXTURES)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def by_name(traced: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for span in traced["spans"]:
        out.setdefault(span["name"], []).append(span)
    return out


def test_one_turn_is_one_trace_rooted_at_invoke_agent(traced: dict[str, Any]) -> None:
    spans = by_name(traced)
    (root,) = spans["invoke_agent Traced"]
    assert root["parent_id"] is None
    assert {s["trace_id"] for s in traced["spans"]} == {root["trace_id"]}
    assert root["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert root["attributes"]["gen_ai.conversation.id"] == "otel-s1"
    assert root["attributes"]["hookwire.turn.status"] == "completed"


def test_the_span_tree_has_the_hooks_model_calls_tools_and_bridge_call_in_place(traced: dict[str, Any]) -> None:
    spans = by_name(traced)
    names = {s["span_id"]: s["name"] for s in traced["spans"]}
    tree = sorted((s["name"], s["attributes"].get("hookwire.extension", ""), names.get(s["parent_id"], "-"))
                  for s in traced["spans"])
    assert tree == [
        ("chat hookwire/scripted", "", "invoke_agent Traced"), ("chat hookwire/scripted", "", "invoke_agent Traced"),
        ("execute_tool node_echo_trace", "", "invoke_agent Traced"),
        ("execute_tool traced_report", "", "invoke_agent Traced"),
        ("hookwire.bridge GetSessionInfo", "traced", "execute_tool traced_report"),  # the report tool asked the host
        ("hookwire.hook beforeToolCall", "traced", "execute_tool node_echo_trace"),
        ("hookwire.hook beforeToolCall", "traced", "execute_tool traced_report"),
        ("hookwire.hook beforeTurn", "node_echo", "invoke_agent Traced"),
        ("hookwire.hook beforeTurn", "traced", "invoke_agent Traced"),
        ("invoke_agent Traced", "", "-"),
    ]
    assert len(spans["invoke_agent Traced"]) == 1


def test_genai_attributes_of_the_model_call_and_the_tool(traced: dict[str, Any]) -> None:
    spans = by_name(traced)
    first, last = spans["chat hookwire/scripted"]
    assert first["kind"] == "CLIENT"
    assert {k: first["attributes"][k] for k in ("gen_ai.operation.name", "gen_ai.provider.name",
                                                 "gen_ai.request.model", "gen_ai.response.finish_reasons")} == {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "hookwire", "gen_ai.request.model": "hookwire/scripted",
        "gen_ai.response.finish_reasons": ["tool_calls"]}
    assert last["attributes"]["gen_ai.response.finish_reasons"] == ["stop"]
    assert last["attributes"]["gen_ai.usage.output_tokens"] > 0
    tool = spans["execute_tool traced_report"][0]["attributes"]
    assert (tool["gen_ai.tool.name"], tool["gen_ai.tool.type"]) == ("traced_report", "extension")
    assert tool["gen_ai.tool.call.id"]


def test_hook_spans_carry_the_extension_and_the_outcome_the_dispatcher_decided(traced: dict[str, Any]) -> None:
    spans = by_name(traced)
    (turn,) = [s["attributes"] for s in spans["hookwire.hook beforeTurn"]
               if s["attributes"]["hookwire.extension"] == "traced"]
    decide = spans["hookwire.hook beforeToolCall"][0]["attributes"]
    assert turn == {"hookwire.hook": "beforeTurn", "hookwire.extension": "traced", "hookwire.outcome": "ok",
                    "hookwire.detail": "set system"}
    assert (decide["hookwire.extension"], decide["hookwire.outcome"]) == ("traced", "ok")


def span_of(traced: dict[str, Any], name: str, extension: str = "", parent: str = "") -> str:
    (span,) = [s for s in traced["spans"] if s["name"] == name
               and (not extension or s["attributes"].get("hookwire.extension") == extension)
               and (not parent or s["parent_id"] == parent)]
    return str(span["span_id"])


def test_the_python_extension_runs_inside_the_hook_span_the_host_sent(traced: dict[str, Any]) -> None:
    spans = by_name(traced)
    trace_id = spans["invoke_agent Traced"][0]["trace_id"]
    before_turn = span_of(traced, "hookwire.hook beforeTurn", "traced")
    tool = span_of(traced, "execute_tool traced_report")
    decider = span_of(traced, "hookwire.hook beforeToolCall", parent=tool)
    seen_in_before_turn = traced["system"]
    (report,) = traced["tool"]
    assert seen_in_before_turn["traceparent"].startswith(f"00-{trace_id}-{before_turn}-")  # version-trace-span-flags
    assert (seen_in_before_turn["trace_id"], seen_in_before_turn["parent_span_id"]) == (trace_id, before_turn)
    assert report["decider"]["parent_span_id"] == decider and report["decider"]["trace_id"] == trace_id
    assert report["tool"]["parent_span_id"] == tool and report["tool"]["trace_id"] == trace_id


def test_the_node_extension_gets_its_calls_trace_context_in_call_context_and_metadata(traced: dict[str, Any]) -> None:
    trace_id = by_name(traced)["invoke_agent Traced"][0]["trace_id"]
    before_turn = span_of(traced, "hookwire.hook beforeTurn", "node_echo")
    tool = span_of(traced, "execute_tool node_echo_trace")
    (seen,) = traced["node"]
    assert seen["beforeTurn"]["traceparent"] == f"00-{trace_id}-{before_turn}-03"  # sampled | random trace id
    assert seen["beforeTurn"]["metadataTraceparent"] == seen["beforeTurn"]["traceparent"]
    assert seen["call"]["traceparent"] == f"00-{trace_id}-{tool}-03"
    assert seen["call"]["metadataTraceparent"] == seen["call"]["traceparent"]


def test_a_hostbridge_call_carries_the_trace_back_into_a_bridge_span(traced: dict[str, Any]) -> None:
    spans = by_name(traced)
    (bridge,) = spans["hookwire.bridge GetSessionInfo"]
    assert bridge["trace_id"] == spans["invoke_agent Traced"][0]["trace_id"]
    assert bridge["parent_id"] == span_of(traced, "execute_tool traced_report")
    assert (bridge["kind"], bridge["status"]) == ("SERVER", "UNSET")
    assert bridge["attributes"] == {"hookwire.bridge.method": "GetSessionInfo", "hookwire.extension": "traced",
                                    "gen_ai.conversation.id": "otel-s1", "hookwire.outcome": "ok"}
    assert traced["tool"][0]["session"] == "otel-s1"


def test_extension_stderr_lines_are_logged_with_the_trace_of_their_call(traced: dict[str, Any]) -> None:
    trace_id = by_name(traced)["invoke_agent Traced"][0]["trace_id"]
    tool = span_of(traced, "execute_tool node_echo_trace")
    (line,) = [r for r in traced["logs"] if r["message"].startswith("[node_echo] tool trace ")]
    assert {k: v for k, v in line.items() if k not in ("time", "request_id")} == {
        "level": "INFO", "logger": "hookwire.ext.node_echo", "message": f"[node_echo] tool trace traceparent=00-{trace_id}-{tool}-03",
        "extension": "node_echo", "hook": "tool:trace", "session_id": "otel-s1", "trace_id": trace_id, "span_id": tool}
    assert line["request_id"].startswith("req_")
    (serving,) = [r for r in traced["logs"] if r["message"].startswith("[node_echo] serving on ")]
    assert "trace_id" not in serving and serving["extension"] == "node_echo"  # at start-up: no call's line

#: An observer's batch is one row per observed hook when its flush accounts for the turn's observations, else one
#: merged "observe" row (which depends on when the batches were acknowledged): left out of the exact counts below.
OBSERVED = ("observe", "afterToolCall", "onStepFinish", "onChunk")


def test_metrics_count_hook_outcomes_and_token_usage(traced: dict[str, Any]) -> None:
    points = traced["metrics"]
    outcomes = sorted((p["attributes"]["hookwire.hook"], p["attributes"]["hookwire.outcome"], p["value"])
                      for p in points if p["name"] == "hookwire.hook.outcomes"
                      and p["attributes"]["hookwire.hook"] not in OBSERVED)  # node_echo's Observe batches: timing-bound
    assert outcomes == [("beforeToolCall", "ok", 2), ("beforeTurn", "ok", 1), ("beforeTurn", "ok", 1),
                        ("tool:report", "ok", 1), ("tool:trace", "ok", 1)]
    durations = sorted((p["attributes"]["hookwire.extension"], p["attributes"]["hookwire.hook"], p["value"])
                       for p in points if p["name"] == "hookwire.hook.duration"
                       and p["attributes"]["hookwire.hook"] not in OBSERVED)
    assert durations == [("node_echo", "beforeTurn", 1), ("node_echo", "tool:trace", 1), ("traced", "beforeToolCall", 2),
                         ("traced", "beforeTurn", 1), ("traced", "tool:report", 1)]  # calls recorded per extension
    tokens = {p["attributes"]["gen_ai.token.type"]: p["value"] for p in points if p["name"] == "gen_ai.client.token.usage"}
    assert tokens == {"input": 2, "output": 2}  # two model calls, each recording both
    (ops,) = [p for p in points if p["name"] == "gen_ai.client.operation.duration"]
    assert (ops["attributes"]["gen_ai.request.model"], ops["value"]) == ("hookwire/scripted", 2)
