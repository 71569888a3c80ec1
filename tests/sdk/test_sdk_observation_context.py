"""Every handler of an observation batch sees the batch's call context, whatever a handler before it left behind."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from extension_sdk import Extension, current_call
from extension_sdk._call_context import set_current_call
from extension_sdk._extension_server import ExtensionServicer
from extension_sdk.proto import extension_pb2 as pb


def _chunks(*texts: str, traceparent: str = "") -> pb.ObservationBatch:
    return pb.ObservationBatch(
        context=pb.CallContext(session_id="s1", request_id="r1", traceparent=traceparent),
        items=[pb.Observation(chunk=pb.ChunkSnapshot(type="text-delta", text=t)) for t in texts],
    )


def _observer() -> tuple[ExtensionServicer, list[tuple[str, tuple[str, str]]]]:
    ext = Extension("obs", "1.0.0")
    seen: list[tuple[str, tuple[str, str]]] = []

    @ext.hook("onChunk")
    async def on_chunk(snapshot: dict[str, Any]) -> None:
        seen.append((snapshot["text"], tuple(current_call())))
        if snapshot["text"] == "a":  # what a handler serving something else in this task would leave behind
            set_current_call(pb.CallContext(session_id="elsewhere", request_id="x"))

    return ExtensionServicer(ext, None, lambda _grace: None, ThreadPoolExecutor(1)), seen


async def test_a_handler_that_changed_the_call_context_does_not_leak_it_to_the_next_items() -> None:
    servicer, seen = _observer()
    ack = await servicer._observe(_chunks("a", "b", "c"))
    assert ack.handled == 3 and list(ack.errors) == []
    assert seen == [("a", ("s1", "r1")), ("b", ("s1", "r1")), ("c", ("s1", "r1"))]


async def test_a_traced_batch_gives_every_handler_its_call_context_too() -> None:
    servicer, seen = _observer()
    await servicer._observe(_chunks("a", "b", traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"))
    assert seen == [("a", ("s1", "r1")), ("b", ("s1", "r1"))]
