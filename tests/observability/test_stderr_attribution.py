"""Whose an extension's stderr line is (host/extensions/_call_tags.py): the calls in flight on its process when the
host read the line. In-process rules; the real thing through a Node extension is in test_otel_traces.py."""

from __future__ import annotations

from extension_sdk.proto import extension_pb2 as pb
from host import JsonFormatter
from host.extensions import _call_tags as call_tags

JsonFormatter()  # the calls in flight are kept once JSON logs are on in the process (text logs read none of it)


class Proc:  # stands for an ExtensionProcess: each holds its own calls in flight
    def __init__(self) -> None:
        self.in_flight = call_tags.InFlight()


def ctx(trace: str, span: str, request: str = "r1") -> pb.CallContext:
    return pb.CallContext(session_id="s1", request_id=request, traceparent=f"00-{trace}-{span}-01")


A, B = "a" * 32, "b" * 32


def test_a_line_during_one_call_carries_that_calls_hook_ids_and_trace() -> None:
    proc = Proc()
    with call_tags.during(proc, "guard", "beforeToolCall", ctx(A, "1" * 16)):
        extra = call_tags.stderr_extra(proc.in_flight, "guard")
    assert extra == {"extension": "guard", "hook": "beforeToolCall", "session_id": "s1", "request_id": "r1",
                     "trace_id": A, "span_id": "1" * 16}


def test_a_line_while_calls_of_two_traces_are_in_flight_lists_both_and_claims_neither() -> None:
    proc = Proc()
    with call_tags.during(proc, "guard", "tool:a", ctx(B, "2" * 16, "r2")), \
            call_tags.during(proc, "guard", "tool:b", ctx(A, "3" * 16)):
        extra = call_tags.stderr_extra(proc.in_flight, "guard")
    assert extra["trace_ids"] == [A, B]
    assert (extra["trace_id"], extra["hook"], extra["request_id"]) == (None, None, None)


def test_a_line_read_just_after_the_call_is_its_but_not_once_the_host_stops_the_extension() -> None:
    proc, other = Proc(), Proc()
    with call_tags.during(proc, "guard", "beforeTurn", ctx(A, "4" * 16)):
        pass
    assert call_tags.stderr_extra(proc.in_flight, "guard")["trace_id"] == A  # within GRACE_S: the pipe is read a bit later
    assert call_tags.stderr_extra(other.in_flight, "guard")["trace_id"] is None  # another agent's "guard": not its call
    call_tags.stopping(proc)
    assert call_tags.stderr_extra(proc.in_flight, "guard")["trace_id"] is None


def test_nothing_is_kept_while_no_json_formatter_exists() -> None:
    from host._logging import _structured

    _structured[0] = False
    try:
        proc = Proc()
        with call_tags.during(proc, "guard", "beforeTurn", ctx(A, "5" * 16)):
            assert proc.in_flight.calls == {}
        assert proc.in_flight.last is None
    finally:
        _structured[0] = True
