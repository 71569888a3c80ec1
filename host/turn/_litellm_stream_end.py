"""The end of a quiet litellm stream, assembled once (host/turn/_litellm_work.py installs it).

litellm 1.110's `CustomStreamWrapper._finalize_completed_stream` runs at each of a stream's last steps: once to give
the finish chunk, then (with `stream_options.include_usage`, as the host asks) once for the usage chunk and once to
end. At the last two it assembles the complete response from every chunk (`stream_chunk_builder`, in a worker
thread: a thread hop each), deep-copies it for the response cache and schedules a cache task and the success
handlers. For a quiet call (no callbacks, no cache, no bookkeeping asked) the copy and the tasks do nothing (the cache task stores nothing while `litellm.cache` is None), and
the second assembly repeats the first. Here a quiet stream's end assembles the response once per stream (on the
loop when the stream has at most INLINE_CHUNKS chunks: cheaper than the hop; in litellm's thread above that), gives
the same usage chunk, and ends. Anything else — not quiet, a cache or a deferred proxy callback configured, or
another litellm version — runs litellm's own method.
"""

from __future__ import annotations

import contextvars
import importlib.metadata
import logging
from typing import Any

log = logging.getLogger("hookwire.agent")

#: litellm versions whose `_finalize_completed_stream` this replicates (checked at install; others run litellm's).
VERSIONS = ("1.110.",)
#: a stream with at most this many chunks is assembled on the loop; longer ones in litellm's worker thread
INLINE_CHUNKS = 8

_MISSING = object()
_ATTR = "_hookwire_complete_response"
#: what the replica reads of litellm: a version that lacks any of it keeps litellm's own stream end
_METHODS = ("_finalize_completed_stream", "_build_complete_streaming_response",
            "_async_build_complete_streaming_response", "_new_usage_chunk", "_propagate_usage_cost_to_hidden_params",
            "finish_reason_handler", "aclose")
_FUNCTIONS = ("_stamp_served_service_tier", "_stamp_usage_cost")


def supported(version: str, module: Any) -> bool:
    """Whether litellm `version` (its streaming_handler `module`) has the internals the replica was written against."""
    cls = getattr(module, "CustomStreamWrapper", None)
    return (version.startswith(VERSIONS) and cls is not None and all(hasattr(cls, m) for m in _METHODS)
            and all(callable(getattr(module, f, None)) for f in _FUNCTIONS))


def install(quiet: contextvars.ContextVar[bool]) -> bool:
    """Wrap `CustomStreamWrapper._finalize_completed_stream` (once per process, under _litellm_work's lock): a quiet
    stream ends as the module doc says. False (nothing changed) on a litellm this was not written for."""
    import litellm
    from litellm.litellm_core_utils import streaming_handler as sh

    version = importlib.metadata.version("litellm")
    if not supported(version, sh):
        log.info("litellm %s: its own stream end is kept (hookwire's quiet stream end knows %s)", version, VERSIONS)
        return False
    cls = sh.CustomStreamWrapper
    stock = cls._finalize_completed_stream
    if getattr(stock, "__wrapped__", None) is not None:
        return True

    async def _finalize_completed_stream(self: Any, cache_hit: bool) -> Any:
        if (not quiet.get() or not self.sent_last_chunk or cache_hit or litellm.cache is not None
                or getattr(self.logging_obj, "_on_deferred_stream_complete", None) is not None):
            return await stock(self, cache_hit)
        return await _quiet_end(self, sh)

    _finalize_completed_stream.__wrapped__ = stock  # type: ignore[attr-defined]
    cls._finalize_completed_stream = _finalize_completed_stream  # type: ignore[method-assign]
    return True


async def _complete(stream: Any) -> Any:
    """The stream's complete response, assembled at the first call only."""
    complete = getattr(stream, _ATTR, _MISSING)
    if complete is _MISSING:
        if len(stream.chunks) <= INLINE_CHUNKS:
            complete = stream._build_complete_streaming_response()
        else:
            complete = await stream._async_build_complete_streaming_response()
        setattr(stream, _ATTR, complete)
    return complete


async def _quiet_end(stream: Any, sh: Any) -> Any:
    """litellm's `_finalize_completed_stream` after the finish chunk, less the second assembly, the cache copy and
    the tasks a quiet call does not need: the usage chunk (when asked and not yet sent), else the end."""
    complete = await _complete(stream)
    if stream.sent_stream_usage is False and stream.send_stream_usage is True:
        response = stream._new_usage_chunk()
        if complete is not None:
            stream._propagate_usage_cost_to_hidden_params(complete, stream.custom_llm_provider, stream.chunks)
            response.usage = complete.usage
            sh._stamp_served_service_tier(response, complete)
            sh._stamp_usage_cost(response, complete)
        stream.sent_stream_usage = True
        _final_usage(stream, complete)
        return response
    _final_usage(stream, complete)
    await stream.aclose()
    raise StopAsyncIteration


def _final_usage(stream: Any, complete: Any) -> None:
    """The usage litellm leaves in the last returned chunk's hidden params when no stream options were given."""
    if stream.stream_options is None and complete is not None and stream._last_returned_hidden_params is not None:
        usage = getattr(complete, "usage", None)
        if usage is not None:
            stream._last_returned_hidden_params["usage"] = usage
