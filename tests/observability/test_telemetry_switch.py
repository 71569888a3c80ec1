"""host/_telemetry.py's hook path checks once whether OpenTelemetry is on: off (the API alone) it makes nothing,
on (an SDK tracer or SDK instruments, however they got there) it records exactly as before."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from host import _telemetry as telemetry


@pytest.fixture
def swapped(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """An SDK tracer and hook instruments put into the module (no global provider is set)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("hookwire")
    monkeypatch.setattr(telemetry, "_tracer", provider.get_tracer("hookwire"))
    monkeypatch.setattr(telemetry, "_hook_outcomes", meter.create_counter("hookwire.hook.outcomes"))
    yield {"exporter": exporter, "reader": reader}


def test_hook_span_is_not_made_when_no_tracer_is_configured() -> None:
    assert telemetry._spans_on() is False
    assert telemetry.open_hook_span("ext", "beforeTurn") == ("", "")
    assert telemetry._open_hook.get() is None


def test_hook_span_records_its_outcome_with_an_sdk_tracer(swapped: dict[str, Any]) -> None:
    parent, _ = telemetry.open_hook_span("ext", "beforeTurn")
    telemetry.hook_event("beforeTurn", "ext", "timeout", 12.0, "no reply within 12 ms")
    [span] = swapped["exporter"].get_finished_spans()
    assert parent.startswith("00-") and parent.split("-")[2] == format(span.context.span_id, "016x")
    assert (span.name, span.attributes["hookwire.outcome"]) == ("hookwire.hook beforeTurn", "timeout")


def test_hook_outcome_is_counted_with_sdk_instruments(swapped: dict[str, Any]) -> None:
    telemetry.hook_event("afterToolCall", "ext", "ok", 0.0, "")
    telemetry.hook_event("afterToolCall", "ext", "ok", 0.0, "")
    data = swapped["reader"].get_metrics_data()
    [point] = [p for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
               for p in m.data.data_points]
    assert (point.value, point.attributes["hookwire.hook"]) == (2, "afterToolCall")
