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
from ._snapshots import CallContext, FailureReason, TraceEvent

log = logging.getLogger("hookwire.extensions")

MAX_DETAIL = 1000  # characters of an extension-supplied error text kept in logs and traces


_FAILED = ("error", "timeout", "failed_open", "skipped")


def reason_of_state(state: str) -> FailureReason:
    """The failure reason for a call an extension could not take because of its state."""
    if state in ("restarting", "quarantined"):
        return state  # type: ignore[return-value]
    return "error"


def bounded(text: str, limit: int = MAX_DETAIL) -> str:
    """An untrusted text cut to `limit` characters for a log line or a trace."""
    return text if len(text) <= limit else f"{text[:limit]}…[{len(text) - limit} more characters]"


class Tracer:
    """Fans trace events out to the listeners (`ExtensionManager.add_trace_listener`).

    A listener added for one session (an Agent's) only sees that session's events: with 50 sessions on one manager,
    each event reaches its own session's listener, not 50 (the fan-out would grow with the square of the sessions).
    A listener added without a session sees every event, those of no session included."""

    def __init__(self) -> None:
        self._listeners: list[Callable[[TraceEvent], None]] = []
        self._by_session: dict[str, list[Callable[[TraceEvent], None]]] = {}

    def add_listener(self, fn: Callable[[TraceEvent], None], session_id: str | None = None) -> None:
        if session_id is None:
            self._listeners.append(fn)
        else:
            self._by_session.setdefault(session_id, []).append(fn)

    def remove_listener(self, fn: Callable[[TraceEvent], None], session_id: str | None = None) -> None:
        if session_id is None:
            with contextlib.suppress(ValueError):
                self._listeners.remove(fn)
            return
        listeners = self._by_session.get(session_id)
        if listeners is None:
            return
        with contextlib.suppress(ValueError):
            listeners.remove(fn)
        if not listeners:
            del self._by_session[session_id]

    def _targets(self, context: CallContext | None) -> list[Callable[[TraceEvent], None]]:
        """The listeners of an event of `context`: every global one, then its session's (empty: nobody listens)."""
        session = self._by_session.get(context.session_id) if context is not None and self._by_session else None
        if session is None:
            return self._listeners
        return self._listeners + session if self._listeners else session

    def __call__(self, hook: str, ext: str, outcome: str, *, latency_ms: float = 0.0, detail: str = "",
                 context: CallContext | None = None, reason: str = "", mode: str = "enforce",
                 phase: str = "") -> None:
        """Emit one event (nothing is built when nobody listens: this is on the per-chunk path).

        A failed or skipped event gets a `reason`: the one given, else "timeout" for a timeout, else "error".
        `mode` "shadow": nothing the hook returned was applied; `phase`: a beforeToolCall decider's."""
        telemetry.hook_event(hook, ext, outcome, latency_ms, detail, mode)
        targets = self._targets(context)
        if not targets:
            return
        if not reason and outcome in _FAILED:
            reason = "timeout" if outcome == "timeout" else "error"
        event = TraceEvent(
            hook=hook, extension=ext, outcome=outcome, latency_ms=latency_ms, detail=detail,  # type: ignore[arg-type]
            request_id=context.request_id if context is not None else "", reason=reason,  # type: ignore[arg-type]
            mode=mode, phase=phase,  # type: ignore[arg-type]
        )
        for fn in list(targets):
            try:
                fn(event)
            except Exception:  # noqa: BLE001 - a listener must not break dispatch
                log.exception("trace listener %r failed", fn)

    def hook_failed(self, ext: str, hook: str, outcome: str, detail: str, ms: float,
                    context: CallContext | None, reason: str = "", mode: str = "enforce") -> None:
        """An awaited hook failed open: log it and trace it with its outcome (error, timeout, skipped)."""
        detail = bounded(detail)
        log.warning("extension %r %s failed (%s): %s", ext, hook, outcome, detail)
        self(hook, ext, outcome, latency_ms=ms, detail=detail, context=context, reason=reason, mode=mode)

    def observation_error(self, ext: str, err: pb.HookError, context: CallContext | None = None) -> None:
        """An extension reported a HookError for an observation (it has no reply to carry it).

        `context` is the turn of the observations the acknowledgement covered, None when it covered several
        turns (or none still running): then it is logged and traced as no turn's event."""
        hook, text = bounded(err.hook, 64) or "observation", bounded(f"{err.name}: {err.message}")
        log.warning("extension %r %s: %s", ext, hook, text)
        self(hook, ext, "error", detail=text, context=context)
