"""The Connect stream's way out: frames the extension sends (replies, acks, tool events, bridge requests).

`put_nowait(frame)` writes the frame at once, from the caller, when the stream is idle (nothing queued, no write in
flight): an awaited hook answered in the frame loop then leaves without a trip round the event loop through the
`Connect` generator. Otherwise the frame is queued and the generator yields it, in order. Only one write is ever in
flight (gRPC allows one), and `None` ends the stream after everything before it.
"""

from __future__ import annotations

import asyncio
import contextvars
import types
from collections import deque
from collections.abc import Coroutine, Generator
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
        self._task: asyncio.Task[None] | None = None
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


def _start(coro: Coroutine[Any, Any, None], done: Any) -> asyncio.Task[None] | None:
    """Run the write `coro` up to its first suspension here, the rest in a task; `done(error)` once at the end."""
    context = contextvars.copy_context()
    try:
        yielded = context.run(coro.send, None)
    except StopIteration:
        done(None)
        return None
    except BaseException as exc:  # noqa: BLE001 - the stream is gone: reported, the generator ends
        done(exc)
        return None
    return asyncio.get_running_loop().create_task(_finish(coro, yielded, done), context=context)  # type: ignore[arg-type]


async def _finish(coro: Coroutine[Any, Any, None], yielded: Any, done: Any) -> None:
    try:
        await _resume(coro, yielded)
    except BaseException as exc:  # noqa: BLE001 - reported to `done`
        done(exc)
        if isinstance(exc, asyncio.CancelledError):
            raise
        return
    done(None)


@types.coroutine
def _resume(coro: Coroutine[Any, Any, None], yielded: Any) -> Generator[Any, Any, None]:
    """Drive the rest of a coroutine already started: hand the task what it waits on, pass back what comes."""
    while True:
        try:
            value = yield yielded
        except BaseException as exc:  # noqa: BLE001 - cancellation and the rest go to the coroutine
            try:
                yielded = coro.throw(exc)
            except StopIteration:
                return
        else:
            try:
                yielded = coro.send(value)
            except StopIteration:
                return
