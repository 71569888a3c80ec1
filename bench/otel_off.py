"""OpenTelemetry off costs nothing measurable: an awaited beforeToolCall's p50 through the ExtensionManager with the
telemetry calls as shipped (the OpenTelemetry API with no SDK configured: no-op spans and instruments) against the
same calls with host/_telemetry.py's hook functions short-circuited (nothing at all), in alternating rounds of one
run. `otel_off_overhead_pct` = (shipped p50 - short-circuited p50) / short-circuited p50 x 100; goal: within noise
(<= 3 %).

The on cost rides along in the same rounds: the hook functions given an SDK tracer (a BatchSpanProcessor into an
exporter that drops the spans) and SDK metric instruments, swapped into the module for those rounds only (no
global provider is set, so later benchmarks in this process stay untraced) -> `otel_on_overhead_pct` (None without
opentelemetry-sdk). And the
no-op telemetry calls of one hook timed alone, in process -> extra `otel_off_us_per_hook`.

    .venv/bin/python -m bench --only otel_off        (or: .venv/bin/python bench/otel_off.py [--quick])
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

if not __package__:  # run as a script (`python bench/otel_off.py`): import the package properly
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    __package__ = "bench"  # noqa: A001

from host import ExtensionManager, ToolCallSnapshot
from host import _telemetry as telemetry

from ._common import Config, Section, bench_manifest, median, pct, rnd, time_calls

NAME = "otel_off"
_HOOK_FUNCS = ("open_hook_span", "close_hook_span", "hook_event")


def _nothing(*_args: Any, **_kwargs: Any) -> Any:
    return None


def _no_parent(*_args: Any, **_kwargs: Any) -> tuple[str, str]:
    return "", ""


@contextmanager
def short_circuited() -> Iterator[None]:
    """The hook path's telemetry functions do nothing at all (what "off" is measured against)."""
    saved = {name: getattr(telemetry, name) for name in _HOOK_FUNCS}
    telemetry.open_hook_span = _no_parent  # type: ignore[assignment]
    telemetry.close_hook_span = _nothing  # type: ignore[assignment]
    telemetry.hook_event = _nothing  # type: ignore[assignment]
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(telemetry, name, fn)


def _sdk_instruments() -> dict[str, Any] | None:
    """The module's tracer and hook instruments from an SDK of their own (None without opentelemetry-sdk)."""
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    except ImportError:
        return None

    class Drop(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Drop()))
    meter = MeterProvider(metric_readers=[InMemoryMetricReader()]).get_meter("hookwire")
    return {"_tracer": provider.get_tracer("hookwire"),
            "_hook_duration": meter.create_histogram("hookwire.hook.duration", unit="ms"),
            "_hook_outcomes": meter.create_counter("hookwire.hook.outcomes", unit="{call}")}


@contextmanager
def sdk_on(instruments: dict[str, Any]) -> Iterator[None]:
    saved = {name: getattr(telemetry, name) for name in instruments}
    for name, value in instruments.items():
        setattr(telemetry, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(telemetry, name, value)


def off_us_per_hook(n: int) -> float:
    """The shipped telemetry calls of one awaited hook (open the span, its trace event), no SDK: µs each."""
    t0 = time.perf_counter_ns()
    for _ in range(n):
        telemetry.open_hook_span("bench", "beforeToolCall")
        telemetry.hook_event("beforeToolCall", "bench", "ok", 0.1, "")
    return (time.perf_counter_ns() - t0) / 1000 / n


async def run(cfg: Config) -> Section:
    calls = cfg.n(2000, 200)
    warmup = cfg.n(300, 50)
    rounds = max(cfg.ab_rounds, 2) * 2  # more rounds than usual: the difference sought is a few µs
    snap = ToolCallSnapshot(tool_name="search", tool_call_id="call_1", input={"q": "hookwire"}, step_number=0)
    instruments = _sdk_instruments()
    async with ExtensionManager(sandbox=cfg.sandbox) as mgr:
        await mgr.load(bench_manifest("otel", ["beforeToolCall"], decisions=True))

        async def hook_call() -> None:
            await mgr.before_tool_call(snap)

        async def stubbed() -> list[float]:
            with short_circuited():
                return await time_calls(calls, hook_call)

        async def shipped() -> list[float]:
            return await time_calls(calls, hook_call)

        async def on() -> list[float]:
            assert instruments is not None
            with sdk_on(instruments):
                return await time_calls(calls, hook_call)

        await time_calls(warmup, hook_call)
        modes: list[Callable[[], Awaitable[list[float]]]] = [stubbed, shipped] + ([on] if instruments else [])
        samples: dict[str, list[float]] = {fn.__name__: [] for fn in modes}
        for i in range(rounds):
            for fn in modes[i % len(modes):] + modes[:i % len(modes)]:  # rotate the order: drift hits every mode
                samples[fn.__name__].append(pct(await fn(), 0.5))
    base = median(samples["stubbed"])
    off = median(samples["shipped"])
    out = Section()
    out.values = {"otel_off_overhead_pct": rnd((off - base) / base * 100, 2), "otel_on_overhead_pct": None}
    out.extra = {
        "otel_hook_p50_us_short_circuited": rnd(base, 1),
        "otel_hook_p50_us_off": rnd(off, 1),
        "otel_off_us_per_hook": rnd(off_us_per_hook(cfg.n(20000, 2000)), 2),
        "otel_rounds": rounds,
    }
    if instruments:
        on_p50 = median(samples["on"])
        out.extra["otel_hook_p50_us_on"] = rnd(on_p50, 1)
        out.values["otel_on_overhead_pct"] = rnd((on_p50 - base) / base * 100, 2)
    return out


if __name__ == "__main__":
    import asyncio
    import json

    section = asyncio.run(run(Config(quick="--quick" in sys.argv, sandbox="off")))
    print(json.dumps({**section.values, **section.extra}, indent=2))
