"""`SyncExtensionHarness`: the `ExtensionHarness` for plain (non-async) tests. Its event loop runs in a thread
of its own; every method blocks until the extension answers, with the same arguments and results."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterable, Mapping
from types import TracebackType
from typing import Any, TypeVar

from .._extension import Extension
from ._fake_host import FakeHost
from ._harness import ExtensionHarness

T = TypeVar("T")


class SyncExtensionHarness:
    """Blocking twin of `ExtensionHarness`, for tests that have no event loop (plain pytest):

        with SyncExtensionHarness(ext, files={"notes.txt": "hi"}) as h:
            assert h.call_tool("greet", {"name": "Ada"}) == "Hello, Ada!"
            assert h.before_turn(system="S") == {"system": "S\\nBe brief."}
    """

    def __init__(self, ext: Extension, **options: Any) -> None:
        self._harness = ExtensionHarness(ext, **options)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def host(self) -> FakeHost:
        """The fake host: preset and inspect `files`, `messages`, `context`, `sent`, `metadata`, `calls`."""
        return self._harness.host

    @property
    def ext(self) -> Extension:
        return self._harness.ext

    @property
    def session_id(self) -> str:
        return self._harness.session_id

    @property
    def request_id(self) -> str:
        return self._harness.request_id

    def next_turn(self) -> str:
        return self._harness.next_turn()

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            coro.close()
            raise RuntimeError("the SyncExtensionHarness is not started: use `with SyncExtensionHarness(ext) as h:`")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def __enter__(self) -> SyncExtensionHarness:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def start(self) -> None:
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name=f"hookwire-harness-{self.ext.name}", daemon=True)
        thread.start()
        self._loop, self._thread = loop, thread
        try:
            self._run(self._harness.start())
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        try:
            self._run(self._harness.close())
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            self._loop = self._thread = None
            if not thread.is_alive():
                loop.close()

    def describe(self) -> dict[str, Any]:
        return self._run(self._harness.describe())

    def before_turn(self, snapshot: Mapping[str, Any] | None = None, /, **fields: Any) -> dict[str, Any] | None:
        return self._run(self._harness.before_turn(snapshot, **fields))

    def before_tool_call(self, snapshot: Mapping[str, Any] | None = None, /, *, want_decision: bool = True,
                         **fields: Any) -> dict[str, Any] | None:
        return self._run(self._harness.before_tool_call(snapshot, want_decision=want_decision, **fields))

    def observe(self, events: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
        self._run(self._harness.observe(list(events)))

    def after_tool_call(self, snapshot: Mapping[str, Any] | None = None, /, **fields: Any) -> None:
        self._run(self._harness.after_tool_call(snapshot, **fields))

    def on_step_finish(self, snapshot: Mapping[str, Any] | None = None, /, **fields: Any) -> None:
        self._run(self._harness.on_step_finish(snapshot, **fields))

    def on_chunk(self, snapshot: Mapping[str, Any] | None = None, /, **fields: Any) -> None:
        self._run(self._harness.on_chunk(snapshot, **fields))

    def call_tool(self, name: str, args: Mapping[str, Any] | None = None, *,
                  on_preliminary: Callable[[Any], Any] | None = None) -> Any:
        return self._run(self._harness.call_tool(name, args, on_preliminary=on_preliminary))
