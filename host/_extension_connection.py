"""The host's gRPC client for one extension.

Everything the host sends goes through one ordered outbox drained by a sender task:
- with the "connect" feature, frames are written on one persistent `Connect` stream; awaited hooks get
  an id and a future resolved by the reader task when the extension answers with the same id;
- without it, the same outbox is drained with unary calls (BeforeTurn, BeforeToolCall, Observe).
Observations (afterToolCall, onStepFinish, onChunk, observe-only beforeToolCall) are batched: consecutive
items of one call context become one `observations` frame (up to BATCH_MAX items). The outbox is bounded:
when the extension can't keep up, the oldest onChunk items are dropped (counted), the turn never blocks.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

import grpc
from extension_sdk.proto import PROTOCOL_VERSION, TOKEN_METADATA_KEY, extension_pb2 as pb, extension_pb2_grpc

from google.protobuf.message import DecodeError

from ._extension_errors import ExtensionReplyError, ExtensionToolError, ExtensionUnavailableError

log = logging.getLogger("hookwire.extensions")

MAX_RECEIVE_BYTES = 16 * 1024 * 1024  # the largest reply accepted from an extension (gRPC max receive length)
RECENT_IDS = 1024  # answered call ids remembered to recognise duplicate and late replies
BATCH_MAX = 256
QUEUE_MAX = 10_000
WINDOW = 8  # observation frames in flight (unacked) per extension

_OBS = 0
_CALL = 1
_HOOK_OF_BODY = {"before_turn": "beforeTurn", "before_tool_call": "beforeToolCall", "observations": "observations"}
_BODY_FIELDS = {2: "before_turn", 3: "before_tool_call", 4: "observations"}


def _raw(data: bytes) -> bytes:
    return data


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def salvage_frame_header(data: bytes) -> tuple[int, str | None]:
    """(id, body kind) of an ExtensionFrame that protobuf refused to parse (e.g. invalid UTF-8 inside its body):
    only the top-level wire fields are read, nothing inside them. (0, None) when even that fails."""
    fid, body, pos = 0, None, 0
    try:
        while pos < len(data):
            key, pos = _varint(data, pos)
            number, wire = key >> 3, key & 7
            if wire == 0:
                value, pos = _varint(data, pos)
                if number == 1:
                    fid = value
            elif wire == 2:
                length, pos = _varint(data, pos)
                pos += length
                body = _BODY_FIELDS.get(number, body)
            elif wire == 1:
                pos += 8
            elif wire == 5:
                pos += 4
            else:
                break
    except ValueError:
        pass
    return fid, body


class ExtensionConnection:
    """A connected extension (after its handshake). Create with `open()`."""

    def __init__(
        self,
        name: str,
        target: str,
        token: str,
        *,
        credentials: grpc.ChannelCredentials | None = None,
        on_observation_error: Callable[[pb.HookError], None] | None = None,
        on_lost: Callable[[str], None] | None = None,
        observe_timeout_s: float = 5.0,
        queue_max: int = QUEUE_MAX,
    ) -> None:
        self.name = name
        self.target = target
        options = [("grpc.max_receive_message_length", MAX_RECEIVE_BYTES), ("grpc.enable_retries", 0)]
        if credentials is None:
            self._channel = grpc.aio.insecure_channel(target, options=options)
        else:
            self._channel = grpc.aio.secure_channel(target, credentials, options=options)
        self._stub = extension_pb2_grpc.ExtensionStub(self._channel)
        # Connect replies are parsed by the reader (not by grpc), so an undecodable frame is rejected on its own
        # instead of breaking the stream.
        self._connect = self._channel.stream_stream(
            "/hookwire.v1.Extension/Connect", request_serializer=pb.HostFrame.SerializeToString,
            response_deserializer=_raw,
        )
        self._md = ((TOKEN_METADATA_KEY, token),)
        self._on_obs_error = on_observation_error
        self._on_lost = on_lost
        self._observe_timeout_s = observe_timeout_s
        self._queue_max = queue_max
        self.describe: pb.DescribeResponse | None = None
        self.streaming = False
        self._stream: Any = None
        self._outbox: deque[tuple[Any, ...]] = deque()
        self._obs_count = 0
        self._wake = asyncio.Event()
        self._window = asyncio.Event()
        self._window.set()
        self._inflight = 0
        self._next_id = 0
        self._pending: dict[int, asyncio.Future[pb.ExtensionFrame]] = {}
        self._kinds: dict[int, str] = {}  # call id -> the body kind its reply must have (recent ids kept)
        self._answered: set[int] = set()
        self.rejected = 0  # replies rejected (wrong kind, undecodable, duplicate, late, unknown id)
        self._ack_covers: dict[int, int] = {}
        self._enq_seq = 0
        self._done_seq = 0
        self._flush_waiters: list[tuple[int, asyncio.Future[bool]]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._broken: BaseException | None = None
        self._closed = False
        self.dropped = 0
        self._last_ctx: Any = None
        self._last_ctx_proto: pb.CallContext = pb.CallContext()

    # -- set-up --------------------------------------------------------------------------------

    async def open(self, timeout_s: float) -> pb.DescribeResponse:
        """Describe (protocol check by the caller) and, with the "connect" feature, open the stream."""
        desc: pb.DescribeResponse = await self._stub.Describe(
            pb.DescribeRequest(protocol_version=PROTOCOL_VERSION), metadata=self._md, timeout=timeout_s
        )
        self.describe = desc
        self.streaming = "connect" in desc.features
        if self.streaming:
            self._stream = self._connect(metadata=self._md)
            self._tasks.append(asyncio.ensure_future(self._reader()))
        self._tasks.append(asyncio.ensure_future(self._sender()))
        return desc

    # -- awaited hooks -------------------------------------------------------------------------

    async def call(self, frame: pb.HostFrame, timeout_s: float) -> pb.ExtensionFrame:
        """Send an awaited frame (before_turn / before_tool_call) in order; its reply, or TimeoutError.

        A reply that arrives after the deadline is discarded.
        """
        if self._broken is not None or self._closed:
            raise ExtensionUnavailableError(f"extension {self.name!r} is not connected", extension=self.name)
        loop = asyncio.get_running_loop()
        self._next_id += 1
        fid = self._next_id
        frame.id = fid
        fut: asyncio.Future[pb.ExtensionFrame] = loop.create_future()
        self._pending[fid] = fut
        self._kinds[fid] = frame.WhichOneof("body") or ""
        if len(self._kinds) > RECENT_IDS:
            for old in list(self._kinds)[: len(self._kinds) - RECENT_IDS]:
                del self._kinds[old]
                self._answered.discard(old)
        self._outbox.append((_CALL, frame, fut, loop.time() + timeout_s))
        self._wake.set()
        try:
            return await asyncio.wait_for(fut, timeout_s)
        finally:
            self._pending.pop(fid, None)

    # -- observations --------------------------------------------------------------------------

    def observe(self, context: Any, ctx_proto_factory: Callable[[Any], pb.CallContext], obs: pb.Observation,
                is_chunk: bool) -> None:
        """Enqueue one observation (never blocks)."""
        if self._broken is not None or self._closed:
            return
        if context is not self._last_ctx:
            self._last_ctx = context
            self._last_ctx_proto = ctx_proto_factory(context)
        self._enq_seq += 1
        self._outbox.append((_OBS, self._last_ctx_proto, obs, self._enq_seq, is_chunk))
        self._obs_count += 1
        if self._obs_count > self._queue_max:
            self._drop_oldest()
        if not self._wake.is_set():
            self._wake.set()

    def _drop_oldest(self) -> None:
        want = max(1, self._queue_max // 10)
        dropped = 0
        kept: deque[tuple[Any, ...]] = deque()
        last = self._outbox[-1]
        for entry in self._outbox:
            if dropped < want and entry[0] == _OBS and entry[4] and entry is not last:
                dropped += 1
                continue
            kept.append(entry)
        if dropped == 0:  # no chunk to drop: drop the oldest observations of any kind
            kept = deque()
            for entry in self._outbox:
                if dropped < want and entry[0] == _OBS and entry is not last:
                    dropped += 1
                    continue
                kept.append(entry)
        self._outbox = kept
        self._obs_count -= dropped
        first = self.dropped == 0
        self.dropped += dropped
        if first or self.dropped % (want * 10) < dropped:
            log.warning(
                "extension %r can't keep up with observations: dropped %d oldest onChunk item(s) (%d in total)",
                self.name, dropped, self.dropped,
            )

    @property
    def enqueued(self) -> int:
        """How many observations were ever enqueued on this connection."""
        return self._enq_seq

    async def flush(self, timeout_s: float) -> bool:
        """Wait until everything enqueued so far was handled (acked) by the extension. False on timeout."""
        target = self._enq_seq
        if self._done_seq >= target or self._broken is not None or self._closed:
            return True
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        entry = (target, fut)
        self._flush_waiters.append(entry)
        try:
            return await asyncio.wait_for(fut, timeout_s)
        except TimeoutError:
            return False
        finally:
            with contextlib.suppress(ValueError):
                self._flush_waiters.remove(entry)

    def _advance(self, covers: int) -> None:
        if covers > self._done_seq:
            self._done_seq = covers
        if self._flush_waiters:
            for target, fut in list(self._flush_waiters):
                if target <= self._done_seq and not fut.done():
                    fut.set_result(True)

    def _report_errors(self, errors: Any) -> None:
        if self._on_obs_error is not None:
            for err in errors:
                self._on_obs_error(err)

    # -- the sender and the reader -------------------------------------------------------------

    async def _sender(self) -> None:
        try:
            while True:
                if not self._outbox:
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                head = self._outbox[0]
                if head[0] == _CALL:
                    self._outbox.popleft()
                    _, frame, fut, deadline = head
                    if fut.done():
                        continue  # the caller gave up before it was sent
                    if self.streaming:
                        await self._stream.write(frame)
                    else:
                        await self._unary_call(frame, fut, deadline)
                    continue
                if self.streaming and self._inflight >= WINDOW:
                    self._window.clear()
                    await self._window.wait()
                    continue
                ctx = head[1]
                items = []
                outbox_pop = self._outbox.popleft
                covers = 0
                while self._outbox and len(items) < BATCH_MAX:
                    e = self._outbox[0]
                    if e[0] != _OBS or e[1] is not ctx:
                        break
                    outbox_pop()
                    items.append(e[2])
                    covers = e[3]
                self._obs_count -= len(items)
                batch = pb.ObservationBatch(context=ctx, items=items)
                if self.streaming:
                    self._next_id += 1
                    fid = self._next_id
                    self._ack_covers[fid] = covers
                    self._inflight += 1
                    await self._stream.write(pb.HostFrame(id=fid, observations=batch))
                else:
                    try:
                        ack = await self._stub.Observe(batch, metadata=self._md, timeout=self._observe_timeout_s)
                        self._report_errors(ack.errors)
                    except grpc.aio.AioRpcError as exc:
                        log.warning("extension %r: Observe failed: %s", self.name, exc.details() or exc.code())
                    self._advance(covers)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the stream broke (the extension went away)
            self._fail(exc)

    async def _unary_call(self, frame: pb.HostFrame, fut: asyncio.Future[pb.ExtensionFrame], deadline: float) -> None:
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            return
        try:
            kind = frame.WhichOneof("body")
            if kind == "before_turn":
                resp = await self._stub.BeforeTurn(frame.before_turn, metadata=self._md, timeout=remaining)
                out = pb.ExtensionFrame(id=frame.id, before_turn=resp)
            else:
                resp = await self._stub.BeforeToolCall(frame.before_tool_call, metadata=self._md, timeout=remaining)
                out = pb.ExtensionFrame(id=frame.id, before_tool_call=resp)
        except grpc.aio.AioRpcError as exc:
            if not fut.done():
                if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                    fut.set_exception(TimeoutError())
                else:
                    fut.set_exception(exc)
            return
        if not fut.done():
            fut.set_result(out)

    async def _reader(self) -> None:
        try:
            while True:
                raw = await self._stream.read()
                if raw is grpc.aio.EOF:
                    raise ExtensionUnavailableError(
                        f"extension {self.name!r} closed its Connect stream", extension=self.name
                    )
                try:
                    frame = pb.ExtensionFrame.FromString(raw)
                except DecodeError as exc:
                    self._undecodable(raw, exc)
                    continue
                fid = frame.id
                covers = self._ack_covers.pop(fid, None)
                if covers is not None:
                    self._inflight -= 1
                    if not self._window.is_set():
                        self._window.set()
                    if frame.observations.errors:
                        self._report_errors(frame.observations.errors)
                    self._advance(covers)
                    continue
                self._answer(fid, frame)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - the stream ended
            self._fail(exc)

    def _reject(self, message: str, hook: str, field: str) -> ExtensionReplyError:
        self.rejected += 1
        log.warning("extension %r %s: %s", self.name, hook or "reply", message)
        return ExtensionReplyError(message, extension=self.name, hook=hook, field=field)

    def _answer(self, fid: int, frame: pb.ExtensionFrame) -> None:
        """Resolve the awaited call `fid` with `frame`, or reject the frame (field by field: what is wrong)."""
        body = frame.WhichOneof("body")
        wanted = self._kinds.get(fid)
        hook = _HOOK_OF_BODY.get(wanted or body or "", "")
        fut = self._pending.pop(fid, None)
        if fut is None or fut.done():
            if fid in self._answered:
                self._reject(f"duplicate reply to call {fid} discarded (the first reply was used)", hook, "id")
            elif wanted is not None:
                self._reject(f"late reply to call {fid} discarded (its deadline had passed)", hook, "id")
            else:
                self._reject(f"reply with unknown call id {fid} discarded", hook, "id")
            return
        self._answered.add(fid)
        if body != wanted:
            got = _HOOK_OF_BODY.get(body or "", "an empty frame")
            fut.set_exception(self._reject(
                f"reply of the wrong kind: {got} frame answering a {hook} call (field body)", hook, "body"
            ))
            return
        fut.set_result(frame)

    def _undecodable(self, raw: bytes, exc: Exception) -> None:
        fid, body = salvage_frame_header(raw)
        wanted = self._kinds.get(fid)
        hook = _HOOK_OF_BODY.get(wanted or body or "", "")
        field = f"{body}" if body else "frame"
        reason = str(exc)
        if "UTF-8" in reason or "utf-8" in reason:
            reason = "a string field holds invalid UTF-8"
        err = self._reject(f"reply to call {fid} rejected: not a valid ExtensionFrame ({reason})", hook, field)
        fut = self._pending.pop(fid, None)
        if fut is not None and not fut.done():
            self._answered.add(fid)
            fut.set_exception(err)

    def _fail(self, exc: BaseException) -> None:
        if self._broken is not None:
            return
        self._broken = exc
        if not self._closed:
            detail = exc.details() if isinstance(exc, grpc.aio.AioRpcError) else str(exc)
            log.info("extension %r: connection lost: %s", self.name, detail)
            if self._on_lost is not None:
                self._on_lost(str(detail))
        err: Exception = ExtensionUnavailableError(
            f"extension {self.name!r} went away during the call", extension=self.name
        )
        if isinstance(exc, grpc.aio.AioRpcError) and exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
            err = self._reject(
                f"reply rejected: over the {MAX_RECEIVE_BYTES} byte limit ({exc.details()})", "reply", "frame"
            )
        for fut in list(self._pending.values()):
            if not fut.done():
                fut.set_exception(err)
        self._pending.clear()
        for _, fut in self._flush_waiters:
            if not fut.done():
                fut.set_result(False)
        self._window.set()

    # -- tools ---------------------------------------------------------------------------------

    async def execute_tool(
        self, request: pb.ExecuteToolRequest, timeout_s: float, on_preliminary: Callable[[Any], Any] | None
    ) -> Any:
        """Run a tool; preliminary results go to on_preliminary. Raises ExtensionToolError on a tool error."""
        call = self._stub.ExecuteTool(request, metadata=self._md, timeout=timeout_s)
        try:
            async for event in call:
                kind = event.WhichOneof("event")
                if kind == "preliminary_json":
                    if on_preliminary is not None:
                        result = on_preliminary(json.loads(event.preliminary_json))
                        if inspect.isawaitable(result):
                            await result
                elif kind == "output_json":
                    return json.loads(event.output_json) if event.output_json else None
                elif kind == "error":
                    raise ExtensionToolError(event.error.message or event.error.name, extension=self.name)
        finally:
            call.cancel()
        raise ExtensionToolError(
            f"extension {self.name!r}: tool {request.name!r} ended without an output", extension=self.name
        )

    # -- shutdown ------------------------------------------------------------------------------

    async def shutdown_rpc(self, grace_ms: int, timeout_s: float) -> None:
        with contextlib.suppress(grpc.aio.AioRpcError, TimeoutError, asyncio.TimeoutError):
            await self._stub.Shutdown(pb.ShutdownRequest(grace_ms=grace_ms), metadata=self._md, timeout=timeout_s)

    async def close(self) -> None:
        self._closed = True
        self._fail(ExtensionUnavailableError(f"extension {self.name!r} was closed", extension=self.name))
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task
        if self._stream is not None:
            self._stream.cancel()
        with contextlib.suppress(Exception):
            await self._channel.close(grace=None)
