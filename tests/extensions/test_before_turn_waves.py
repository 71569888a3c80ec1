"""beforeTurn subscribers whose answers can't change the next ones' input are asked at once; nothing else changes.

In-memory extensions (no process), answers scripted through the dispatcher's `call` seam, as in test_dispatch.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

from extension_sdk.proto import extension_pb2 as pb
from host import CallContext, TurnSnapshot, parse_manifest
from host.extensions._dispatch import Dispatcher, Failure, Reply
from host.extensions._registry import Registry
from host.extensions._state import ExtensionRuntime
from host.extensions._trace import Tracer

CTX = CallContext(session_id="s", request_id="r1")
TURN = TurnSnapshot(system="base prompt", tool_names=["search"], message_count=1, model_id="openai/gpt-4o")


def extension(name: str, grant: list[str] | None = None, mode: str = "enforce") -> ExtensionRuntime:
    data: dict[str, Any] = {"name": name, "command": ["true"], "hooks": {"beforeTurn": {"mode": mode}}}
    if grant is not None:
        data["permissions"] = {"turnConfig": grant}
    ext = ExtensionRuntime(parse_manifest(data))
    ext.state = "running"
    ext.hooks = ["beforeTurn"]
    return ext


class Scripted:
    """Each extension's answer (a TurnConfigPatch), after `delay` loop turns; what each was sent; how many at once."""

    def __init__(self, answers: dict[str, pb.TurnConfigPatch], delay: dict[str, int] | None = None) -> None:
        self.answers = answers
        self.delay = delay or {}
        self.sent: dict[str, pb.HostFrame] = {}
        self.in_flight = 0
        self.most_at_once = 0
        self.answered: list[str] = []

    async def __call__(self, ext: ExtensionRuntime, hook: str, frame: pb.HostFrame, context: CallContext | None,
                       deadline: float | None) -> Reply | Failure:
        self.sent[ext.name] = frame
        self.in_flight += 1
        self.most_at_once = max(self.most_at_once, self.in_flight)
        for _ in range(self.delay.get(ext.name, 1)):
            await asyncio.sleep(0)
        self.in_flight -= 1
        self.answered.append(ext.name)
        return Reply(pb.ExtensionFrame(before_turn=pb.BeforeTurnResponse(config=self.answers[ext.name])), 1.0)


async def run(exts: list[ExtensionRuntime], script: Scripted) -> Any:
    registry = Registry()
    for ext in exts:
        registry.exts[ext.name] = ext
    registry.changed()
    return await Dispatcher(registry, Tracer(), call=script).before_turn(TURN, CTX, None)


async def test_extensions_that_cannot_set_system_or_tools_are_asked_at_once() -> None:
    exts = [extension(n, grant=["temperature", "maxOutputTokens"]) for n in ("a", "b", "c")]
    script = Scripted({n: pb.TurnConfigPatch() for n in "abc"})
    await run(exts, script)
    assert script.most_at_once == 3


async def test_default_grant_extensions_are_asked_one_after_another_each_seeing_the_system_before_it() -> None:
    script = Scripted({"a": pb.TurnConfigPatch(system="set by a"), "b": pb.TurnConfigPatch()})
    await run([extension("a"), extension("b")], script)
    assert (script.most_at_once, script.sent["b"].before_turn.snapshot.system) == (1, "set by a")


async def test_a_wave_ends_at_the_extension_that_may_set_system_and_the_next_sees_its_system() -> None:
    script = Scripted({"a": pb.TurnConfigPatch(), "b": pb.TurnConfigPatch(system="set by b"),
                       "c": pb.TurnConfigPatch()})
    await run([extension("a", grant=["temperature"]), extension("b"), extension("c", grant=["temperature"])], script)
    sent = {n: script.sent[n].before_turn.snapshot.system for n in "abc"}
    assert (script.most_at_once, sent) == (2, {"a": "base prompt", "b": "base prompt", "c": "set by b"})


async def test_answers_asked_at_once_merge_in_load_order_whoever_answers_first() -> None:
    script = Scripted({"a": pb.TurnConfigPatch(temperature=0.1), "b": pb.TurnConfigPatch(temperature=0.9)},
                      delay={"a": 5, "b": 1})
    merged = await run([extension("a", grant=["temperature"]), extension("b", grant=["temperature"])], script)
    assert (script.answered, merged.patch.temperature, merged.provenance) == (["b", "a"], 0.9, {"temperature": "b"})


async def test_a_shadow_extension_does_not_end_a_wave() -> None:
    script = Scripted({"a": pb.TurnConfigPatch(system="would set"), "b": pb.TurnConfigPatch()})
    await run([extension("a", mode="shadow"), extension("b")], script)
    assert (script.most_at_once, script.sent["b"].before_turn.snapshot.system) == (2, "base prompt")


async def test_a_subscriber_running_again_mid_wave_opens_its_own_and_nobody_is_asked_twice() -> None:
    a, b, c = (extension(n, grant=["temperature"]) for n in "abc")
    b.state = "restarting"
    asked: list[str] = []
    script = Scripted({n: pb.TurnConfigPatch() for n in "abc"})

    async def call(ext: ExtensionRuntime, hook: str, frame: pb.HostFrame, context: CallContext | None,
                   deadline: float | None) -> Reply | Failure:
        asked.append(ext.name)
        b.state = "running"  # b's restart finishes while the first wave is in flight
        return await script(ext, hook, frame, context, deadline)

    await run([a, b, c], call)  # type: ignore[arg-type]
    assert sorted(asked) == ["a", "b", "c"]
