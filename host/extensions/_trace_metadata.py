"""W3C trace context in gRPC metadata, both ways: on the host's unary calls to an extension, and from an extension's
HostBridge calls into the host's `hookwire.bridge {method}` span.

Out: a unary call (BeforeTurn, BeforeToolCall, ExecuteTool, Observe on an extension without the Connect stream)
carries its CallContext's `traceparent`/`tracestate` as metadata too, so an extension's gRPC server instrumentation
(OpenTelemetry's, in any language) continues the host's trace with no code. Describe and Shutdown belong to no turn
and carry none. The Connect stream has one set of metadata for its whole life, so its frames carry the trace
context in CallContext only.

In: a HostBridge call carries the caller's trace context (metadata on the Unix-socket bridge, the BridgeRequest's
fields on the stream bridge); `BridgeSpan` makes it the parent of a SERVER span `hookwire.bridge {method}` with
hookwire.extension, hookwire.bridge.method, gen_ai.conversation.id (the session) and hookwire.outcome.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from extension_sdk.proto import extension_pb2 as pb

TRACEPARENT_KEY = "traceparent"
TRACESTATE_KEY = "tracestate"

_tracer = trace.get_tracer("hookwire")
_propagator = TraceContextTextMapPropagator()
Metadata = tuple[tuple[str, str], ...]


def with_trace(metadata: Metadata, context: pb.CallContext) -> Metadata:
    """`metadata` plus the call's trace context (unchanged when the call is not traced)."""
    parent = context.traceparent
    if not parent:
        return metadata
    if context.tracestate:
        return (*metadata, (TRACEPARENT_KEY, parent), (TRACESTATE_KEY, context.tracestate))
    return (*metadata, (TRACEPARENT_KEY, parent))


_record_cache: tuple[bytes, pb.CallContext] | None = None


def with_trace_of_record(metadata: Metadata, record: bytes) -> Metadata:
    """The same for an observation batch, whose context is a serialized ObservationBatch.context field."""
    global _record_cache
    cached = _record_cache
    if cached is None or cached[0] is not record:
        cached = _record_cache = (record, pb.ObservationBatch.FromString(record).context)
    return with_trace(metadata, cached[1])


def _carrier(metadata: Iterable[tuple[str, Any]] | None) -> dict[str, str]:
    carrier: dict[str, str] = {}
    for key, value in metadata or ():
        if key in (TRACEPARENT_KEY, TRACESTATE_KEY):
            carrier[key] = value.decode("ascii", "replace") if isinstance(value, bytes) else str(value)
    return carrier


class BridgeSpan:
    """`hookwire.bridge {method}`: one HostBridge call, a child of the caller's span; current until `end`."""

    __slots__ = ("span", "_token")

    def __init__(self, method: str, metadata: Iterable[tuple[str, Any]] | None) -> None:
        carrier = _carrier(metadata)
        parent = _propagator.extract(carrier) if carrier else None
        self.span = _tracer.start_span(f"hookwire.bridge {method}", context=parent, kind=SpanKind.SERVER,
                                       attributes={"hookwire.bridge.method": method})
        # current while the call runs (its log lines carry the trace id, even with no SDK: the caller's then)
        self._token = otel_context.attach(trace.set_span_in_context(self.span, parent)) \
            if parent is not None or self.span.is_recording() else None

    def end(self, extension: str, session_id: str, outcome: str) -> None:
        span = self.span
        if self._token is not None:
            otel_context.detach(self._token)
            self._token = None
        if span.is_recording():
            span.set_attribute("hookwire.extension", extension)
            if session_id:
                span.set_attribute("gen_ai.conversation.id", session_id)
            kind = outcome.split(":", 1)[0]
            span.set_attribute("hookwire.outcome", kind)
            if kind != "ok":
                span.set_status(Status(StatusCode.ERROR, outcome[:500]))
        span.end()
