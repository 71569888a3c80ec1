"""The Connect stream's way out in the SDK (extension_sdk/_reply_out.py): a frame put while the stream is idle is
written at once, others wait their turn; one write in flight at a time, in order, the end after everything."""

from __future__ import annotations

import asyncio

from extension_sdk._reply_out import ReplyOut
from extension_sdk.proto import extension_pb2 as pb


class SlowWrites:
    """A servicer context whose writes finish only when the test says so (gRPC's own is not ours to fake in an
    integration test; here only the ordering rule is under test)."""

    def __init__(self) -> None:
        self.started: list[int] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.release = asyncio.Event()

    async def write(self, frame: pb.ExtensionFrame) -> None:
        self.started.append(frame.id)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await self.release.wait()
        finally:
            self.in_flight -= 1


async def drain(out: ReplyOut, ctx: SlowWrites) -> None:
    """What grpc.aio does with the Connect generator: write each frame it yields, one at a time."""
    while (frame := await out.get()) is not None:
        await ctx.write(frame)


async def test_frames_put_while_a_write_is_in_flight_go_out_after_it_in_order_one_at_a_time() -> None:
    ctx = SlowWrites()
    out = ReplyOut(ctx)
    writer = asyncio.ensure_future(drain(out, ctx))
    await asyncio.sleep(0)  # the generator waits: the stream is idle
    out.put_nowait(pb.ExtensionFrame(id=1))  # written from here, at once
    assert ctx.started == [1]
    for fid in (2, 3, 4):
        out.put_nowait(pb.ExtensionFrame(id=fid))
    out.put_nowait(None)
    await asyncio.sleep(0.01)
    assert ctx.started == [1]  # nothing else starts while the first write is in flight
    ctx.release.set()
    await asyncio.wait_for(writer, 5)
    assert ctx.started == [1, 2, 3, 4]
    assert ctx.most_in_flight == 1


async def test_a_direct_write_that_finishes_with_nothing_queued_leaves_the_generator_asleep() -> None:
    """The reply of an awaited hook written straight from the frame loop: the Connect generator waiting in get() has
    nothing to yield, so it is not woken (a task step per reply for nothing); a frame put later still reaches it."""
    ctx = SlowWrites()
    out = ReplyOut(ctx)
    rounds = 0
    real_get = out.get

    async def counting_get() -> pb.ExtensionFrame | None:
        nonlocal rounds
        rounds += 1
        return await real_get()

    wakes = 0
    real_set = out._wake.set

    def counting_set() -> None:
        nonlocal wakes
        wakes += 1
        real_set()

    out._wake.set = counting_set  # type: ignore[method-assign]
    getter = asyncio.create_task(counting_get())
    await asyncio.sleep(0)  # the generator now waits in get()
    out.put_nowait(pb.ExtensionFrame(id=1))  # idle: written at once
    assert ctx.started == [1]
    ctx.release.set()
    for _ in range(5):
        await asyncio.sleep(0)
    assert ctx.in_flight == 0 and not getter.done()
    assert wakes == 0  # the finished write woke nobody
    out.put_nowait(pb.ExtensionFrame(id=2))  # idle again: written at once too
    for _ in range(5):
        await asyncio.sleep(0)
    assert ctx.started == [1, 2] and wakes == 0
    out.put_nowait(None)
    assert await asyncio.wait_for(getter, 1) is None
    assert rounds == 1
