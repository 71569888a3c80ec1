"""The message store's own worker thread: every SQLite call of one `MessageStore` runs on it, off the event loop.

A lighter hand-off than `loop.run_in_executor` on a one-worker `ThreadPoolExecutor` (what the store used before):
a job is one tuple put on a `queue.SimpleQueue`, and its result comes back with one `loop.call_soon_threadsafe`
straight into the awaiting asyncio future — no `concurrent.futures.Future`, no work item, no chained futures and
their two extra callbacks per hop. A turn makes a few store round trips, so the hop's own cost is part of the host's
cost per turn (docs/benchmarks.md, "the floor under a turn").

Semantics kept from the executor: jobs run one at a time in submission order; a job whose awaiting future was
cancelled before the job started is skipped (as a cancelled executor future is never run); once running, a job runs to
its end whatever happens to its awaiter. The thread is a daemon (an unclosed store must not hang the interpreter's
exit) and an `atexit` hook drains and joins every live one, as the executor's did: queued writes still finish.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_STOP = object()
_live: weakref.WeakSet[StoreThread] = weakref.WeakSet()


def _resolve(fut: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if fut.cancelled():
        return
    if ok:
        fut.set_result(value)
    else:
        fut.set_exception(value)


class StoreThread:
    """One worker thread running submitted callables in order."""

    def __init__(self, name: str = "hookwire-store") -> None:
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._stopped = False
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()
        _live.add(self)

    def _work(self) -> None:
        jobs = self._jobs
        while True:
            job = jobs.get()
            if job is _STOP:
                return
            fn, loop, fut = job
            if loop is None:  # a blocking caller's job (call()): fut is a concurrent.futures.Future
                if fut.set_running_or_notify_cancel():
                    try:
                        fut.set_result(fn())
                    except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
                        fut.set_exception(exc)
                continue
            if fut.cancelled():  # its awaiter gave up before it started: not run (as with an executor)
                continue
            try:
                result, ok = fn(), True
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
                result, ok = exc, False
            try:
                loop.call_soon_threadsafe(_resolve, fut, ok, result)
            except RuntimeError:  # the awaiting loop is closed: nobody is waiting any more
                pass
            del job, fn, fut, result

    async def run(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the thread and wait for its result (or exception) without blocking the event loop."""
        if self._stopped:
            raise RuntimeError("the store thread is stopped")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        self._jobs.put((fn, loop, fut))
        return await fut

    def call(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the thread and block this (non-loop) thread until it is done."""
        if self._stopped:
            raise RuntimeError("the store thread is stopped")
        fut: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._jobs.put((fn, None, fut))
        return fut.result()

    def stop(self, wait: bool = False) -> None:
        """No new jobs; the thread ends once the queued ones ran (`wait`: join it)."""
        if not self._stopped:
            self._stopped = True
            self._jobs.put(_STOP)
        if wait and self._thread is not threading.current_thread():
            self._thread.join()


@atexit.register
def _drain_at_exit() -> None:
    for worker in list(_live):
        worker.stop(wait=True)
