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

Responses are taken off the stream as soon as they arrive, so a handler awaiting the host never holds up its own
answer: the in-order frame loop reads the stream itself while it waits for a frame, and a pump task reads on its
behalf while it is busy and a call waits (`_Demux`) — no task and no queue per frame when no call waits.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections import deque
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
        self._demux: _Demux | None = None
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
        if self._demux is not None:
            self._demux.wanted()  # someone must read the stream until the response comes
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

    @property
    def waiting(self) -> bool:
        """Whether a call waits for its response."""
        return bool(self._pending)

    def resolve(self, response: hb.BridgeResponse) -> None:
        fut = self._pending.pop(response.id, None)  # answered: no longer waiting (a reader may stop now)
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
        """The host's frames without the bridge responses, which are resolved the moment they are read."""
        self._demux = _Demux(frames, self)
        return self._demux.frames()


_END: Any = object()  # the stream ended (what a pump read for the frame loop)


class _Demux:
    """One reader of the host's frames at a time, in order: the frame loop itself, or a pump task on its behalf.

    The frame loop (the servicer's `_read_frames`) reads the stream directly while it waits for its next frame: no
    task and no queue between gRPC and it. While it is busy with a frame (an observation handler, a hook's first
    step) nobody reads; that is fine until a bridge call waits for its response, which may be what the busy handler
    itself awaits. So a pump task reads then, from when a call is made (or the frame loop leaves the stream with a
    call waiting) until no call waits: it resolves the responses it reads and keeps the other frames, in order, for
    the frame loop, which takes them before it reads again. A gRPC read can't be cancelled without ending the call,
    so the two never read at once: the frame loop waits for a running pump to finish its read and stop.
    """

    def __init__(self, frames: AsyncIterator[pb.HostFrame], client: StreamBridgeClient) -> None:
        self._it = frames.__aiter__()
        self._client = client
        self._reading = False  # the frame loop is in a read of its own
        self._pump: asyncio.Task[None] | None = None
        self._kept: deque[Any] = deque()  # what the pump read for the frame loop: frames, then _END or an exception
        self._waiter: asyncio.Future[None] | None = None  # the frame loop waiting for the pump
        self._over = False

    def wanted(self) -> None:
        """A bridge call waits: make sure someone reads the stream."""
        if not self._reading and self._pump is None and not self._over:
            self._pump = asyncio.get_running_loop().create_task(self._run_pump())

    async def _run_pump(self) -> None:
        try:
            while self._client.waiting and not self._over:
                try:
                    frame = await self._it.__anext__()
                except StopAsyncIteration:
                    self._keep(_END)
                    return
                except Exception as exc:  # noqa: BLE001 - the stream broke: the frame loop raises it
                    self._keep(exc)
                    return
                if frame.WhichOneof("body") == "bridge_response":
                    self._client.resolve(frame.bridge_response)
                else:
                    self._keep(frame)
        finally:
            self._pump = None
            self._wake()

    def _keep(self, item: Any) -> None:
        if item is _END or isinstance(item, BaseException):
            self._over = True
            self._client.close()
        self._kept.append(item)
        self._wake()

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def frames(self) -> AsyncIterator[pb.HostFrame]:
        client = self._client
        try:
            while True:
                if self._kept:
                    item = self._kept.popleft()
                    if item is _END:
                        return
                    if isinstance(item, BaseException):
                        raise item
                elif self._pump is not None:  # its read is in flight: wait for what it reads, or for it to stop
                    self._waiter = asyncio.get_running_loop().create_future()
                    await self._waiter
                    continue
                else:
                    self._reading = True
                    try:
                        item = await self._it.__anext__()
                    except StopAsyncIteration:
                        return
                    finally:
                        self._reading = False
                    if item.WhichOneof("body") == "bridge_response":
                        client.resolve(item.bridge_response)
                        continue
                if client.waiting:  # the frame loop leaves the stream while a call waits: the pump reads meanwhile
                    self.wanted()
                yield item
        finally:
            self._over = True
            client.close()
            if self._pump is not None:
                self._pump.cancel()


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
