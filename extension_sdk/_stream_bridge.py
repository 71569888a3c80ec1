"""HostBridge calls as frames on the Connect stream (the extension's side).

When the host opens Connect with the metadata `x-hookwire-bridge: frames`, handlers serving calls of that stream get
a `host` whose calls travel as `ExtensionFrame.bridge_request` and come back as `HostFrame.bridge_response` on the
same stream: a remote extension reaches its host without a second connection, and the host listens nowhere.
`StreamBridgeClient` quacks like `HostConnection` (its `aio_stub()` / `sync_stub()` offer the HostBridge methods),
so `Host` and `SyncHost` work unchanged. Which stream a handler serves is a context variable set for the stream's
reader task (tool tasks and worker threads inherit it); calls that did not come on such a stream use the Unix-socket
HostBridge (`HOOKWIRE_HOST_ADDRESS`), as unary-only extensions always do.

Each request carries the caller's trace context in `BridgeRequest.traceparent`/`tracestate` (the stream's metadata
is fixed when it opens), so the host's `hookwire.bridge {method}` span joins the handler's trace.

Responses are taken off the stream as soon as they arrive (a demultiplexer ahead of the in-order frame loop), so a
hook awaiting the host never holds up its own answer.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import AsyncIterator
from typing import Any

import grpc

from ._call_context import outgoing_trace, trace_metadata
from ._reply_out import ReplyOut
from .proto import BRIDGE_METADATA_KEY, BRIDGE_ON_STREAM, extension_pb2 as pb, host_bridge_pb2 as hb

# HostBridge method -> the BridgeRequest/BridgeResponse field that carries it
_FIELDS = {
    "ReadFile": "read_file",
    "ListFiles": "list_files",
    "WriteFile": "write_file",
    "DeleteFile": "delete_file",
    "GetMessages": "get_messages",
    "GetContext": "get_context",
    "SetContext": "set_context",
    "SendMessage": "send_message",
    "GetSessionInfo": "get_session_info",
}
_CODES = {code.value[0]: code for code in grpc.StatusCode}
# The host reads at most 16 MiB per frame from an extension; a bigger one would break the whole stream.
MAX_REQUEST_BYTES = 16 * 1024 * 1024 - 64 * 1024

current_stream_bridge: contextvars.ContextVar[StreamBridgeClient | None] = contextvars.ContextVar(
    "hookwire_stream_bridge", default=None
)


def bridge_offered(context: Any) -> bool:
    """Whether the host that opened this Connect stream answers bridge frames on it."""
    for key, value in context.invocation_metadata() or ():
        if key == BRIDGE_METADATA_KEY:
            return (value.decode() if isinstance(value, bytes) else value) == BRIDGE_ON_STREAM
    return False


class BridgeCallError(grpc.RpcError):
    """A HostBridge call on the stream failed (Host turns it into HostError, like an RPC failure)."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code.name}: {details}")
        self._code = code
        self._details = details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


class StreamBridgeClient:
    """HostBridge calls on one Connect stream. `fallback`: the Unix-socket connection, if the process has one."""

    def __init__(self, out: ReplyOut, fallback: Any = None) -> None:
        self._out = out
        self._fallback = fallback
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()  # made on the loop's thread (in Connect)
        self._pending: dict[int, asyncio.Future[hb.BridgeResponse]] = {}
        self._next_id = 0
        self._closed: str | None = None
        self.metadata: tuple[tuple[str, str], ...] = ()

    # -- what Host / SyncHost use ---------------------------------------------------------------

    def aio_stub(self) -> _AioStub:
        return _AioStub(self)

    def sync_stub(self) -> _SyncStub:
        return _SyncStub(self)

    # -- the calls ------------------------------------------------------------------------------

    async def call(self, method: str, request: Any, trace: tuple[str, str] = ("", "")) -> Any:
        """`trace`: the caller's (traceparent, tracestate), taken in the caller's context (`outgoing_trace`)."""
        field = _FIELDS.get(method)
        if field is None:
            raise BridgeCallError(grpc.StatusCode.UNIMPLEMENTED, f"no HostBridge method {method!r}")
        if self._closed is not None:
            raise BridgeCallError(grpc.StatusCode.UNAVAILABLE, self._closed)
        if request.ByteSize() > MAX_REQUEST_BYTES:
            raise BridgeCallError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                  f"{method}: {request.ByteSize()} bytes is more than a frame on the stream may carry "
                                  f"({MAX_REQUEST_BYTES})")
        self._next_id += 1
        call_id = self._next_id
        fut: asyncio.Future[hb.BridgeResponse] = self._loop.create_future()
        self._pending[call_id] = fut
        frame = pb.ExtensionFrame(bridge_request=hb.BridgeRequest(id=call_id, traceparent=trace[0], tracestate=trace[1],
                                                                  **{field: request}))
        self._out.put_nowait(frame)
        try:
            response = await fut
        finally:
            self._pending.pop(call_id, None)
        if response.code:
            raise BridgeCallError(_CODES.get(response.code, grpc.StatusCode.UNKNOWN), response.message)
        return getattr(response, field)

    def call_blocking(self, method: str, request: Any) -> Any:
        """The same call from a worker thread (a sync handler). On the event loop's own thread a blocking call
        could never see its answer: it goes to the Unix-socket bridge if there is one, else it is refused."""
        if threading.get_ident() == self._loop_thread:
            if self._fallback is not None:
                return getattr(self._fallback.sync_stub(), method)(request,
                                                                   metadata=self._fallback.metadata + trace_metadata())
            raise BridgeCallError(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"host.sync.{method} was called on the event loop's thread (a sync hook handler): with the bridge on "
                "the Connect stream, use the async host in hooks (make the handler async)",
            )
        return asyncio.run_coroutine_threadsafe(self.call(method, request, outgoing_trace()), self._loop).result()

    def resolve(self, response: hb.BridgeResponse) -> None:
        fut = self._pending.get(response.id)
        if fut is not None and not fut.done():
            fut.set_result(response)

    def close(self, why: str = "the Connect stream ended") -> None:
        if self._closed is None:
            self._closed = why
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(BridgeCallError(grpc.StatusCode.UNAVAILABLE, why))
        self._pending.clear()

    # -- the stream -----------------------------------------------------------------------------

    def demux(self, frames: AsyncIterator[pb.HostFrame]) -> AsyncIterator[pb.HostFrame]:
        """The host's frames without the bridge responses, which are resolved the moment they arrive."""
        queue: asyncio.Queue[Any] = asyncio.Queue()
        end = object()

        async def pump() -> None:
            try:
                async for frame in frames:
                    if frame.WhichOneof("body") == "bridge_response":
                        self.resolve(frame.bridge_response)
                    else:
                        queue.put_nowait(frame)
                queue.put_nowait(end)
            except Exception as exc:  # noqa: BLE001 - the stream broke: the frame loop sees it
                queue.put_nowait(exc)
            finally:
                self.close()

        async def ordered() -> AsyncIterator[pb.HostFrame]:
            task = asyncio.ensure_future(pump())
            try:
                while True:
                    item = await queue.get()
                    if item is end:
                        return
                    if isinstance(item, BaseException):
                        raise item
                    yield item
            finally:
                task.cancel()

        return ordered()


class _AioStub:
    __slots__ = ("_client",)

    def __init__(self, client: StreamBridgeClient) -> None:
        self._client = client

    def __getattr__(self, method: str) -> Any:
        async def rpc(request: Any, metadata: Any = None) -> Any:
            return await self._client.call(method, request, outgoing_trace())

        return rpc


class _SyncStub:
    __slots__ = ("_client",)

    def __init__(self, client: StreamBridgeClient) -> None:
        self._client = client

    def __getattr__(self, method: str) -> Any:
        def rpc(request: Any, metadata: Any = None) -> Any:
            return self._client.call_blocking(method, request)

        return rpc
