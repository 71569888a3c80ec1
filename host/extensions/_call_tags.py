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
"""

from __future__ import annotations

import contextlib
import time
import weakref
from collections.abc import Iterator
from typing import Any, NamedTuple

from extension_sdk.proto import extension_pb2 as pb

from .._logging import call_scope, log_context

GRACE_S = 0.5


class CallTag(NamedTuple):
    hook: str
    session_id: str
    request_id: str
    traceparent: str


# keyed by the extension's process (ExtensionProcess): several agents in one host each run their own "guard"
_inflight: dict[object, dict[int, CallTag]] = {}
_last: weakref.WeakKeyDictionary[object, tuple[float, CallTag]] = weakref.WeakKeyDictionary()
_seq = 0


@contextlib.contextmanager
def during(process: object | None, extension: str, hook: str, context: pb.CallContext) -> Iterator[None]:
    """One call to `extension` (`hook`: "beforeTurn", "tool:NAME" ...) with its CallContext, while the block runs.
    `process`: the extension's ExtensionProcess (None for an endpoint: no stderr to attribute)."""
    global _seq
    token = call_scope(extension, hook, context.session_id, context.request_id)
    if process is None:
        try:
            yield
        finally:
            log_context.reset(token)
        return
    _seq += 1
    key = _seq
    tag = CallTag(hook, context.session_id, context.request_id, context.traceparent)
    calls = _inflight.get(process)
    if calls is None:
        calls = _inflight[process] = {}
    calls[key] = tag
    try:
        yield
    finally:
        log_context.reset(token)
        calls.pop(key, None)
        if not calls:
            _inflight.pop(process, None)
        _last[process] = (time.monotonic(), tag)


def _ids(traceparent: str) -> tuple[str, str] | None:
    parts = traceparent.split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    return parts[1], parts[2]


def stderr_extra(process: object, extension: str) -> dict[str, Any]:
    """The `extra` of a log record for a line the extension's `process` wrote on stderr now (see the module doc)."""
    extra: dict[str, Any] = {"extension": extension, "hook": None, "session_id": None, "request_id": None,
                             "trace_id": None, "span_id": None}
    calls = list(_inflight.get(process, {}).values())
    if not calls:
        last = _last.get(process)
        if last is None or time.monotonic() - last[0] > GRACE_S:
            return extra
        calls = [last[1]]
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



def stopping(process: object | None) -> None:
    """The host is stopping the extension's `process`: lines from now on belong to no call."""
    if process is not None:
        _inflight.pop(process, None)
        _last.pop(process, None)
