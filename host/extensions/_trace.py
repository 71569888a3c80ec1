"""Trace events of the extension host, and the listeners that receive them (an Agent collects its turn's).

Every hook call, tool call, lifecycle change and denial becomes one `TraceEvent`. A listener that raises is
logged and never breaks dispatch. Texts an extension supplied are cut to `MAX_DETAIL` characters first.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

from extension_sdk.proto import extension_pb2 as pb

from .. import _telemetry as telemetry
from ._snapshots import CallContext, TraceEvent

log = logging.getLogger("hookwire.extensions")

MAX_DETAIL = 1000  # characters of an extension-supplied error text kept in logs and traces


def bounded(text: str, limit: int = MAX_DETAIL) -> str:
    """An untrusted text cut to `limit` characters for a log line or a trace."""
    return text if len(text) <= limit else f"{text[:limit]}…[{len(text) - limit} more characters]"


class Tracer:
    """Fans trace events out to the listeners (`ExtensionManager.add_trace_listener`)."""

    def __init__(self) -> None:
        self._listeners: list[Callable[[TraceEvent], None]] = []

    def add_listener(self, fn: Callable[[TraceEvent], None]) -> None:
        self._listeners.append(fn)

    def remove_listener(self, fn: Callable[[TraceEvent], None]) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(fn)

    def __call__(self, hook: str, ext: str, outcome: str, *, latency_ms: float = 0.0, detail: str = "",
                 context: CallContext | None = None) -> None:
        """Emit one event (nothing is built when nobody listens: this is on the per-chunk path)."""
        telemetry.hook_event(hook, ext, outcome, latency_ms, detail)
        if not self._listeners:
            return
        event = TraceEvent(
            hook=hook, extension=ext, outcome=outcome, latency_ms=latency_ms, detail=detail,  # type: ignore[arg-type]
            request_id=context.request_id if context is not None else "",
        )
        for fn in list(self._listeners):
            try:
                fn(event)
            except Exception:  # noqa: BLE001 - a listener must not break dispatch
                log.exception("trace listener %r failed", fn)

    def hook_failed(self, ext: str, hook: str, outcome: str, detail: str, ms: float,
                    context: CallContext | None) -> None:
        """An awaited hook failed open: log it and trace it with its outcome (error, timeout, skipped)."""
        detail = bounded(detail)
        log.warning("extension %r %s failed (%s): %s", ext, hook, outcome, detail)
        self(hook, ext, outcome, latency_ms=ms, detail=detail, context=context)

    def observation_error(self, ext: str, err: pb.HookError) -> None:
        """An extension reported a HookError for an observation (it has no reply to carry it)."""
        hook, text = bounded(err.hook, 64) or "observation", bounded(f"{err.name}: {err.message}")
        log.warning("extension %r %s: %s", ext, hook, text)
        self(hook, ext, "error", detail=text)
