"""OpenTelemetry through a real turn: the GenAI span tree, a span per extension hook, and the extension joining
the host's trace (it receives each call's traceparent, and the SDK makes it its current OpenTelemetry context).

The host app runs in a subprocess (tests/observability/fixtures/traced_turn.py) because the SDK's tracer provider is
process-global: configuring it here would make every later test in this process record spans.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def traced() -> dict[str, Any]:
    pytest.importorskip("opentelemetry.sdk", reason="opentelemetry-sdk is in the dev extra")
    proc = subprocess.run([sys.executable, str(FIXTURES / "traced_turn.py"), str(FIXTURES / "traced.yaml")],
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


def test_the_span_tree_has_the_hooks_model_calls_and_tool_in_place(traced: dict[str, Any]) -> None:
    spans = by_name(traced)
    root = spans["invoke_agent Traced"][0]["span_id"]
    (tool,) = spans["execute_tool traced_report"]
    tree = sorted((s["name"], "root" if s["parent_id"] == root else "tool" if s["parent_id"] == tool["span_id"]
                   else s["parent_id"]) for s in traced["spans"] if s["name"] != "invoke_agent Traced")
    assert tree == [("chat hookwire/scripted", "root"), ("chat hookwire/scripted", "root"),
                    ("execute_tool traced_report", "root"), ("hookwire.hook beforeToolCall", "tool"),
                    ("hookwire.hook beforeTurn", "root")]


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
    turn = spans["hookwire.hook beforeTurn"][0]["attributes"]
    decide = spans["hookwire.hook beforeToolCall"][0]["attributes"]
    assert turn == {"hookwire.hook": "beforeTurn", "hookwire.extension": "traced", "hookwire.outcome": "ok",
                    "hookwire.detail": "set system"}
    assert (decide["hookwire.extension"], decide["hookwire.outcome"]) == ("traced", "ok")


def test_the_extension_runs_inside_the_hook_span_the_host_sent(traced: dict[str, Any]) -> None:
    spans = by_name(traced)
    trace_id = spans["invoke_agent Traced"][0]["trace_id"]
    before_turn = spans["hookwire.hook beforeTurn"][0]["span_id"]
    decider = spans["hookwire.hook beforeToolCall"][0]["span_id"]
    tool = spans["execute_tool traced_report"][0]["span_id"]
    seen_in_before_turn = traced["system"]
    (report,) = traced["tool"]
    assert seen_in_before_turn["traceparent"].startswith(f"00-{trace_id}-{before_turn}-")  # version-trace-span-flags
    assert (seen_in_before_turn["trace_id"], seen_in_before_turn["parent_span_id"]) == (trace_id, before_turn)
    assert report["decider"]["parent_span_id"] == decider and report["decider"]["trace_id"] == trace_id
    assert report["tool"]["parent_span_id"] == tool and report["tool"]["trace_id"] == trace_id


def test_metrics_count_hook_outcomes_and_token_usage(traced: dict[str, Any]) -> None:
    points = traced["metrics"]
    outcomes = sorted((p["attributes"]["hookwire.hook"], p["attributes"]["hookwire.outcome"], p["value"])
                      for p in points if p["name"] == "hookwire.hook.outcomes")
    assert outcomes == [("beforeToolCall", "ok", 1), ("beforeTurn", "ok", 1), ("tool:report", "ok", 1)]
    durations = {p["attributes"]["hookwire.hook"]: p["value"] for p in points if p["name"] == "hookwire.hook.duration"}
    assert durations == {"beforeToolCall": 1, "beforeTurn": 1, "tool:report": 1}  # one recorded call each
    tokens = {p["attributes"]["gen_ai.token.type"]: p["value"] for p in points if p["name"] == "gen_ai.client.token.usage"}
    assert tokens == {"input": 2, "output": 2}  # two model calls, each recording both
    (ops,) = [p for p in points if p["name"] == "gen_ai.client.operation.duration"]
    assert (ops["attributes"]["gen_ai.request.model"], ops["value"]) == ("hookwire/scripted", 2)
