"""Which calls are in flight on each extension: the log context of a hook or tool call, and whose an extension's
stderr line is.

`during(process, extension, hook, context)` wraps one awaited hook call or tool call (host/extensions/_dispatch.py,
_tool_call.py): while it runs, log records of that task carry the extension and hook (host/_logging.py), and the
call is listed as in flight on the extension.

An extension's stderr is one byte stream with no call ids in it, so a line is attributed by time
(`stderr_extra`): to the calls in flight on that extension when the host read the line. The approximation:
- one call in flight (or several of one trace): the line gets its hook, session, request, trace id and the span
  id of the host's span for the call (the hook or execute_tool span: the parent of the extension's work);
- calls of several traces in flight: no single trace id; `trace_ids` lists them all (sorted);
- none in flight: the call that ended last, if it ended less than GRACE_S ago (the pipe is read a little after the
  handler wrote), else nothing (a line of the extension's own, e.g. at start-up, or once the host began stopping
  it: `stopping`);
- observations (afterToolCall, onStepFinish, onChunk) are not calls in flight: a line written while handling one
  is attributed only if an awaited call or tool call was in flight too.

Only JSON logs show any of it, so nothing is kept until a JsonFormatter exists in the process (`configure_logging`,
`--log-format json`, HOOKWIRE_LOG_FORMAT=json): with text logs a hook pays one object and one flag check.
"""

from __future__ import annotations

import itertools
import time
from typing import Any, NamedTuple

from extension_sdk.proto import extension_pb2 as pb

from .._logging import _structured, log_context

GRACE_S = 0.5


class CallTag(NamedTuple):
    hook: str
    session_id: str
    request_id: str
    traceparent: str


class InFlight:
    """One extension process's calls in flight (key -> (hook, CallContext)) and the last that ended
    (monotonic end time, hook, CallContext). Each ExtensionProcess holds one, as `in_flight`: several agents in one
    host each run their own "guard"."""

    __slots__ = ("calls", "last")

    def __init__(self) -> None:
        self.calls: dict[int, tuple[str, pb.CallContext]] = {}
        self.last: tuple[float, str, pb.CallContext] | None = None


_seq = itertools.count(1)


def recording() -> bool:
    """Whether `during` keeps anything (JSON logs): False with text logs, where a caller may skip it altogether."""
    return _structured[0]


class during:  # noqa: N801 - used as a context manager, like a function
    """One call to `extension` (`hook`: "beforeTurn", "tool:NAME" ...) with its CallContext, while the block runs.
    `process`: the extension's ExtensionProcess (None for an endpoint: no stderr to attribute). A class, not a
    generator: it is on every hook's path."""

    __slots__ = ("_flight", "_hook", "_context", "_extension", "_key", "_token")

    def __init__(self, process: Any, extension: str, hook: str, context: pb.CallContext) -> None:
        self._flight: InFlight | None = getattr(process, "in_flight", None)
        self._extension = extension
        self._hook = hook
        self._context = context
        self._token: Any = None

    def __enter__(self) -> None:
        if not _structured[0]:  # text logs (no JsonFormatter in this process) read none of it
            return
        context = self._context
        self._token = log_context.set((context.session_id, context.request_id, self._extension, self._hook))
        if self._flight is not None:
            self._key = next(_seq)
            self._flight.calls[self._key] = (self._hook, context)

    def __exit__(self, *_exc: object) -> None:
        if self._token is None:
            return
        log_context.reset(self._token)
        flight = self._flight
        if flight is not None:
            flight.calls.pop(self._key, None)
            flight.last = (time.monotonic(), self._hook, self._context)


def _tag(hook: str, context: pb.CallContext) -> CallTag:
    return CallTag(hook, context.session_id, context.request_id, context.traceparent)


def _ids(traceparent: str) -> tuple[str, str] | None:
    parts = traceparent.split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    return parts[1], parts[2]


def stderr_extra(flight: InFlight, extension: str) -> dict[str, Any]:
    """The `extra` of a log record for a line the extension's process (`flight`: its calls) wrote on stderr now
    (see the module doc)."""
    extra: dict[str, Any] = {"extension": extension, "hook": None, "session_id": None, "request_id": None,
                             "trace_id": None, "span_id": None}
    calls = [_tag(hook, context) for hook, context in list(flight.calls.values())]
    if not calls:
        last = flight.last
        if last is None or time.monotonic() - last[0] > GRACE_S:
            return extra
        calls = [_tag(last[1], last[2])]
    traces = {ids[0] for c in calls if (ids := _ids(c.traceparent)) is not None}
    if len(traces) > 1:
        extra["trace_ids"] = sorted(traces)
        return extra
    if len(calls) == 1:
        tag = calls[0]
        ids = _ids(tag.traceparent)
        extra.update(hook=tag.hook, session_id=tag.session_id or None, request_id=tag.request_id or None,
                     trace_id=ids[0] if ids else None, span_id=ids[1] if ids else None)
        return extra
    sessions = {c.session_id for c in calls}
    requests = {c.request_id for c in calls}
    if len(requests) == 1:
        extra.update(session_id=next(iter(sessions)) or None, request_id=next(iter(requests)) or None)
    if traces:
        extra["trace_id"] = next(iter(traces))
    return extra



def stopping(process: Any) -> None:
    """The host is stopping the extension's `process`: lines from now on belong to no call."""
    flight: InFlight | None = getattr(process, "in_flight", None)
    if flight is not None:
        flight.calls.clear()
        flight.last = None
