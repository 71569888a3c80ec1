"""The Connect stream's way out: frames the extension sends (replies, acks, tool events, bridge requests).

`put_nowait(frame)` writes the frame at once, from the caller, when the stream is idle (nothing queued, no write in
flight): an awaited hook answered in the frame loop then leaves without a trip round the event loop through the
`Connect` generator. Otherwise the frame is queued and the generator yields it, in order. Only one write is ever in
flight (gRPC allows one), and `None` ends the stream after everything before it.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

from .proto import extension_pb2 as pb


class ReplyOut:
    """Frames out of one Connect stream: written directly when idle, else yielded by the generator (`get`)."""

    def __init__(self, context: Any) -> None:
        self._context = context  # the call's grpc.aio ServicerContext (its `write`)
        self._queue: deque[pb.ExtensionFrame | None] = deque()
        self._wake = asyncio.Event()
        self._writing = False  # a write is in flight (a direct one, or the generator's)
        self._waiting = False  # the generator waits in get(): it is not writing
        self._task: _Write | None = None
        self.failed: BaseException | None = None  # a direct write that failed (the stream is gone)

    def put_nowait(self, frame: pb.ExtensionFrame | None) -> None:
        if frame is not None and self._waiting and not self._writing and not self._queue and self.failed is None:
            self._writing = True
            self._task = _start(self._context.write(frame), self._wrote)
            return
        self._queue.append(frame)
        self._wake.set()

    def _wrote(self, error: BaseException | None) -> None:
        self._writing = False
        self._task = None
        if error is not None and not isinstance(error, asyncio.CancelledError):
            self.failed = error
        if self._queue or self.failed is not None:  # else get() would only wake to find nothing, and wait again
            self._wake.set()

    async def get(self) -> pb.ExtensionFrame | None:
        """The next queued frame for the generator to yield (after any direct write finished); None: the end."""
        self._waiting = True
        try:
            while self._writing or not self._queue:
                if self.failed is not None:
                    return None
                self._wake.clear()
                await self._wake.wait()
            return self._queue.popleft()
        finally:
            self._waiting = False

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()


def _start(coro: Coroutine[Any, Any, None], done: Callable[[BaseException | None], None]) -> _Write | None:
    """Run the write `coro` up to its first suspension here, the rest as what it waits on completes (no task);
    `done(error)` once at the end. None when it finished at once."""
    write = _Write(coro, done)
    write.context.run(write.step)
    return None if write.finished else write


class _Write:
    """One write in flight, driven step by step from the done callbacks of the futures it awaits."""

    __slots__ = ("coro", "done", "context", "waiting", "finished")

    def __init__(self, coro: Coroutine[Any, Any, None], done: Callable[[BaseException | None], None]) -> None:
        self.coro = coro
        self.done = done
        self.context = contextvars.copy_context()
        self.waiting: asyncio.Future[Any] | None = None
        self.finished = False

    def step(self, value: BaseException | None = None) -> None:
        """One step, run in the write's own context (its callbacks are registered with it)."""
        self.waiting = None
        try:
            yielded = self.coro.send(None) if value is None else self.coro.throw(value)
        except StopIteration:
            self._finish(None)
            return
        except BaseException as exc:  # noqa: BLE001 - the write failed (the stream is gone, or cancelled)
            self._finish(exc)
            return
        if asyncio.isfuture(yielded) and getattr(yielded, "_asyncio_future_blocking", False):
            yielded._asyncio_future_blocking = False
            self.waiting = yielded
            yielded.add_done_callback(self._wake, context=self.context)
        elif yielded is None:  # a bare yield: go on at the next turn of the loop
            asyncio.get_running_loop().call_soon(self.step, context=self.context)
        else:
            self.step(RuntimeError(f"a stream write awaited {yielded!r}, not a future"))

    def _wake(self, _fut: asyncio.Future[Any]) -> None:
        self.step()

    def _finish(self, error: BaseException | None) -> None:
        if not self.finished:
            self.finished = True
            self.done(error)

    def cancel(self) -> None:
        waiting = self.waiting
        if waiting is not None and not waiting.done():
            waiting.remove_done_callback(self._wake)
            self.waiting = None
            self.context.run(self.step, asyncio.CancelledError())
