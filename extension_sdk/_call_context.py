"""Which session and turn the hook or tool call being served belongs to, and its deadline: `current_call()`.

The call's W3C trace context (`traceparent`, `tracestate`) comes from the host's span for the call. When the
extension has OpenTelemetry installed, it is also made the current OpenTelemetry context while the handler runs, so
the extension's own spans join the host's trace without any code.
"""

from __future__ import annotations

import contextvars
import time
from typing import Any, NamedTuple

from .proto import extension_pb2 as pb


class _Call(NamedTuple):
    session_id: str
    request_id: str


class CallInfo(_Call):
    """(session_id, request_id) of the call in progress — still a 2-tuple — plus its trace context and deadline."""

    __slots__ = ()

    @property
    def traceparent(self) -> str:
        """The host's span for this call (W3C trace context); empty when the host is not tracing."""
        return _trace.get()[0]

    @property
    def tracestate(self) -> str:
        return _trace.get()[1]

    @property
    def deadline(self) -> float | None:
        """When the host stops waiting for this call, in seconds since the epoch (compare with `time.time()`);
        None when it set none (observations). Past it the host has given up and discards the answer; an async hook
        handler is cancelled then (the host's `cancel` frame)."""
        ms = _trace.get()[2]
        return ms / 1000 if ms else None

    @property
    def remaining(self) -> float | None:
        """Seconds left until `deadline` (negative once it passed); None when the call has no deadline."""
        deadline = self.deadline
        return None if deadline is None else deadline - time.time()


_current: contextvars.ContextVar[CallInfo] = contextvars.ContextVar("hookwire_current_call", default=CallInfo("", ""))
# (traceparent, tracestate, deadline_unix_ms) of the call in progress
_trace: contextvars.ContextVar[tuple[str, str, int]] = contextvars.ContextVar("hookwire_current_trace",
                                                                             default=("", "", 0))

try:  # OpenTelemetry is optional for an extension: without it, the trace context is only reported
    from opentelemetry import context as _otel_context
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    _propagator: Any = TraceContextTextMapPropagator()
except ImportError:  # pragma: no cover - depends on the extension's environment
    _otel_context = None
    _propagator = None


def current_call() -> CallInfo:
    """The session and request of the hook or tool call in progress (empty strings outside one).

    Works in sync and async handlers, including sync tools running in worker threads.
    """
    return _current.get()


_tuple_new = tuple.__new__  # CallInfo(a, b) without the NamedTuple's Python-level __new__ (once per call served)


CallMarks = tuple[CallInfo, tuple[str, str, int]]


def set_current_call(context: pb.CallContext) -> CallMarks | None:
    """Make `context` the call in progress. Returns the values it set, for `restore_call`; None when the call is
    traced (the OpenTelemetry context it attached is attached again each time)."""
    info = _tuple_new(CallInfo, (context.session_id, context.request_id))
    trace = (context.traceparent, context.tracestate, context.deadline_unix_ms)
    _current.set(info)
    _trace.set(trace)
    if not context.traceparent:
        return (info, trace)
    if _propagator is not None:
        carrier = {"traceparent": context.traceparent}
        if context.tracestate:
            carrier["tracestate"] = context.tracestate
        # set in this call's own context (each call runs in a task or thread context of its own)
        _otel_context.attach(_propagator.extract(carrier))
    return None


def restore_call(context: pb.CallContext, marks: CallMarks | None) -> None:
    """After an async handler ran in this task: set the call context again, unless it is still what was set (the
    per-item path of an observation batch: two lookups instead of building it anew)."""
    if marks is None or _current.get() is not marks[0] or _trace.get() is not marks[1]:
        set_current_call(context)


def outgoing_trace() -> tuple[str, str]:
    """(traceparent, tracestate) a HostBridge call carries back to the host: the current OpenTelemetry span (the
    extension's own span, when it made one), else the trace context of the call being served; empty when untraced."""
    if _propagator is not None:
        carrier: dict[str, str] = {}
        _propagator.inject(carrier)
        parent = carrier.get("traceparent", "")
        if parent:
            return parent, carrier.get("tracestate", "")
    call = _trace.get()
    return call[0], call[1]


def trace_metadata() -> tuple[tuple[str, str], ...]:
    """`outgoing_trace()` as gRPC metadata (W3C `traceparent`, `tracestate`); () when untraced."""
    parent, state = outgoing_trace()
    if not parent:
        return ()
    return (("traceparent", parent), ("tracestate", state)) if state else (("traceparent", parent),)
