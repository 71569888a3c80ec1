"""`host.preload()`: litellm's import and its first call's set-up, done before the event loop serves.

`import host` stays cheap: litellm (~3 s to import) is imported when it is first needed, at the first Agent start,
and its first model call then imports ~85 modules more (provider tables, the streaming handler's helpers: ~0.4 s).
Both would run on the event loop, in the middle of a host app that already serves other sessions: measured, the
first Agent start held the loop for 2.6–3.1 s and the first turn for another ~80 ms (bench/first_turn.py).

`preload()` does that work up front, in the calling thread: it imports litellm, registers the embedded model,
installs the quiet switches of host/turn/_litellm_work.py, and makes one streamed call with a tool call on the
embedded model (`hookwire/scripted`: offline, no network, no key), in an event loop of its own in a short-lived
thread, so it works whether or not the calling thread runs a loop. After it, the first Agent start and its first
turn import nothing (tests/agent/test_preload.py).

The warm-up call is skipped (`warmed=False`) when the app registered a litellm callback or a budget
(`_litellm_work.callbacks_registered`): its callbacks would see a call the app never made. A warm-up call that fails
is logged (logger "hookwire") and reported `warmed=False`; the import failing raises, as `import litellm` would.

Call it at start-up, before the loop serves (`preload()` then `asyncio.run(main())`, or before `uvicorn.run`).
From inside a running loop, `await asyncio.to_thread(preload)` keeps the loop serving, but only while nothing else
in the process imports modules meanwhile (two threads importing at once can meet in an import-lock cycle, which
CPython breaks by raising in one of them: see host/_cli_cold.py).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from typing import Any

from pydantic import BaseModel, ConfigDict

logger = logging.getLogger("hookwire")

_lock = threading.Lock()
_warmed = False

#: the warm-up call: one step that calls a tool, so the tool-call deltas' paths are set up too
_WARM_TOOL = {"type": "function", "function": {
    "name": "warm_up", "description": "", "parameters": {"type": "object", "properties": {}}}}
_WARM_REQUEST: dict[str, Any] = {
    "messages": [{"role": "user", "content": "/tool warm_up {}"}],
    "tools": [_WARM_TOOL],
    "stream": True,
    "stream_options": {"include_usage": True},
}


class PreloadReport(BaseModel):
    """What `preload()` did, and how long each part took (seconds)."""

    model_config = ConfigDict(frozen=True)

    #: litellm was imported by this call (False: it already was, by the app or an earlier preload)
    imported: bool
    import_s: float
    #: the warm-up call ran (False: it had already run in this process, or a litellm callback is registered)
    warmed: bool
    #: the warm-up call's time (0.0 when it was not made)
    warm_s: float


def preload() -> PreloadReport:
    """Import litellm and set up its first model call now, so the first Agent start and its first turn don't do
    it on the event loop. Idempotent and thread-safe; blocks the calling thread (~3.5 s on a cold process)."""
    global _warmed
    with _lock:
        imported = "litellm" not in sys.modules
        t0 = time.perf_counter()
        import litellm

        from ._litellm_work import callbacks_registered, install
        from ._scripted_model import SCRIPTED_MODEL, register_scripted_model

        litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banners around a failed call's error
        register_scripted_model()
        install()
        t1 = time.perf_counter()
        warmed, warm_s = False, 0.0
        if not _warmed and not callbacks_registered():
            failure = _warm_up(SCRIPTED_MODEL)
            warm_s = round(time.perf_counter() - t1, 6)
            if failure is None:
                _warmed = warmed = True
            else:  # not fatal: the first turn sets litellm up itself, as without preload()
                logger.warning("preload: the warm-up call on %s failed (%s: %s); the first turn will set up "
                               "litellm's model call itself", SCRIPTED_MODEL, type(failure).__name__, failure)
        return PreloadReport(imported=imported, import_s=round(t1 - t0, 6), warmed=warmed, warm_s=warm_s)


def _warm_up(model: str) -> Exception | None:
    """One streamed call on the embedded model, read to its end, in a loop of its own (in a thread of its own: the
    caller's thread may already run one). litellm's bookkeeping is off for it, as for the host's turns. Returns
    what it raised, if anything."""
    from ._litellm_work import quiet_flag

    failure: list[Exception] = []

    async def call() -> None:
        import litellm

        quiet_flag.set(True)  # this thread's loop only: the flag lives in asyncio.run's context
        stream = await litellm.acompletion(model=model, **_WARM_REQUEST)
        async for _ in stream:
            pass

    def run() -> None:
        try:
            asyncio.run(call())
        except Exception as exc:  # noqa: BLE001 - reported by preload()
            failure.append(exc)

    thread = threading.Thread(target=run, name="hookwire-preload", daemon=True)
    thread.start()
    thread.join()
    return failure[0] if failure else None
