"""Write a frame on a Connect stream from the caller, now: the write's first step (which hands the message to gRPC)
runs in the caller, and the rest is driven by the completion of what it waits on — no task, no sender wake-up.

An awaited hook on an idle stream then costs no trip round the event loop before its frame leaves (the sender task
would have had to wake first), and the caller never awaits the write itself: cancelling the caller (a timeout, a
cancelled turn) cannot cancel a write half done, which grpc.aio answers by cancelling the whole stream.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine
from typing import Any

Done = Callable[[BaseException | None], None]


class EagerWrite:
    """One write in flight: `coro` driven step by step from the done callbacks of the futures it awaits."""

    __slots__ = ("_coro", "_done", "_context", "_waiting", "_finished")

    def __init__(self, coro: Coroutine[Any, Any, None], done: Done) -> None:
        self._coro = coro
        self._done = done
        self._context = contextvars.copy_context()
        self._waiting: asyncio.Future[Any] | None = None
        self._finished = False

    def _step(self, value: BaseException | None = None) -> None:
        """One step of the write, run in its own context (the callbacks are registered with it)."""
        self._waiting = None
        try:
            if value is None:
                yielded = self._coro.send(None)
            else:
                yielded = self._coro.throw(value)
        except StopIteration:
            self._finish(None)
            return
        except BaseException as exc:  # noqa: BLE001 - the write failed (the stream broke, or it was cancelled)
            self._finish(exc)
            return
        if asyncio.isfuture(yielded) and getattr(yielded, "_asyncio_future_blocking", False):
            yielded._asyncio_future_blocking = False
            self._waiting = yielded
            yielded.add_done_callback(self._wake, context=self._context)
        elif yielded is None:  # a bare yield (asyncio.sleep(0)): go on at the next turn of the loop
            asyncio.get_running_loop().call_soon(self._step, context=self._context)
        else:
            self._step(RuntimeError(f"a stream write awaited {yielded!r}, not a future"))

    def _wake(self, _fut: asyncio.Future[Any]) -> None:
        self._step()  # the coroutine reads the future's result (or its exception) itself

    def _finish(self, error: BaseException | None) -> None:
        if not self._finished:
            self._finished = True
            self._done(error)

    def cancel(self) -> None:
        """Stop waiting (the connection closes): the write ends with a CancelledError reported to `done`."""
        waiting = self._waiting
        if waiting is not None and not waiting.done():
            waiting.remove_done_callback(self._wake)
            self._waiting = None
            self._context.run(self._step, asyncio.CancelledError())


def start_write(coro: Coroutine[Any, Any, None], done: Done) -> EagerWrite | None:
    """Run `coro` (a stream write) up to its first suspension here, the rest as what it waits on completes. `done(error)`
    is called exactly once when the write finished (error None) or failed. None when it finished at once."""
    write = EagerWrite(coro, done)
    write._context.run(write._step)
    return None if write._finished else write
