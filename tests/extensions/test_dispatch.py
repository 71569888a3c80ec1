"""The dispatch rules on in-memory extensions (no process, no socket): they run in milliseconds.

Like pluggy's test_multicall.py: each test builds extensions from manifests, scripts what each one answers
through the dispatcher's `call` seam, and pins the outcome of one rule of host/extensions/_dispatch.py — the
beforeTurn merge and its provenance, decision precedence, fail-closed, the turn's deadline. The same rules run
through real processes in test_ext_hooks.py and the fault suite.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from extension_sdk.proto import extension_pb2 as pb
from host import CallContext, ToolCallSnapshot, TraceEvent, TurnSnapshot, parse_manifest
from host.extensions._dispatch import Dispatcher, Failure, Reply, first_by_precedence, hook_timeout
from host.extensions._registry import Registry
from host.extensions._snapshots import ExtensionDecision
from host.extensions._state import ExtensionRuntime
from host.extensions._trace import Tracer

CTX = CallContext(session_id="s", request_id="r1")
TURN = TurnSnapshot(system="base prompt", tool_names=["search"], message_count=1, model_id="openai/gpt-4o")
CALL = ToolCallSnapshot(tool_name="delete_file", tool_call_id="c1", input={"path": "a.txt"}, step_number=0)


def extension(name: str, hooks: dict[str, Any] | None = None, **manifest: Any) -> ExtensionRuntime:
    """A loaded, running extension serving `hooks` (manifest hook policies), with no process behind it."""
    policies = hooks or {"beforeTurn": {}}
    ext = ExtensionRuntime(parse_manifest({"name": name, "command": ["true"], "hooks": policies, **manifest}))
    ext.state = "running"
    ext.hooks = list(policies)
    return ext


def turn_reply(**fields: Any) -> pb.ExtensionFrame:
    patch = pb.TurnConfigPatch()
    for key, value in fields.items():
        if key == "headers":
            patch.headers.values.update(value)
        elif key == "provider_options":
            patch.provider_options_json = json.dumps(value)
        elif key == "active_tools":
            patch.active_tools.values.extend(value)
        else:
            setattr(patch, key, value)
    return pb.ExtensionFrame(before_turn=pb.BeforeTurnResponse(config=patch))


def decision_reply(action: str, **fields: Any) -> pb.ExtensionFrame:
    d = pb.ToolCallDecision(action=getattr(pb.ToolCallDecision, action))
    for key, value in fields.items():
        setattr(d, key, value)
    return pb.ExtensionFrame(before_tool_call=pb.BeforeToolCallResponse(decision=d))


class Scripted:
    """The `call` seam: each extension's scripted answer, and what each one was sent."""

    def __init__(self, answers: dict[str, pb.ExtensionFrame | Failure]) -> None:
        self.answers = answers
        self.sent: dict[str, pb.HostFrame] = {}

    async def __call__(self, ext: ExtensionRuntime, hook: str, frame: pb.HostFrame, context: CallContext | None,
                       deadline: float | None) -> Reply | Failure:
        self.sent[ext.name] = frame
        answer = self.answers[ext.name]
        return answer if isinstance(answer, Failure) else Reply(answer, 1.0)


def dispatcher(exts: list[ExtensionRuntime], answers: dict[str, pb.ExtensionFrame | Failure]
               ) -> tuple[Dispatcher, Scripted, list[TraceEvent]]:
    registry = Registry()
    for ext in exts:
        registry.exts[ext.name] = ext
    registry.changed()
    trace = Tracer()
    events: list[TraceEvent] = []
    trace.add_listener(events.append)
    scripted = Scripted(answers)
    return Dispatcher(registry, trace, call=scripted), scripted, events


async def test_before_turn_later_extension_wins_a_scalar_and_provenance_names_it() -> None:
    d, _, _ = dispatcher([extension("first"), extension("second")],
                         {"first": turn_reply(system="from first", max_steps=3), "second": turn_reply(system="from second")})
    merged = await d.before_turn(TURN, CTX, None)
    assert merged.patch.set_fields() == {"system": "from second", "max_steps": 3}
    assert merged.provenance == {"system": "second", "maxSteps": "first"}


async def test_before_turn_headers_merge_key_by_key_case_insensitively() -> None:
    grant = {"permissions": {"turnConfig": ["headers"]}}
    d, _, _ = dispatcher([extension("a", **grant), extension("b", **grant)],
                         {"a": turn_reply(headers={"X-Team": "red", "X-Trace": "1"}),
                          "b": turn_reply(headers={"x-team": "blue"})})
    merged = await d.before_turn(TURN, CTX, None)
    assert {k.lower(): v for k, v in merged.patch.headers.items()} == {"x-team": "blue", "x-trace": "1"}
    assert merged.provenance["headers.X-Trace"] == "a"
    assert [v for k, v in merged.provenance.items() if k.lower() == "headers.x-team"] == ["b"]


async def test_before_turn_each_extension_sees_the_system_prompt_set_before_it() -> None:
    d, scripted, _ = dispatcher([extension("first"), extension("second")],
                                {"first": turn_reply(system="rewritten"), "second": turn_reply()})
    await d.before_turn(TURN, CTX, None)
    assert scripted.sent["first"].before_turn.snapshot.system == "base prompt"
    assert scripted.sent["second"].before_turn.snapshot.system == "rewritten"


async def test_before_turn_field_outside_the_grant_is_denied_and_the_rest_applies() -> None:
    d, _, events = dispatcher([extension("sneaky")], {"sneaky": turn_reply(
        temperature=0.5, provider_options={"openai": {"api_base": "http://127.0.0.1:9/v1"}})})
    merged = await d.before_turn(TURN, CTX, None)
    assert merged.patch.set_fields() == {"temperature": 0.5}
    assert [(x.extension, x.field) for x in merged.denied] == [("sneaky", "providerOptions")]
    assert [(e.extension, e.outcome) for e in events] == [("sneaky", "ok"), ("sneaky", "denied")]


async def test_before_turn_a_failing_extension_is_traced_and_skipped_while_the_next_one_applies() -> None:
    d, _, events = dispatcher([extension("slow"), extension("fine")],
                              {"slow": Failure("timeout", "no reply within 1000 ms", 1000.0),
                               "fine": turn_reply(max_steps=2)})
    merged = await d.before_turn(TURN, CTX, None)
    assert merged.patch.set_fields() == {"max_steps": 2}
    assert [(e.extension, e.outcome, e.detail) for e in events] == [
        ("slow", "timeout", "no reply within 1000 ms"), ("fine", "ok", "set maxSteps")]


async def test_before_turn_skips_an_extension_that_is_not_running() -> None:
    down = extension("down")
    down.state = "restarting"
    d, scripted, events = dispatcher([down], {})
    merged = await d.before_turn(TURN, CTX, None)
    assert merged.patch.set_fields() == {} and scripted.sent == {}
    assert [(e.extension, e.outcome, e.detail) for e in events] == [("down", "skipped", "extension is restarting")]


DECIDER = {"beforeToolCall": {"decisions": True}}
CLOSED = {"beforeToolCall": {"decisions": True, "failure": "closed"}}


@pytest.mark.parametrize("order", [["allow", "sub", "block"], ["block", "sub", "allow"], ["sub", "block", "allow"]])
async def test_a_block_wins_over_a_substitute_and_an_allow_in_any_load_order(order: list[str]) -> None:
    answers = {"allow": decision_reply("ALLOW", input_json='{"path": "b.txt"}'),
               "sub": decision_reply("SUBSTITUTE", output_json='"cached"'),
               "block": decision_reply("BLOCK", reason="destructive")}
    d, _, _ = dispatcher([extension(n, DECIDER) for n in order], answers)
    decision = await d.before_tool_call(CALL, CTX, None)
    assert decision is not None
    assert (decision.action, decision.reason, decision.extension) == ("block", "destructive", "block")


async def test_a_substitute_wins_over_an_allow_with_input() -> None:
    d, _, _ = dispatcher([extension("allow", DECIDER), extension("sub", DECIDER)],
                         {"allow": decision_reply("ALLOW", input_json='{"path": "b.txt"}'),
                          "sub": decision_reply("SUBSTITUTE", output_json='"cached"')})
    decision = await d.before_tool_call(CALL, CTX, None)
    assert decision is not None and (decision.action, decision.output) == ("substitute", "cached")


def test_precedence_keeps_the_first_allow_in_load_order() -> None:
    first = ExtensionDecision(action="allow", input={"n": 1}, has_input=True, extension="one")
    second = ExtensionDecision(action="allow", input={"n": 2}, has_input=True, extension="two")
    assert first_by_precedence([None, first, second]) is first
    assert first_by_precedence([None, None]) is None


async def test_a_fail_closed_decider_that_errors_blocks_the_call() -> None:
    d, _, events = dispatcher([extension("guard", CLOSED)],
                              {"guard": Failure("error", "RPC failed: UNAVAILABLE: gone", 2.0)})
    decision = await d.before_tool_call(CALL, CTX, None)
    assert decision is not None and decision.failed_closed and decision.action == "block"
    assert decision.reason == ("tool call 'delete_file' blocked: extension 'guard' failed its beforeToolCall hook "
                               "(error: RPC failed: UNAVAILABLE: gone) and its policy is failure: closed")
    assert [(e.extension, e.outcome) for e in events] == [("guard", "failed_closed")]


async def test_a_fail_open_decider_that_times_out_lets_the_call_run() -> None:
    d, _, events = dispatcher([extension("lenient", DECIDER)],
                              {"lenient": Failure("timeout", "no reply within 50 ms", 50.0)})
    assert await d.before_tool_call(CALL, CTX, None) is None
    assert [(e.extension, e.outcome, e.detail) for e in events] == [
        ("lenient", "failed_open", "timeout: no reply within 50 ms")]


async def test_a_fail_closed_decider_with_an_invalid_action_blocks_but_its_hook_error_is_named() -> None:
    bad = pb.ExtensionFrame(before_tool_call=pb.BeforeToolCallResponse(
        error=pb.HookError(name="ValueError", message="boom", hook="beforeToolCall")))
    d, _, _ = dispatcher([extension("guard", CLOSED)], {"guard": bad})
    decision = await d.before_tool_call(CALL, CTX, None)
    assert decision is not None and decision.failed_closed
    assert "(error: ValueError: boom)" in decision.reason


async def test_observers_without_decisions_are_not_awaited() -> None:
    d, scripted, _ = dispatcher([extension("watcher", {"beforeToolCall": {}})], {})
    assert await d.before_tool_call(CALL, CTX, None) is None
    assert scripted.sent == {}


def test_the_turn_deadline_cuts_a_hook_timeout_short() -> None:
    ext = extension("e", {"beforeTurn": {"timeoutMs": 5000}})
    assert hook_timeout(ext, "beforeTurn", None, 100.0) == (5.0, "")
    assert hook_timeout(ext, "beforeTurn", 101.5, 100.0) == (1.5, " (bounded by the turn's remaining time)")
    assert hook_timeout(ext, "beforeTurn", 200.0, 100.0) == (5.0, "")


def test_a_hook_is_not_called_once_the_turn_deadline_has_passed() -> None:
    ext = extension("e")
    assert hook_timeout(ext, "beforeTurn", 99.0, 100.0) == Failure("timeout", "not called: the turn's deadline has passed", 0.0)
