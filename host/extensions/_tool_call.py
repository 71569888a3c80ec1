"""Extension tool calls: find the tool, send the call, bound the reply, and map every failure to one error.

`map_rpc_errors` is the one place where what can go wrong under a tool call — a gRPC status, a timeout, a
rejected reply, a connection closed mid-call, a cancellation grpc raises for a closed channel — becomes a
hookwire error (host/_errors.py), each traced with the extension's name:

    the tool reported an error            -> ExtensionToolError (as raised)
    no output within timeouts.toolMs      -> ExtensionToolError "timed out after N ms"
    a reply frame rejected                -> ExtensionToolError "failed: <why>"
    the extension was unloaded            -> ExtensionUnloadedError   (the host's doing)
    it crashed or broke its connection    -> ExtensionUnavailableError "went away during the call"
    any other gRPC status                 -> ExtensionToolError "failed: CODE: details"

A cancellation of the caller itself is re-raised untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc

from extension_sdk.proto import extension_pb2 as pb

from .. import _telemetry as telemetry
from .._errors import (
    ExtensionError,
    ExtensionReplyError,
    ExtensionToolError,
    ExtensionUnavailableError,
    ExtensionUnloadedError,
)
from ..sandbox._egress_hosting import EgressProxies
from ._convert import MAX_JSON_CHARS, context_to_proto, json_size_error
from ._dispatch import unavailable_state
from . import _call_tags as call_tags
from ._extension_client import ExtensionConnection
from ._registry import Registry
from ._reply_bounds import tool_reply_bounds
from ._snapshots import CallContext
from ._state import ExtensionRuntime
from ._trace import Tracer, reason_of_state

log = logging.getLogger("hookwire.extensions")


@dataclass
class ToolCallSite:
    """One tool call in flight: what `map_rpc_errors` needs to name, trace and classify its failure."""

    registry: Registry
    trace: Tracer
    ext: ExtensionRuntime
    conn: ExtensionConnection
    name: str  # the exposed (namespaced) name
    tool: str  # the extension's own name for it
    timeout: float
    context: CallContext | None
    t0: float = field(default_factory=time.perf_counter)

    def _traced(self, outcome: str, detail: str) -> None:
        self.trace(f"tool:{self.tool}", self.ext.name, outcome, latency_ms=(time.perf_counter() - self.t0) * 1000,
                   detail=detail, context=self.context)

    def _timed_out(self) -> ExtensionToolError:
        return ExtensionToolError(f"tool {self.name!r} of extension {self.ext.name!r} timed out after "
                                  f"{self.timeout * 1000:.0f} ms", extension=self.ext.name)

    def went_away(self, detail: str = "connection closed during the call") -> ExtensionError:
        """Unloaded (the host's doing) or Unavailable (it crashed or broke): trace, and the error to raise."""
        self._traced("error", detail)
        return self._gone()

    def _gone(self) -> ExtensionError:
        ext, name = self.ext, self.name
        if not self.registry.is_loaded(ext):
            return ExtensionUnloadedError(f"tool {name!r}: extension {ext.name!r} has been unloaded", extension=ext.name)
        return ExtensionUnavailableError(f"tool {name!r}: extension {ext.name!r} went away during the call",
                                         extension=ext.name)

    def error_for(self, exc: BaseException) -> BaseException:
        """The hookwire error for `exc` (traced). `exc` itself when it already is the error to raise."""
        ext = self.ext
        if isinstance(exc, ExtensionToolError):
            self._traced("error", str(exc))
            return exc
        if isinstance(exc, TimeoutError):  # a tool call on the Connect stream (connect-tools) ran out of time
            self._traced("timeout", f"no output within {self.timeout * 1000:.0f} ms")
            return self._timed_out()
        if isinstance(exc, ExtensionReplyError):  # connect-tools: a reply frame was rejected
            self._traced("error", str(exc))
            return ExtensionToolError(f"tool {self.name!r} of extension {ext.name!r} failed: {exc}", extension=ext.name)
        if isinstance(exc, ExtensionUnavailableError):  # connect-tools: the stream broke or closed during the call
            return self.went_away()
        if isinstance(exc, grpc.aio.AioRpcError):
            self._traced("error", str(exc.details()))
            code = exc.code()
            if not self.registry.is_loaded(ext):
                return self._gone()
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                return self._timed_out()
            broke = ext.state != "running" or ext.conn is not self.conn or (
                ext.proc is not None and ext.proc.returncode is not None)
            if code == grpc.StatusCode.UNAVAILABLE or broke:
                return self._gone()
            return ExtensionToolError(f"tool {self.name!r} of extension {ext.name!r} failed: {code.name}: "
                                      f"{exc.details()}", extension=ext.name)
        return exc


@contextlib.contextmanager
def map_rpc_errors(site: ToolCallSite) -> Iterator[None]:
    """Turn whatever fails under a tool call into the hookwire error for it (see the module docstring)."""
    try:
        yield
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # the caller was cancelled
        # grpc cancels calls on a channel closed under them: the extension crashed or was unloaded.
        raise site.went_away() from None
    except (ExtensionToolError, TimeoutError, ExtensionReplyError, ExtensionUnavailableError,
            grpc.aio.AioRpcError) as exc:
        error = site.error_for(exc)
        if error is exc:
            raise
        raise error from None


async def execute_tool(registry: Registry, trace: Tracer, egress: EgressProxies | None, name: str, input: Any, *,
                       context: CallContext | None, tool_call_id: str,
                       on_preliminary: Callable[[Any], Any] | None) -> Any:
    """Run an extension tool by its exposed name; its final output, JSON-decoded and bounded by limits.toolOutputKb.

    Raises ExtensionToolError, ExtensionUnloadedError or ExtensionUnavailableError."""
    entry = registry.tool(name)
    if entry is None:
        prefix = registry.unloaded_owner(name)
        if prefix is not None:
            raise ExtensionUnloadedError(f"tool {name!r}: its extension ({prefix}) has been unloaded", extension=prefix)
        raise ExtensionToolError(f"no extension tool named {name!r}")
    ext, tool = entry
    conn = ext.conn
    if conn is None or ext.state != "running":
        state = unavailable_state(ext)
        detail = f"not called: extension is {state}"
        log.warning("extension %r tool %r %s", ext.name, tool, detail)
        trace(f"tool:{tool}", ext.name, "error", detail=detail, context=context, reason=reason_of_state(state))
        raise ExtensionUnavailableError(f"tool {name!r}: extension {ext.name!r} is {state}", extension=ext.name)
    input_json, oversize = json_size_error(input)
    if oversize is not None:
        raise ExtensionToolError(
            f"tool {name!r}: its input is {oversize} bytes of JSON, over the {MAX_JSON_CHARS} byte limit",
            extension=ext.name,
        )
    req = pb.ExecuteToolRequest(context=context_to_proto(context), name=tool, input_json=input_json,
                                tool_call_id=tool_call_id)
    parent, state = telemetry.traceparent()  # the execute_tool span (host/turn/_loop.py)
    if parent:
        req.context.traceparent, req.context.tracestate = parent, state
    site = ToolCallSite(registry, trace, ext, conn, name, tool, ext.manifest.timeouts.tool_ms / 1000, context)
    req.context.deadline_unix_ms = int((time.time() + site.timeout) * 1000)  # CallContext.deadline_unix_ms
    bounds = tool_reply_bounds(ext.manifest)
    with map_rpc_errors(site):
        with egress.during(ext.name, context) if egress is not None else contextlib.nullcontext(), \
                call_tags.during(ext.proc, ext.name, f"tool:{tool}", req.context):
            result = await conn.execute_tool(req, site.timeout, on_preliminary, bounds)
    bounded = bounds.summary()
    if bounded:
        log.warning("extension %r tool %r: %s", ext.name, tool, bounded)
    trace(f"tool:{tool}", ext.name, "ok", latency_ms=(time.perf_counter() - site.t0) * 1000, detail=bounded,
          context=context)
    return result
