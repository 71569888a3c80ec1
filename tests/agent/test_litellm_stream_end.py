"""The end of a quiet litellm stream (host/turn/_litellm_stream_end.py): the complete response assembled once per
stream, not at each of the last two steps, and the same chunks, usage included, as litellm's own stream end."""

from __future__ import annotations

import contextvars
import os
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm
import pytest
from litellm.litellm_core_utils import streaming_handler

from host import SCRIPTED_MODEL, register_scripted_model
from host.turn import _litellm_stream_end as stream_end
from host.turn import _litellm_work
from host.turn._litellm_work import install, quiet_context, quiet_flag

SCRIPT = '/tool lookup {"key": "a"}\n/next\ndone'
TOOLS = [{"type": "function", "function": {"name": "lookup", "description": "Looks up a key",
                                           "parameters": {"type": "object", "properties": {"key": {"type": "string"}}}}}]


class BuildSpy:
    """Counts litellm's assemblies of a stream's complete response (every path ends in `stream_chunk_builder`)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = litellm.stream_chunk_builder

        def spy(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(litellm, "stream_chunk_builder", spy)


async def read(quiet: bool, forced: bool = False) -> list[dict[str, Any]]:
    """The chunks of one streamed call (with usage asked, as the host asks), quiet or with litellm's own ending."""
    import asyncio

    register_scripted_model()
    kwargs = {"model": SCRIPTED_MODEL, "messages": [{"role": "user", "content": SCRIPT}], "stream": True,
              "stream_options": {"include_usage": True}, "tools": TOOLS}

    async def call() -> list[dict[str, Any]]:
        stream = await litellm.acompletion(**kwargs)
        return [chunk.model_dump(exclude={"id", "created"}) async for chunk in stream]

    ctx = quiet_context(None, kwargs) if quiet else None
    if forced:  # quiet even though someone asked (quiet_context would say None): the stream end's own guards
        ctx = contextvars.copy_context()
        ctx.run(quiet_flag.set, True)
    assert (ctx is not None) == quiet
    loop = asyncio.get_running_loop()
    return await (loop.create_task(call(), context=ctx) if ctx is not None else call())


async def test_a_quiet_stream_assembles_its_response_once(monkeypatch: pytest.MonkeyPatch) -> None:
    install()
    spy = BuildSpy(monkeypatch)
    await read(quiet=True)
    assert spy.calls == 1
    spy.calls = 0
    await read(quiet=False)  # litellm's own: at the usage chunk and again at the end
    assert spy.calls == 2


async def test_a_quiet_stream_gives_the_same_chunks_and_usage_as_litellms_own_end() -> None:
    install()
    quiet, stock = await read(quiet=True), await read(quiet=False)
    assert quiet == stock
    assert quiet[-1]["usage"]["total_tokens"] > 0


async def test_a_configured_cache_keeps_litellms_own_end(monkeypatch: pytest.MonkeyPatch) -> None:
    install()
    from litellm.caching.caching import Cache

    for name in _litellm_work._CALLBACK_LISTS:  # Cache() adds "cache" to litellm's callback lists: undone after
        monkeypatch.setattr(litellm, name, list(getattr(litellm, name)))
    monkeypatch.setattr(litellm, "cache", Cache(type="local"))  # in memory (it registers litellm callbacks too)
    spy = BuildSpy(monkeypatch)
    await read(quiet=True, forced=True)
    assert spy.calls == 2


def test_another_litellm_version_keeps_litellms_own_end() -> None:
    assert stream_end.supported("1.110.2", streaming_handler)
    assert not stream_end.supported("1.111.0", streaming_handler)

    class Bare:
        CustomStreamWrapper = type("CustomStreamWrapper", (), {})

    assert not stream_end.supported("1.110.2", Bare)
