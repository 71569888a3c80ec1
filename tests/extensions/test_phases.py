"""Two-phase beforeToolCall and shadow mode on in-memory extensions (no process): host/extensions/_phases.py.

Each test scripts what each extension answers through the dispatcher's `call` seam (test_dispatch.py's helpers)
and pins one rule: mutators in load order each see the input the one before left, validators judge the final
input, a validator cannot change it, a shadow hook applies nothing and says what it would have done. The same
rules run through real extension processes in tests/agent/test_agent_guards.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_dispatch import CALL, CTX, TURN, Failure, decision_reply, dispatcher, extension, turn_reply

from host import ManifestError, parse_manifest

MUTATE = {"beforeToolCall": {"decisions": True, "phase": "mutate"}}
VALIDATE = {"beforeToolCall": {"decisions": True, "phase": "validate"}}


def seen_input(frame: Any) -> Any:
    return json.loads(frame.before_tool_call.snapshot.input_json)


async def test_mutators_run_in_load_order_and_validators_judge_the_final_input() -> None:
    exts = [extension("check", VALIDATE), extension("m1", MUTATE), extension("m2", MUTATE)]
    d, scripted, events = dispatcher(exts, {
        "m1": decision_reply("ALLOW", input_json='{"path": "a.txt", "by": ["m1"]}'),
        "m2": decision_reply("ALLOW", input_json='{"path": "a.txt", "by": ["m1", "m2"]}'),
        "check": decision_reply("ALLOW")})
    decision = await d.before_tool_call(CALL, CTX, None)
    assert seen_input(scripted.sent["m1"]) == {"path": "a.txt"}
    assert seen_input(scripted.sent["m2"]) == {"path": "a.txt", "by": ["m1"]}
    assert seen_input(scripted.sent["check"]) == {"path": "a.txt", "by": ["m1", "m2"]}
    assert decision is not None
    assert (decision.action, decision.input, decision.input_changed_by) == (
        "allow", {"path": "a.txt", "by": ["m1", "m2"]}, ["m1", "m2"])
    assert [(e.extension, e.phase, e.detail) for e in events] == [
        ("m1", "mutate", "changed the input"), ("m2", "mutate", "changed the input"), ("check", "validate", "")]


async def test_a_validator_blocks_the_mutated_input_and_the_block_names_who_changed_it() -> None:
    d, _, _ = dispatcher([extension("m", MUTATE), extension("check", VALIDATE)], {
        "m": decision_reply("ALLOW", input_json='{"path": "/etc/passwd"}'),
        "check": decision_reply("BLOCK", reason="outside the workspace")})
    decision = await d.before_tool_call(CALL, CTX, None)
    assert decision is not None
    assert (decision.action, decision.reason, decision.extension, decision.input_changed_by) == (
        "block", "outside the workspace", "check", ["m"])


async def test_a_validators_input_change_is_refused_and_traced() -> None:
    d, _, events = dispatcher([extension("check", {"beforeToolCall": {"decisions": True}})],
                              {"check": decision_reply("ALLOW", input_json='{"path": "b.txt"}')})
    assert await d.before_tool_call(CALL, CTX, None) is None
    assert [(e.outcome, e.phase, e.detail) for e in events] == [
        ("ok", "validate", "input change refused (phase: validate); counted as allow")]


async def test_a_shadow_block_is_traced_as_would_block_and_nothing_is_blocked() -> None:
    d, _, events = dispatcher([extension("guard", VALIDATE, mode="shadow")],
                              {"guard": decision_reply("BLOCK", reason="destructive")})
    assert await d.before_tool_call(CALL, CTX, None) is None
    assert [(e.outcome, e.mode, e.detail) for e in events] == [("denied", "shadow", "shadow: would block: destructive")]


async def test_a_shadow_mutator_changes_nothing_the_next_one_sees() -> None:
    shadow = {"beforeToolCall": {"decisions": True, "phase": "mutate", "mode": "shadow"}}
    d, scripted, events = dispatcher([extension("trial", shadow), extension("check", VALIDATE)],
                                     {"trial": decision_reply("ALLOW", input_json='{"path": "z.txt"}'),
                                      "check": decision_reply("ALLOW")})
    assert await d.before_tool_call(CALL, CTX, None) is None
    assert seen_input(scripted.sent["check"]) == {"path": "a.txt"}
    assert (events[0].mode, events[0].detail) == ("shadow", "shadow: would change the input")


async def test_a_shadow_fail_closed_decider_that_fails_does_not_block() -> None:
    closed = {"beforeToolCall": {"decisions": True, "failure": "closed"}}
    d, _, events = dispatcher([extension("guard", closed, mode="shadow")],
                              {"guard": Failure("timeout", "no reply within 50 ms", 50.0)})
    assert await d.before_tool_call(CALL, CTX, None) is None
    assert [(e.outcome, e.mode, e.detail) for e in events] == [
        ("failed_open", "shadow", "shadow: would fail closed: timeout: no reply within 50 ms")]


async def test_shadow_before_turn_fields_are_traced_as_would_set_and_not_applied() -> None:
    d, scripted, events = dispatcher([extension("trial", {"beforeTurn": {"mode": "shadow"}}), extension("next")],
                                     {"trial": turn_reply(system="from trial", max_steps=3),
                                      "next": turn_reply(temperature=0.5)})
    merged = await d.before_turn(TURN, CTX, None)
    assert merged.patch.set_fields() == {"temperature": 0.5}
    assert merged.provenance == {"temperature": "next"}
    assert scripted.sent["next"].before_turn.snapshot.system == "base prompt"
    assert [(e.extension, e.mode, e.detail) for e in events] == [
        ("trial", "shadow", "shadow: would set system, maxSteps"), ("next", "enforce", "set temperature")]


@pytest.mark.parametrize(("hooks", "field", "reason"), [
    ({"beforeToolCall": {"decisions": True, "phase": "first"}}, "hooks.beforeToolCall.phase",
     "Input should be 'mutate' or 'validate'"),
    ({"beforeTurn": {"phase": "mutate"}}, "hooks.beforeTurn.phase", "only beforeToolCall has phases"),
    ({"beforeToolCall": {"phase": "mutate"}}, "hooks.beforeToolCall.phase", "needs `decisions: true`"),
    ({"beforeTurn": {"mode": "dry-run"}}, "hooks.beforeTurn.mode", "Input should be 'enforce' or 'shadow'"),
])
def test_a_bad_phase_or_mode_is_an_error_naming_the_file_and_field(hooks: dict[str, Any], field: str,
                                                                     reason: str) -> None:
    with pytest.raises(ManifestError) as info:
        parse_manifest({"name": "g", "command": ["true"], "hooks": hooks}, "guard.yaml")
    assert (info.value.file, info.value.field) == ("guard.yaml", field)
    assert reason in info.value.reason


class Counter:
    """Stands in for the OpenTelemetry counter `hookwire.hook.outcomes` (the API is a no-op without an SDK)."""

    def __init__(self) -> None:
        self.added: list[dict[str, str]] = []

    def add(self, value: int, attributes: dict[str, str]) -> None:
        self.added.append(attributes)


async def test_a_shadow_outcome_is_counted_with_the_shadow_mode_attribute(monkeypatch: pytest.MonkeyPatch) -> None:
    from host import _telemetry

    counter = Counter()
    monkeypatch.setattr(_telemetry, "_hook_outcomes", counter)
    d, _, _ = dispatcher([extension("guard", VALIDATE, mode="shadow"), extension("live", VALIDATE)],
                         {"guard": decision_reply("BLOCK", reason="no"), "live": decision_reply("ALLOW")})
    await d.before_tool_call(CALL, CTX, None)
    counted = sorted((a["hookwire.extension"], a["hookwire.outcome"], a.get("hookwire.mode", ""))
                     for a in counter.added)
    assert counted == [("guard", "denied", "shadow"), ("live", "ok", "")]
