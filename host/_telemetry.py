"""OpenTelemetry: spans that follow the GenAI semantic conventions, a span per extension hook call, and metrics.

Only the OpenTelemetry *API* is used (a dependency of hookwire). With no SDK configured every call below is
a no-op on a non-recording span; install `hookwire[otel]` and configure the SDK the standard way (OTEL_* variables,
or `trace.set_tracer_provider(...)` in the host app) to export. The span tree of one turn:

    invoke_agent {Agent class}              gen_ai.operation.name=invoke_agent, gen_ai.conversation.id=session
    ├── hookwire.hook beforeTurn            hookwire.hook, hookwire.extension, hookwire.outcome, hookwire.detail
    │     └── (the extension's own spans: its CallContext carries this span's traceparent)
    ├── chat {model}                        gen_ai.request.model, gen_ai.usage.*_tokens, finish reasons
    └── execute_tool {tool}                 gen_ai.tool.name, gen_ai.tool.call.id, gen_ai.tool.type
          └── hookwire.hook beforeToolCall  (a decider's verdict: ok / denied / failed_open / failed_closed ...)

Hooks are not GenAI operations, so their spans are `hookwire.*`, never labelled as guardrails. A hook span ends
with the first trace event its call produces (host/extensions/_trace.py calls `hook_event`), which carries the
outcome the dispatcher decided, not just whether the wire call returned.

Metrics (meter "hookwire"): `hookwire.hook.duration` (ms, by extension, hook, outcome), `hookwire.hook.outcomes`
(count by extension, hook, outcome: ok, error, timeout, denied, failed_open, failed_closed, skipped; a shadow
hook's — what it would have done, nothing applied — also by `hookwire.mode: shadow`, on its span too),
`hookwire.extension.restarts` / `hookwire.extension.quarantines`, `hookwire.observations.dropped`,
`gen_ai.client.operation.duration` (s) and `gen_ai.client.token.usage` (by gen_ai.token.type).
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import AsyncIterator

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import NoOpTracer, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ._logging import turn_scope

_tracer = trace.get_tracer("hookwire")
_meter = metrics.get_meter("hookwire")
_propagator = TraceContextTextMapPropagator()

_hook_duration = _meter.create_histogram("hookwire.hook.duration", unit="ms",
                                         description="Awaited extension hook calls, by extension, hook and outcome")
_hook_outcomes = _meter.create_counter("hookwire.hook.outcomes", unit="{call}",
                                       description="Extension hook and tool calls, by extension, hook and outcome")
_restarts = _meter.create_counter("hookwire.extension.restarts", unit="{restart}")
_quarantines = _meter.create_counter("hookwire.extension.quarantines", unit="{quarantine}")
_dropped = _meter.create_counter("hookwire.observations.dropped", unit="{observation}",
                                 description="onChunk observations dropped because an extension was too slow")
_op_duration = _meter.create_histogram("gen_ai.client.operation.duration", unit="s",
                                       description="GenAI operation duration")
_token_usage = _meter.create_histogram("gen_ai.client.token.usage", unit="{token}",
                                       description="Measures number of input and output tokens used")


def _spans_on() -> bool:
    """Whether `_tracer` makes spans at all: False for the API's no-op (no SDK, no global provider yet), checked the
    way the API's proxy decides on each call. Anything unknown counts as on (the full path then runs)."""
    tracer = _tracer
    return type(getattr(tracer, "_tracer", tracer)) is not NoOpTracer


def _metrics_on(instrument: object) -> bool:
    """Whether a hook instrument records: False for the API's proxy instrument before any meter provider is set (its
    `add`/`record` would do nothing). Anything unknown (an SDK instrument) counts as on."""
    return getattr(instrument, "_real_instrument", instrument) is not None


# The hook span opened by `hook_span` in this task, closed by the first trace event of that call (`hook_event`).
_open_hook: contextvars.ContextVar[tuple[Span, str, str, float] | None] = contextvars.ContextVar(
    "hookwire_open_hook_span", default=None)


def provider_of(model: str) -> str:
    """gen_ai.provider.name from a litellm model id ("openai/gpt-4o" -> "openai")."""
    return model.split("/", 1)[0] if "/" in model else "openai"


def traceparent() -> tuple[str, str]:
    """(traceparent, tracestate) of the current span; empty strings when nothing is being traced."""
    if not trace.get_current_span().get_span_context().is_valid:
        return "", ""
    carrier: dict[str, str] = {}
    _propagator.inject(carrier)
    return carrier.get("traceparent", ""), carrier.get("tracestate", "")


@contextlib.asynccontextmanager
async def agent_span(agent: str, session_id: str, request_id: str) -> AsyncIterator[Span]:
    """`invoke_agent {agent}`: one turn. Root, or a child of the caller's current span."""
    with _tracer.start_as_current_span(
        f"invoke_agent {agent}", kind=SpanKind.INTERNAL, record_exception=False, set_status_on_exception=False,
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent,
                    "gen_ai.conversation.id": session_id, "hookwire.request_id": request_id},
    ) as span, turn_scope(session_id, request_id):  # log records of the turn carry its ids (host/_logging.py)
        yield span


def end_turn(span: Span, status: str, error: str | None, failed_open: list[str]) -> None:
    """Record a turn's outcome on its invoke_agent span."""
    if not span.is_recording():
        return
    span.set_attribute("hookwire.turn.status", status)
    if failed_open:
        span.set_attribute("hookwire.failed_open", failed_open)
    if status == "error":
        span.set_status(Status(StatusCode.ERROR, error or ""))
        span.set_attribute("error.type", "turn_error")


class ChatSpan:
    """`chat {model}`: one model call, from the request until its stream ended."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.provider = provider_of(model)
        self._t0 = time.perf_counter()
        self.span = _tracer.start_span(
            f"chat {model}", kind=SpanKind.CLIENT,
            attributes={"gen_ai.operation.name": "chat", "gen_ai.provider.name": self.provider,
                        "gen_ai.request.model": model},
        )

    def end(self, *, response_model: str, response_id: str, finish_reason: str | None, input_tokens: int | None,
            output_tokens: int | None, error: BaseException | None = None) -> None:
        span = self.span
        attrs = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": self.provider,
                 "gen_ai.request.model": self.model}
        if error is not None:
            attrs["error.type"] = type(error).__name__
        _op_duration.record(time.perf_counter() - self._t0, attrs)
        for kind, n in (("input", input_tokens), ("output", output_tokens)):
            if n is not None:
                _token_usage.record(n, {**attrs, "gen_ai.token.type": kind})
        if span.is_recording():
            span.set_attribute("gen_ai.response.model", response_model)
            if response_id:
                span.set_attribute("gen_ai.response.id", response_id)
            if finish_reason:
                span.set_attribute("gen_ai.response.finish_reasons", [finish_reason])
            if input_tokens is not None:
                span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
            if output_tokens is not None:
                span.set_attribute("gen_ai.usage.output_tokens", output_tokens)
            if error is not None:
                span.set_status(Status(StatusCode.ERROR, str(error)[:500]))
                span.set_attribute("error.type", type(error).__name__)
        span.end()


class ToolSpan:
    """`execute_tool {tool}`: one tool call, its beforeToolCall decisions included; current until `end`."""

    def __init__(self, tool: str, call_id: str, dynamic: bool) -> None:
        self.span = _tracer.start_span(
            f"execute_tool {tool}", kind=SpanKind.INTERNAL,
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                        "gen_ai.tool.call.id": call_id, "gen_ai.tool.type": "extension" if dynamic else "function"},
        )
        self._token = otel_context.attach(trace.set_span_in_context(self.span))

    def end(self, error: BaseException | None = None) -> None:
        if error is not None and self.span.is_recording():
            self.span.set_status(Status(StatusCode.ERROR, str(error)[:500]))
            self.span.set_attribute("error.type", type(error).__name__)
        otel_context.detach(self._token)
        self.span.end()


def hook_spans_wanted() -> bool:
    """Whether `open_hook_span` would do anything here: a tracer that makes spans, or a hook span still open in this
    context (superseded by the next). False: the awaited hook path skips the span's wrapper entirely."""
    return _open_hook.get() is not None or _spans_on()


def open_hook_span(extension: str, hook: str) -> tuple[str, str]:
    """Start `hookwire.hook {hook}` for one awaited call to `extension`; its (traceparent, tracestate) for the frame.

    The span stays open until the call's first trace event (`hook_event`) or `close_hook_span`. With no tracer
    configured, nothing is made: one check (issue 16, otel_off)."""
    if _open_hook.get() is not None:
        close_hook_span("superseded")
    if not _spans_on():
        return "", ""
    span = _tracer.start_span(f"hookwire.hook {hook}", kind=SpanKind.CLIENT,
                              attributes={"hookwire.hook": hook, "hookwire.extension": extension})
    if not span.is_recording():
        return "", ""
    _open_hook.set((span, extension, hook, time.perf_counter()))
    carrier: dict[str, str] = {}
    _propagator.inject(carrier, context=trace.set_span_in_context(span))
    return carrier.get("traceparent", ""), carrier.get("tracestate", "")


def close_hook_span(outcome: str, detail: str = "") -> None:
    """End the hook span still open in this task, if any (a call that was cancelled, or never traced)."""
    opened = _open_hook.get()
    if opened is None:
        return
    _open_hook.set(None)
    span = opened[0]
    span.set_attribute("hookwire.outcome", outcome)
    if detail:
        span.set_attribute("hookwire.detail", detail[:1000])
    span.end()


def hook_event(hook: str, extension: str, outcome: str, latency_ms: float, detail: str,
               mode: str = "enforce") -> None:
    """A trace event of the extension host: metrics, and the outcome of the hook span it belongs to.

    A shadow hook's outcome (what it would have done; nothing was applied) carries `hookwire.mode: shadow`.
    With OpenTelemetry off (no SDK: no span open, the instruments no-ops) it returns after two checks."""
    if hook == "lifecycle":
        if detail.endswith("; restarting"):
            _restarts.add(1, {"hookwire.extension": extension})
        elif detail.endswith("; quarantined"):
            _quarantines.add(1, {"hookwire.extension": extension})
        return
    opened = _open_hook.get()
    if opened is None and not _metrics_on(_hook_outcomes):
        return
    attrs = {"hookwire.extension": extension, "hookwire.hook": hook, "hookwire.outcome": outcome}
    if mode != "enforce":
        attrs["hookwire.mode"] = mode
    _hook_outcomes.add(1, attrs)
    if latency_ms:
        _hook_duration.record(latency_ms, attrs)
    if opened is not None and opened[1] == extension and opened[2] == hook:
        span = opened[0]
        if outcome in ("error", "timeout", "failed_closed"):
            span.set_status(Status(StatusCode.ERROR, detail[:500]))
        if mode != "enforce":
            span.set_attribute("hookwire.mode", mode)
        close_hook_span(outcome, detail)


def observations_dropped(extension: str, n: int) -> None:
    _dropped.add(n, {"hookwire.extension": extension})
