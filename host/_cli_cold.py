"""Cold start of `hookwire run` / `chat` / `demo`: import litellm in a thread while the extensions start, and say so.

Importing litellm is most of a cold `hookwire run` (seconds); starting extensions is sub-second to a second of
mostly waiting on child processes. `start_extensions` overlaps the two: a thread runs `host.preload()` (litellm,
the scripted model, which registers with it, and one warm-up call on it, so the first turn imports nothing more:
host/turn/_preload.py) while the event loop spawns and handshakes the extensions, and a spinner
(host._cli_output.Progress) says which is still going.

Import-lock safety: CPython takes a lock per module being imported, and two threads importing modules that
import each other (a package and its submodule, say) can meet in a lock cycle, which CPython breaks by raising
in one of them. That can't happen here because the two threads never import concurrently: the main thread has
already imported everything it needs to start extensions (host.extensions and its dependencies, imported by the
caller before this runs; `load_all` imports nothing new — checked by tests/cli/test_cli_cold.py), and it waits for
the thread before anything else imports (Agent start, the turn). Should the thread's import fail anyway, the
main thread imports litellm itself afterwards, so the error (if any) is the ordinary one. The spinner's thread
(rich) only draws: Progress draws once in the main thread before this thread starts, so what rich needs to draw
is imported by then (litellm imports a few rich modules too).

A process that leaves while the thread is still importing (an extension failed to start) must not run
interpreter shutdown under a half-done import: `unfinished()` tells main() to flush and `os._exit`.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from ._cli_output import Progress

_thread: threading.Thread | None = None


def _import_litellm() -> None:
    from .turn._preload import preload

    preload()  # litellm, the embedded model, and the first model call's set-up (its lazy imports), off the loop


class LitellmImport:
    """litellm imported by a daemon thread; `await wait()` until it is (re-raising nothing: see module doc)."""

    def __init__(self) -> None:
        global _thread
        self.error: BaseException | None = None
        self.seconds: float | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hookwire-import-litellm", daemon=True)
        if "litellm" in sys.modules:
            self._done.set()
            return
        _thread = self._thread
        self._thread.start()

    def _run(self) -> None:
        t0 = time.perf_counter()
        try:
            _import_litellm()
        except BaseException as exc:  # noqa: BLE001 - the main thread imports again and reports it
            self.error = exc
        self.seconds = time.perf_counter() - t0
        self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    async def wait(self) -> None:
        while not self._done.is_set():
            await asyncio.sleep(0.02)
        if self.error is not None:
            _import_litellm()


def unfinished() -> bool:
    """Whether a litellm import thread of this process is still running."""
    return _thread is not None and _thread.is_alive()


def _names(manifests: Sequence[str]) -> str:
    from pathlib import Path

    names = [Path(m).parent.name if Path(m).stem == "manifest" else Path(m).stem for m in manifests]
    return ", ".join(names)


async def start_extensions(manager: Any, manifests: Sequence[str], progress: Progress) -> Any:
    """`manager.load_all(manifests)` with litellm importing alongside; returns load_all's result once both are
    done. Manifests are read first, so a bad one fails at once, before any import starts."""
    from .extensions._manifest import load_manifest

    for file in manifests:
        load_manifest(file)
    litellm_import = LitellmImport()
    doing = [f"starting extensions: {_names(manifests)}"] if manifests else []
    progress.update(" · ".join([*doing, "importing litellm"]) if not litellm_import.done else " · ".join(doing))
    infos = await manager.load_all(manifests)
    if not litellm_import.done:
        progress.update("importing litellm")
    await litellm_import.wait()
    progress.update("starting the turn")
    return infos
