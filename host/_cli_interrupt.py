"""Ctrl-C and stdin for `hookwire chat`: Ctrl-C mid-turn aborts the turn, at an idle prompt it leaves at once.

`input()` in a worker thread can't be interrupted (asyncio.run would wait for it at exit), so stdin is read by a
daemon thread with os.read (no buffered-reader lock to hang interpreter shutdown) and handed to the loop line by
line. SIGINT goes to `ChatInterrupts`: while a turn runs it sets the turn's abort signal (the turn ends aborted as
with cancel_chat, its partial message kept, and the prompt comes back); otherwise it ends the chat.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from typing import Any


class ChatQuit(Exception):
    """Ctrl-C at the idle prompt (or twice during a turn): leave the chat."""


class StdinLines:
    """Lines of a file descriptor, read by a daemon thread; `readline()` returns None at end of input."""

    def __init__(self, fd: int = 0) -> None:
        self._fd = fd
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._buffer = b""
        self._eof = False
        threading.Thread(target=self._pump, name="hookwire-stdin", daemon=True).start()

    def _pump(self) -> None:
        while True:
            try:
                data = os.read(self._fd, 65536)
            except OSError:
                data = b""
            with contextlib.suppress(RuntimeError):  # the loop closed: the chat is over
                self._loop.call_soon_threadsafe(self._queue.put_nowait, data or None)
            if not data:
                return

    async def readline(self) -> str | None:
        while b"\n" not in self._buffer and not self._eof:
            data = await self._queue.get()
            if data is None:
                self._eof = True
            else:
                self._buffer += data
        if not self._buffer:
            return None
        line, sep, rest = self._buffer.partition(b"\n")
        self._buffer = rest
        return line.decode("utf-8", "replace")


class ChatInterrupts:
    """SIGINT for the chat loop: abort the running turn, or end the chat when idle."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.turn_signal: asyncio.Event | None = None  # the running turn's abort signal, while one runs
        self.quit = asyncio.Event()
        self.installed = False

    def __enter__(self) -> "ChatInterrupts":
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread
            self._loop.add_signal_handler(signal.SIGINT, self._on_sigint)
            self.installed = True
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.installed:
            with contextlib.suppress(Exception):
                self._loop.remove_signal_handler(signal.SIGINT)

    def _on_sigint(self) -> None:
        if self.turn_signal is not None and not self.turn_signal.is_set():
            self.turn_signal.set()  # the turn ends aborted, as cancel_chat ends it; a second Ctrl-C quits
            return
        self.quit.set()

    def turn(self) -> asyncio.Event:
        """A fresh abort signal for the next turn (pass it to chat(signal=...))."""
        self.turn_signal = asyncio.Event()
        return self.turn_signal

    async def until_quit(self, aw: Any) -> Any:
        """Await `aw` unless Ctrl-C asks to quit first; then raise ChatQuit."""
        task = asyncio.ensure_future(aw)
        quitting = asyncio.ensure_future(self.quit.wait())
        try:
            await asyncio.wait({task, quitting}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            quitting.cancel()
        if task.done():
            return task.result()
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        raise ChatQuit()
