"""Trace listeners by session: an Agent's listener sees its own session's events only, a global one sees all."""

from __future__ import annotations

from host import CallContext, TraceEvent
from host.extensions._trace import Tracer

A = CallContext(session_id="a", request_id="ra")
B = CallContext(session_id="b", request_id="rb")


def test_a_session_listener_sees_its_session_only_and_a_global_one_sees_every_event() -> None:
    trace = Tracer()
    seen_a: list[TraceEvent] = []
    seen_b: list[TraceEvent] = []
    seen_all: list[TraceEvent] = []
    trace.add_listener(seen_a.append, session_id="a")
    trace.add_listener(seen_b.append, session_id="b")
    trace.add_listener(seen_all.append)
    trace("beforeToolCall", "x", "ok", context=A)
    trace("beforeToolCall", "x", "ok", context=B)
    trace("onChunk", "x", "error", context=None)  # no session's event: global listeners only
    assert [e.request_id for e in seen_a] == ["ra"]
    assert [e.request_id for e in seen_b] == ["rb"]
    assert [e.request_id for e in seen_all] == ["ra", "rb", ""]


def test_removing_a_session_listener_stops_it_and_leaves_the_others() -> None:
    trace = Tracer()
    first: list[TraceEvent] = []
    second: list[TraceEvent] = []
    trace.add_listener(first.append, session_id="a")
    trace.add_listener(second.append, session_id="a")
    trace.remove_listener(first.append, session_id="a")
    trace.remove_listener(first.append, session_id="a")  # twice, or never added: no error
    trace.remove_listener(first.append, session_id="nobody")
    trace("afterToolCall", "x", "ok", context=A)
    assert first == [] and len(second) == 1
    trace.remove_listener(second.append, session_id="a")
    trace("afterToolCall", "x", "ok", context=A)
    assert len(second) == 1


def test_a_listener_that_removes_itself_while_called_does_not_skip_the_next() -> None:
    trace = Tracer()
    calls: list[str] = []

    def once(event: TraceEvent) -> None:
        calls.append("once")
        trace.remove_listener(once, session_id="a")

    trace.add_listener(once, session_id="a")
    trace.add_listener(lambda e: calls.append("other"), session_id="a")
    trace("afterToolCall", "x", "ok", context=A)
    trace("afterToolCall", "x", "ok", context=A)
    assert calls == ["once", "other", "other"]
