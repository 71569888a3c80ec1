"""The host's gRPC client for one extension.

Everything the host sends goes through one ordered outbox drained by a sender task:
- with the "connect" feature, frames are written on one persistent `Connect` stream; awaited hooks get
  an id and a future resolved by the reader task when the extension answers with the same id;
- without it, the same outbox is drained with unary calls (BeforeTurn, BeforeToolCall, Observe).
Observations (afterToolCall, onStepFinish, onChunk, observe-only beforeToolCall) are batched: consecutive
items of one call context (compared by session and request id) become one `observations` frame (up to
BATCH_MAX items). The sender holds observations back for up to COALESCE_S so a stream of chunks becomes a few
frames; an awaited call, a tool call, a flush or a full batch ends the hold at once.
On the stream, observation frames go out with id 0 (no answer); one frame in ACK_FRAMES (or ACK_ITEMS items),
and the frame a flush waits for, carry an id: its ObservationAck covers every frame before it (the extension
handles frames in order) and reports the handler errors of the unanswered ones. At most WINDOW acked frames
are in flight, so the outbox is bounded: when the extension can't keep up, the oldest onChunk items are
dropped (counted), the turn never blocks.
With the "connect-tools" feature, tool calls ride the stream too (`execute_tool` / `tool_event` / `cancel`);
without it each tool call is an ExecuteTool RPC. With the "prelude" feature, observations held when an awaited hook
or tool call is sent ride in that frame (`HostFrame.prelude`) instead of a frame of their own; its answer acks them.
Observations are serialized once for all subscribers (host/extensions/_frames.py): the outbox holds bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from extension_sdk.proto import (
    BRIDGE_METADATA_KEY,
    BRIDGE_ON_STREAM,
    PROTOCOL_VERSION,
    TOKEN_METADATA_KEY,
    extension_pb2_grpc,
)
from extension_sdk.proto import extension_pb2 as pb
from extension_sdk.proto import host_bridge_pb2 as hb

from .._errors import ExtensionReplyError, ExtensionToolError, ExtensionUnavailableError
from ._eager_write import EagerWrite, start_write
from ._frames import more_observations, observation_batch, observations_frame, serialize, with_prelude
from ._observation_acks import AckAccount
from ._reply_bounds import ToolReplyBounds
from ._trace_metadata import with_trace, with_trace_of_record

log = logging.getLogger("hookwire.extensions")

MAX_RECEIVE_BYTES = 16 * 1024 * 1024  # the largest reply accepted from an extension (gRPC max receive length)
RECENT_IDS = 1024  # answered call ids remembered to recognise duplicate and late replies
BATCH_MAX = 256
QUEUE_MAX = 10_000
WINDOW = 2  # acked observation frames in flight (unanswered) per extension
ACK_FRAMES = 8  # on the stream, one observation frame in ACK_FRAMES asks for an ack ...
ACK_ITEMS = 1024  # ... or the first frame after ACK_ITEMS items without one
COALESCE_S = 0.100  # how long observations are held back to share a frame (a call, flush or full batch ends it);
# a manifest's observations.maxDelayMs sets it per extension
# Tool calls as frames on the Connect stream when the extension offers "connect-tools" (~2x faster per call than
# an ExecuteTool RPC each). An extension that stops answering on the stream is bounded by timeouts.toolMs and found
# by the health probe (host/extensions/_health.py); extensions without the feature get ExecuteTool RPCs.
USE_CONNECT_TOOLS = True

_OBS = 0
_CALL = 1
_SEND = 2  # a frame written as is, no reply handled by the sender (execute_tool, cancel)
_HOOK_OF_BODY = {"before_turn": "beforeTurn", "before_tool_call": "beforeToolCall", "observations": "observations",
                 "execute_tool": "tool", "tool_event": "tool"}
_BODY_FIELDS = {2: "before_turn", 3: "before_tool_call", 4: "observations", 5: "tool_event"}


_TOOL_END = object()  # the ExecuteTool RPC ended (without an output, if the consumer still reads)


class _ToolSink:
    """One tool call's events on their way to the caller. Preliminaries are thinned here, as they arrive (in the
    reader, host/extensions/_reply_bounds.py), so a flood costs one check per event: only those let through are queued (as
    their JSON text); a held one is queued by a timer when its turn comes. Anything else is queued as it is."""

    __slots__ = ("queue", "bounds", "_timer", "_done")

    def __init__(self, bounds: ToolReplyBounds) -> None:
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.bounds = bounds
        self._timer: asyncio.TimerHandle | None = None
        self._done = False

    def put_nowait(self, event: Any) -> None:
        if self._done:
            return
        if isinstance(event, pb.ToolEvent):
            kind = event.WhichOneof("event")
            if kind == "preliminary_json":
                loop = asyncio.get_running_loop()
                text = self.bounds.offer(event.preliminary_json, loop.time())
                if text is not None:
                    self.queue.put_nowait(text)
                elif self._timer is None and (wait := self.bounds.due_in(loop.time())) is not None:
                    self._timer = loop.call_later(wait, self._due)
                return
            if kind in ("output_json", "error"):
                self.close()  # a held preliminary is superseded by the final output
        elif event is _TOOL_END or isinstance(event, BaseException):
            self.close()
        self.queue.put_nowait(event)

    def _due(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        text = self.bounds.take(loop.time())
        if text is not None:
            self.queue.put_nowait(text)
        elif (wait := self.bounds.due_in(loop.time())) is not None:
            self._timer = loop.call_later(wait, self._due)

    def close(self) -> None:
        """Nothing more is let through (the call ended); a held preliminary is dropped."""
        self._done = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.bounds.discard_pending()


_EOF = grpc.aio.EOF  # what a read returns at the end of the stream (read once per frame by the reader)


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
        channel_options: list[tuple[str, Any]] | None = None,
        on_observation_error: Callable[[pb.HookError, bytes | None], None] | None = None,
        on_lost: Callable[[str], None] | None = None,
        on_stalled: Callable[[float], None] | None = None,
        observe_timeout_s: float = 5.0,
        queue_max: int = QUEUE_MAX,
        coalesce_s: float = COALESCE_S,
        bridge: Callable[[hb.BridgeRequest], Awaitable[hb.BridgeResponse]] | None = None,
    ) -> None:
        """`bridge`: answers HostBridge calls riding the Connect stream (host/extensions/_stream_bridge.py); None: the stream
        offers no bridge (the extension uses the Unix-socket HostBridge, if it has one)."""
        self.name = name
        self.target = target
        options = [("grpc.max_receive_message_length", MAX_RECEIVE_BYTES), ("grpc.enable_retries", 0),
                   *(channel_options or ())]
        if credentials is None:
            self._channel = grpc.aio.insecure_channel(target, options=options)
        else:
            self._channel = grpc.aio.secure_channel(target, credentials, options=options)
        self._stub = extension_pb2_grpc.ExtensionStub(self._channel)
        # Connect replies are parsed by the reader (not by grpc), so an undecodable frame is rejected on its own
        # instead of breaking the stream: no deserializer, grpc hands over the message's bytes as they are.
        self._connect = self._channel.stream_stream(
            "/hookwire.v1.Extension/Connect", request_serializer=serialize, response_deserializer=None,
        )
        # Observation batches are pre-serialized bytes (host/extensions/_frames.py) on the unary path too.
        self._observe_rpc = self._channel.unary_unary(
            "/hookwire.v1.Extension/Observe", request_serializer=serialize,
            response_deserializer=pb.ObservationAck.FromString,
        )
        self._md = ((TOKEN_METADATA_KEY, token),)
        self._on_obs_error = on_observation_error
        self._on_lost = on_lost
        self._on_stalled = on_stalled
        self._observe_timeout_s = observe_timeout_s
        self._queue_max = queue_max
        self.describe: pb.DescribeResponse | None = None
        self.streaming = False
        self.tools_on_stream = False  # feature "connect-tools": tool calls as frames on the Connect stream
        self.prelude = False  # feature "prelude": held observations ride in the awaited frame that ends the hold
        self._prelude_covers: dict[int, int] = {}  # frame id -> the last observation its prelude carried
        self._coalesce_s = coalesce_s
        self._holding = False  # observations are being held back (observe() does not wake the sender)
        self._hold_timer: asyncio.TimerHandle | None = None
        self._urgent = False  # a call, tool call or flush is waiting: send everything queued without holding
        self._sent_seq = 0  # the last observation written to the stream
        self._ack_req_seq = 0  # the last observation covered by a frame that asked for an ack
        self._flush_seq = 0  # the last observation a flush waits for
        self._unacked_frames = 0  # observation frames written since the last one that asked for an ack
        self._unacked_items = 0
        self._tools: dict[int, _ToolSink] = {}  # tool call id -> its events (connect-tools)
        self._stream: Any = None
        self._writing = False  # a frame is being written on the stream (by the sender, or by a caller: _write_now)
        self._write_task: EagerWrite | None = None  # a caller's write finishing (host/extensions/_eager_write.py)
        self._outbox: deque[tuple[Any, ...]] = deque()
        self._obs_count = 0
        self._wake = asyncio.Event()
        self._window = asyncio.Event()
        self._window.set()
        self._inflight = 0
        self._next_id = 0
        self._pending: dict[int, asyncio.Future[pb.ExtensionFrame]] = {}
        self._woke = False  # the frame just read resolved an awaited call (the reader lets its caller run first)
        self._due: dict[int, float] = {}  # awaited call id -> its deadline (loop time), under one timer (_arm_expiry)
        self._expiry: asyncio.TimerHandle | None = None
        self._expiry_at = 0.0
        self._kinds: dict[int, str] = {}  # call id -> the body kind its reply must have (recent ids kept)
        self._answered: set[int] = set()
        self.rejected = 0  # replies rejected (wrong kind, undecodable, duplicate, late, unknown id)
        self._ack_covers: dict[int, int] = {}
        self._enq_seq = 0
        self._done_seq = 0
        # (target, called with True when everything up to target was handled, False when the connection broke)
        self._flush_waiters: list[tuple[int, Callable[[bool], None]]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._broken: BaseException | None = None
        self._closed = False
        self.dropped = 0
        self.acks = AckAccount(name)  # what the extension says it handled (ObservationAck.handled)
        # Stall detection (a hung observer): observations written but not acknowledged, and since when nothing
        # was acknowledged. No progress for observe_timeout_s: the observer is stalled (on_stalled, once).
        self._sent_log: deque[tuple[int, bytes, int]] = deque()  # (last seq, context record, items) per frame
        self._unacked_since: float | None = None
        self._stall_timer: asyncio.TimerHandle | None = None
        self._stalled = False
        self.lost: dict[bytes, int] = {}  # context record -> observations never handled (set when the connection broke)
        self._last_ctx: bytes = b""  # the context record of the latest observation
        self._bridge = bridge
        self._bridge_tasks: set[asyncio.Task[None]] = set()

    # -- set-up --------------------------------------------------------------------------------

    async def open(self, timeout_s: float, granted: pb.Grants | None = None) -> pb.DescribeResponse:
        """Describe (protocol check by the caller; `granted`: the manifest's grants, sent along) and, with the
        "connect" feature, open the stream."""
        desc: pb.DescribeResponse = await self._stub.Describe(
            pb.DescribeRequest(protocol_version=PROTOCOL_VERSION, granted=granted), metadata=self._md,
            timeout=timeout_s,
        )
        self.describe = desc
        self.streaming = "connect" in desc.features
        self.tools_on_stream = USE_CONNECT_TOOLS and self.streaming and "connect-tools" in desc.features
        self.prelude = self.streaming and "prelude" in desc.features
        self.multi_batch = self.streaming and "multi-batch" in desc.features  # other turns' batches share a frame
        if self.streaming:
            md = self._md + ((BRIDGE_METADATA_KEY, BRIDGE_ON_STREAM),) if self._bridge is not None else self._md
            self._stream = self._connect(metadata=md)
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
        self._remember(fid, frame.WhichOneof("body") or "")
        deadline = loop.time() + timeout_s
        if self.streaming and not self._writing and not self._outbox and self._broken is None:
            self._write_now(frame)  # nothing to send before it: written from here, no trip through the sender
        else:
            self._outbox.append((_CALL, frame, fut, deadline))
            self._hurry()
        self._due[fid] = deadline
        if self._expiry is None or deadline < self._expiry_at:
            self._arm_expiry(loop, deadline)
        try:
            return await fut
        except (TimeoutError, asyncio.CancelledError):
            self._give_up(fid)
            raise
        finally:
            self._due.pop(fid, None)
            self._pending.pop(fid, None)
            self._prelude_covers.pop(fid, None)

    def _write_now(self, frame: pb.HostFrame | bytes) -> None:
        """Write a frame on the idle stream from the caller (the sender then waits until it is written)."""
        self._writing = True
        self._write_task = start_write(self._stream.write(frame), self._wrote)

    def _wrote(self, error: BaseException | None) -> None:
        self._writing = False
        self._write_task = None
        if error is not None and not isinstance(error, asyncio.CancelledError):
            self._fail(error)  # the stream broke: the call's future fails with the rest
        elif self._outbox or self._flush_seq > self._ack_req_seq:
            self._wake.set()  # the sender waited for this write (frames queued, or a flush's ack to ask for)

    async def _write(self, frame: pb.HostFrame | bytes) -> None:
        """The sender's write (a caller's `_write_now` waits while it runs)."""
        self._writing = True
        try:
            await self._stream.write(frame)
        finally:
            self._writing = False

    def _give_up(self, fid: int) -> None:
        """The caller stopped waiting for awaited call `fid` (its deadline, a cancelled turn): on the stream, a
        `cancel` frame tells the extension to stop the handler (one never sent, or already done, ignores it)."""
        if self.streaming and self._broken is None and not self._closed:
            self._outbox.append((_SEND, pb.HostFrame(cancel=pb.CancelCall(id=fid))))
            self._hurry()

    def _arm_expiry(self, loop: asyncio.AbstractEventLoop, at: float) -> None:
        """One timer for every awaited call of this connection, at the earliest deadline (a timer per call costs
        more than the call's own Python work); answered calls just leave `_due`."""
        if self._expiry is not None:
            self._expiry.cancel()
        self._expiry_at = at
        self._expiry = loop.call_at(at, self._expire_due)

    def _expire_due(self) -> None:
        """The earliest deadline came: time out the calls past theirs, re-arm for the next."""
        self._expiry = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        nearest: float | None = None
        for fid, at in list(self._due.items()):
            if at <= now:
                del self._due[fid]
                fut = self._pending.get(fid)
                if fut is not None and not fut.done():
                    fut.set_exception(TimeoutError())
            elif nearest is None or at < nearest:
                nearest = at
        if nearest is not None:
            self._arm_expiry(loop, nearest)

    def _remember(self, fid: int, kind: str) -> None:
        """Keep the body kind the reply to call `fid` must have (the RECENT_IDS latest calls)."""
        kinds = self._kinds
        kinds[fid] = kind
        if len(kinds) > RECENT_IDS:
            old = next(iter(kinds))  # ids only grow: the first key is the oldest
            del kinds[old]
            self._answered.discard(old)

    def _hurry(self) -> None:
        """Someone waits: the sender sends everything queued now (no coalescing hold)."""
        self._urgent = True
        self._wake.set()

    def _release_hold(self) -> None:
        self._holding = False  # the sender sends, then clears _hold_timer (the next batch holds anew)
        self._wake.set()

    # -- observations --------------------------------------------------------------------------

    def observe(self, context: bytes, item: bytes, is_chunk: bool) -> None:
        """Enqueue one observation (never blocks): its serialized context record and item record
        (host/extensions/_frames.py). Consecutive items with equal contexts share a frame."""
        if self._broken is not None or self._closed:
            self.lost[context] = self.lost.get(context, 0) + 1  # counted for the turn's flush
            return
        if context is not self._last_ctx and context == self._last_ctx:
            context = self._last_ctx  # keep one object per context: the sender batches by identity
        self._last_ctx = context
        self._enq_seq += 1
        self._outbox.append((_OBS, context, item, self._enq_seq, is_chunk))
        self._obs_count += 1
        if self._obs_count > self._queue_max:
            self._drop_oldest()
        if self._holding and self._obs_count < BATCH_MAX:
            return
        if self._hold_timer is None and not self._urgent and self._coalesce_s > 0 and self._obs_count < BATCH_MAX:
            # the hold starts here, not in the sender: the sender sleeps until it ends (one wake per batch, not two)
            self._holding = True
            self._hold_timer = asyncio.get_running_loop().call_later(self._coalesce_s, self._release_hold)
            return
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
    def channel(self) -> grpc.aio.Channel:
        """The gRPC channel to the extension (the health probe shares it)."""
        return self._channel

    @property
    def enqueued(self) -> int:
        """How many observations were ever enqueued on this connection."""
        return self._enq_seq

    def request_flush(self) -> None:
        """Send everything enqueued so far now (no coalescing hold), the last frame asking for an ack, without
        waiting for it: `flush()` then finds the ack on its way (or already there)."""
        target = self._enq_seq
        if target > self._flush_seq and self._done_seq < target and self._broken is None and not self._closed:
            self._flush_seq = target
            if not self._flush_now():
                self._hurry()

    def _flush_now(self) -> bool:
        """Write the held observations from here, in one frame asking for their ack, when that is simple (the stream
        idle, all of one context, one batch, the ack window open): the sender need not wake. False: it does it."""
        outbox = self._outbox
        if not (self.streaming and outbox and not self._writing and self._inflight < WINDOW
                and len(outbox) <= BATCH_MAX):
            return False
        ctx = outbox[0][1]
        for e in outbox:
            if e[0] != _OBS or e[1] is not ctx:
                return False
        if self._hold_timer is not None:
            self._hold_timer.cancel()
            self._hold_timer = None
        self._holding = False
        items = [e[2] for e in outbox]
        covers = outbox[-1][3]
        outbox.clear()
        self._obs_count -= len(items)
        self._unacked_frames += 1
        self._unacked_items += len(items)
        if covers > self._sent_seq:
            self._sent_seq = covers
        self._note_sent(ctx, covers, len(items))
        self._write_now(self._observations_frame(ctx, items, covers, True))
        return True

    async def flush(self, timeout_s: float) -> bool:
        """Wait until everything enqueued so far was handled (acked) by the extension. False on timeout."""
        return await self.flush_outcome(timeout_s) in ("ok", "lost")

    async def flush_outcome(self, timeout_s: float) -> str:
        """Wait until everything enqueued so far was handled: "ok"; "lost" when the connection broke (see `lost`);
        "stalled" when the observer made no progress for observe_timeout_s (at once if that was already so);
        "timeout" after timeout_s."""
        target = self._enq_seq
        if self._done_seq >= target:
            return "ok"
        if self._broken is not None or self._closed:
            return "lost"
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        entry = (target, lambda ok: fut.done() or fut.set_result(ok))
        self._flush_waiters.append(entry)
        self.request_flush()
        end = loop.time() + timeout_s
        try:
            while True:
                since = self._unacked_since
                stall_end = since + self._observe_timeout_s if since is not None else end
                left = min(end, stall_end) - loop.time()
                if left <= 0:
                    return "stalled" if stall_end < end else "timeout"
                await asyncio.wait((fut,), timeout=left)
                if fut.done():
                    return "ok" if fut.result() else "lost"
        finally:
            with contextlib.suppress(ValueError):
                self._flush_waiters.remove(entry)

    def flush_state(self) -> tuple[str, int]:
        """("ok" | "lost" | "wait", the target): whether everything enqueued so far was handled, the connection broke,
        or a flush has to wait for the ack of observation `target` (host/extensions/_flush_group.py)."""
        target = self._enq_seq
        if self._done_seq >= target:
            return "ok", target
        if self._broken is not None or self._closed:
            return "lost", target
        return "wait", target

    def watch_flush(self, target: int, callback: Callable[[bool], None]) -> Callable[[], None]:
        """Call `callback(True)` from the reader once observation `target` was handled, `callback(False)` if the
        connection breaks first (no task, no future: a plain call); asks for the ack now. Returns the unwatch."""
        entry = (target, callback)
        self._flush_waiters.append(entry)
        self.request_flush()

        def unwatch() -> None:
            with contextlib.suppress(ValueError):
                self._flush_waiters.remove(entry)

        return unwatch

    @property
    def stall_deadline(self) -> float | None:
        """Loop time at which the observer counts as stalled (no ack for observe_timeout_s); None: nothing unacked."""
        since = self._unacked_since
        return None if since is None else since + self._observe_timeout_s

    def pending_contexts(self) -> set[bytes]:
        """The context records of observations written or queued and not yet handled."""
        done = self._done_seq
        out = {ctx for seq, ctx, _ in self._sent_log if seq > done}
        out.update(e[1] for e in self._outbox if e[0] == _OBS)
        return out

    def _note_sent(self, ctx: bytes, covers: int, n: int) -> None:
        """Observations were written: remember them (lost counts) and start the stall watch."""
        if n:
            self._sent_log.append((covers, ctx, n))
        if self._unacked_since is None and covers > self._done_seq:
            self._unacked_since = asyncio.get_running_loop().time()
            self._arm_stall_watch(self._observe_timeout_s / 2)

    def _arm_stall_watch(self, delay: float) -> None:
        if self._stall_timer is None and not self._closed:
            self._stall_timer = asyncio.get_running_loop().call_later(delay, self._stall_check)

    def _stall_check(self) -> None:
        """Half-way: ask for an ack if nothing asked for one; at the deadline: the observer is stalled."""
        self._stall_timer = None
        since = self._unacked_since
        if since is None or self._broken is not None or self._closed:
            return
        elapsed = asyncio.get_running_loop().time() - since
        if elapsed >= self._observe_timeout_s:
            if not self._stalled:
                self._stalled = True
                log.warning("extension %r: observations not acknowledged for %.0f ms (stalled)", self.name,
                            elapsed * 1000)
                if self._on_stalled is not None:
                    self._on_stalled(elapsed)
            return
        if self._ack_req_seq < self._sent_seq and self._flush_seq < self._sent_seq:
            self._flush_seq = self._sent_seq  # nothing asked for an ack of what was sent: ask now
            self._hurry()
        self._arm_stall_watch(self._observe_timeout_s - elapsed)

    def _advance(self, covers: int) -> None:
        if covers > self._done_seq:
            self._done_seq = covers
            log_ = self._sent_log
            while log_ and log_[0][0] <= covers:
                log_.popleft()
            if self._unacked_since is not None:  # progress: the stall watch restarts from now
                self._stalled = False
                if self._done_seq >= self._sent_seq:
                    self._unacked_since = None
                else:
                    self._unacked_since = asyncio.get_running_loop().time()
                    self._arm_stall_watch(self._observe_timeout_s / 2)
        if self._flush_waiters:
            done = self._done_seq
            waiters = self._flush_waiters
            if any(target <= done for target, _ in waiters):
                self._flush_waiters = [w for w in waiters if w[0] > done]
                for target, callback in waiters:
                    if target <= done:
                        callback(True)

    def _covered_turn(self, covers: int) -> bytes | None:
        """The one turn (context record) whose observations an ack up to `covers` handled; None if several."""
        done = self._done_seq
        records = {ctx for seq, ctx, _ in self._sent_log if done < seq <= covers}
        return records.pop() if len(records) == 1 else None

    def _report_errors(self, errors: Any, record: bytes | None) -> None:
        """HookErrors the extension reported for observations, with the turn they belong to when it is one."""
        if self._on_obs_error is not None:
            for err in errors:
                self._on_obs_error(err, record)

    # -- the sender and the reader -------------------------------------------------------------

    async def _sender(self) -> None:
        loop = asyncio.get_running_loop()
        outbox = self._outbox
        try:
            while True:
                outbox = self._outbox  # _drop_oldest replaces the deque
                if self._writing:  # a caller's frame is being written (_write_now): after it, in order
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                if not outbox:
                    self._urgent = False
                    if self.streaming and self._flush_seq > self._ack_req_seq and self._sent_seq >= self._flush_seq:
                        # A flush waits for observations already sent unanswered: ask for an ack of them all.
                        await self._write_observations(self._last_ctx, [], self._sent_seq, True)
                        continue
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                head = outbox[0]
                kind = head[0]
                if kind == _CALL:
                    outbox.popleft()
                    _, frame, fut, deadline = head
                    if fut.done():
                        continue  # the caller gave up before it was sent
                    if self.streaming:
                        await self._write(frame)
                    else:
                        await self._unary_call(frame, fut, deadline)
                    continue
                if kind == _SEND:
                    outbox.popleft()
                    await self._write(head[1])
                    continue
                if self.streaming and self._inflight >= WINDOW:
                    self._window.clear()
                    await self._window.wait()
                    continue
                if not self._urgent and self._obs_count < BATCH_MAX and self._coalesce_s > 0:
                    if self._hold_timer is None:  # start holding; _release_hold ends it (the timer fired)
                        self._holding = True
                        self._hold_timer = loop.call_later(self._coalesce_s, self._release_hold)
                    if self._holding:
                        self._wake.clear()
                        await self._wake.wait()
                        continue
                if self._hold_timer is not None:
                    self._hold_timer.cancel()
                    self._hold_timer = None
                self._holding = False
                (ctx, items, covers), *rest = self._take_runs(outbox, self.multi_batch)
                more = rest or None  # feature "multi-batch": other turns' runs ride in the same frame
                n_items = len(items) + (sum(len(b[1]) for b in more) if more else 0)
                self._obs_count -= n_items
                if self.streaming:
                    self._unacked_frames += 1
                    self._unacked_items += n_items
                    self._note_sent(ctx, covers, len(items))
                    if more:
                        for m_ctx, m_items, m_covers in more:
                            self._note_sent(m_ctx, m_covers, len(m_items))
                        covers = more[-1][2]
                    if covers > self._sent_seq:
                        self._sent_seq = covers
                    if not more and self.prelude and outbox and self._can_carry(outbox[0]):
                        await self._write_with_prelude(outbox.popleft()[1], ctx, items, covers)
                        continue
                    ack = (self._unacked_frames >= ACK_FRAMES or self._unacked_items >= ACK_ITEMS
                           or self._flush_seq > self._ack_req_seq and covers >= self._flush_seq)
                    await self._write_observations(ctx, items, covers, ack, more)
                else:
                    try:
                        ack = await self._observe_rpc(observation_batch(ctx, items),
                                                      metadata=with_trace_of_record(self._md, ctx),
                                                      timeout=self._observe_timeout_s)
                        self._report_errors(ack.errors, ctx)
                        self.acks.unary(len(items), ack.handled)
                    except grpc.aio.AioRpcError as exc:
                        log.warning("extension %r: Observe failed: %s", self.name, exc.details() or exc.code())
                        if exc.code() != grpc.StatusCode.DEADLINE_EXCEEDED:  # a stall is reported as such
                            self.acks.short(len(items), f"Observe failed: {exc.code().name}: {exc.details()}",
                                            logged=True)
                        if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED and self._on_stalled is not None:
                            self._on_stalled(self._observe_timeout_s)
                    self._advance(covers)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the stream broke (the extension went away)
            self._fail(exc)
        finally:
            if self._hold_timer is not None:
                self._hold_timer.cancel()
                self._hold_timer = None

    @staticmethod
    def _can_carry(entry: tuple[Any, ...]) -> bool:
        """Whether an outbox entry is a frame the held observations can ride in (feature "prelude"): an awaited
        hook whose caller still waits, or a tool call."""
        if entry[0] == _CALL:
            return not entry[2].done()
        return entry[0] == _SEND and entry[1].HasField("execute_tool")

    async def _write_with_prelude(self, frame: pb.HostFrame, ctx: bytes, items: list[bytes], covers: int) -> None:
        """Write `frame` with the observations as its prelude. Its answer (the reply, or a tool call's first
        event) means they were handled; if none comes, the next flush asks for an ack of them as usual."""
        self._prelude_covers[frame.id] = covers
        self.acks.wrote(len(items))
        await self._write(with_prelude(frame, observation_batch(ctx, items)))

    @staticmethod
    def _take_runs(outbox: deque[Any], several: bool) -> list[tuple[bytes, list[bytes], int]]:
        """The observations at the head of the outbox, popped as (context, items, covers) runs of one turn each, in
        order, up to BATCH_MAX items in all: the first run only, or with `several` (feature "multi-batch") every
        run queued behind it too."""
        runs: list[tuple[bytes, list[bytes], int]] = []
        room = BATCH_MAX
        while outbox and room > 0 and outbox[0][0] == _OBS:
            ctx, items, covers = outbox[0][1], [], 0
            while outbox and room > 0:
                e = outbox[0]
                if e[0] != _OBS or e[1] is not ctx:
                    break
                outbox.popleft()
                items.append(e[2])
                covers = e[3]
                room -= 1
            runs.append((ctx, items, covers))
            if not several:
                break
        return runs

    async def _write_observations(self, ctx: bytes, items: list[bytes], covers: int, ack: bool,
                                  more: list[tuple[bytes, list[bytes], int]] | None = None) -> None:
        """One observations frame on the stream (with `more`: other turns' batches riding in it, feature
        "multi-batch"); with `ack`, it gets an id and its ack advances the flush mark."""
        await self._write(self._observations_frame(ctx, items, covers, ack, more))

    def _observations_frame(self, ctx: bytes, items: list[bytes], covers: int, ack: bool,
                            more: list[tuple[bytes, list[bytes], int]] | None = None) -> bytes:
        """The bytes of an observations frame, its bookkeeping done (with `ack`: an id, and the ack it waits for)."""
        fid = 0
        self.acks.wrote(len(items) + (sum(len(b[1]) for b in more) if more else 0))
        if ack:
            self._next_id += 1
            fid = self._next_id
            self.acks.asked(fid)
            self._ack_covers[fid] = covers
            self._inflight += 1
            self._ack_req_seq = covers
            self._unacked_frames = self._unacked_items = 0
        frame = observations_frame(fid, observation_batch(ctx, items))
        if more:
            frame += more_observations(observation_batch(c, i) for c, i, _ in more)
        return frame

    async def _unary_call(self, frame: pb.HostFrame, fut: asyncio.Future[pb.ExtensionFrame], deadline: float) -> None:
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            return
        try:
            kind = frame.WhichOneof("body")
            if kind == "before_turn":
                md = with_trace(self._md, frame.before_turn.context)  # host/extensions/_trace_metadata.py
                resp = await self._stub.BeforeTurn(frame.before_turn, metadata=md, timeout=remaining)
                out = pb.ExtensionFrame(id=frame.id, before_turn=resp)
            else:
                md = with_trace(self._md, frame.before_tool_call.context)
                resp = await self._stub.BeforeToolCall(frame.before_tool_call, metadata=md, timeout=remaining)
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
                if raw is _EOF:
                    raise ExtensionUnavailableError(
                        f"extension {self.name!r} closed its Connect stream", extension=self.name
                    )
                self._on_frame(raw)
                del raw  # a big reply must not stay referenced while the next read waits
                if self._woke:
                    # The frame answered an awaited call: its caller runs before the next read is started (starting
                    # a read is gRPC work the caller would otherwise wait for, ~9 µs of an awaited hook's critical path;
                    # the frames after it wait in gRPC's buffer meanwhile).
                    self._woke = False
                    await asyncio.sleep(0)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - the stream ended
            self._fail(exc)

    def _on_frame(self, raw: bytes) -> None:
        """Route one frame from the extension: an ack, a tool event, or the answer to an awaited call."""
        try:
            frame = pb.ExtensionFrame.FromString(raw)
        except DecodeError as exc:
            self._undecodable(raw, exc)
            return
        body = frame.WhichOneof("body")  # read once: every check below is on it
        if body == "bridge_request" and self._bridge is not None:
            self._bridge_call(frame.bridge_request)
            return
        fid = frame.id
        if self._prelude_covers:
            carried = self._prelude_covers.pop(fid, None)
            if carried is not None:
                self._advance(carried)
        covers = self._ack_covers.pop(fid, None)
        if covers is not None:
            self._inflight -= 1
            if not self._window.is_set():
                self._window.set()
            if frame.observations.errors:
                self._report_errors(frame.observations.errors, self._covered_turn(covers))
            self.acks.acked(fid, frame.observations.handled)
            self._advance(covers)
            return
        if fid == 0 and body == "observations":
            # An extension that answers every frame (older ones do): its errors and counts count, the ack nothing.
            self.acks.answered_unasked(frame.observations.handled)
            if frame.observations.errors:
                self._report_errors(frame.observations.errors, None)
            return
        tool = self._tools.get(fid) if self._tools else None
        if tool is not None:
            if body == "tool_event":
                tool.put_nowait(frame.tool_event)
            else:
                got = _HOOK_OF_BODY.get(body or "", "an empty frame")
                tool.put_nowait(self._reject(
                    f"reply of the wrong kind: {got} frame answering a tool call (field body)", "tool", "body"
                ))
            return
        if body == "tool_event" and self._kinds.get(fid) == "execute_tool":
            return  # an event of a tool call its caller gave up on (cancelled, timed out)
        self._answer(fid, frame, body)

    def _bridge_call(self, request: hb.BridgeRequest) -> None:
        """Answer a HostBridge call from the stream in a task of its own; the answer jumps the outbox queue (the
        extension may be holding its frame loop until it comes)."""
        bridge = self._bridge
        assert bridge is not None

        async def run() -> None:
            response = await bridge(request)
            if self._broken is None and not self._closed:
                self._outbox.appendleft((_SEND, pb.HostFrame(bridge_response=response)))
                self._wake.set()
                self._window.set()  # a sender waiting for the ack window rechecks its head: this answer goes first

        task = asyncio.ensure_future(run())
        self._bridge_tasks.add(task)
        task.add_done_callback(self._bridge_tasks.discard)

    def _reject(self, message: str, hook: str, field: str) -> ExtensionReplyError:
        self.rejected += 1
        log.warning("extension %r %s: %s", self.name, hook or "reply", message)
        return ExtensionReplyError(message, extension=self.name, hook=hook, field=field)

    def _answer(self, fid: int, frame: pb.ExtensionFrame, body: str | None) -> None:
        """Resolve the awaited call `fid` with `frame` (its body kind `body`), or reject the frame (field by field:
        what is wrong)."""
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
        self._woke = True
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
        tool = self._tools.get(fid)
        if tool is not None:
            tool.put_nowait(err)

    def _fail(self, exc: BaseException) -> None:
        if self._broken is not None:
            return
        self._broken = exc
        self._count_lost()
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
        for tool in self._tools.values():
            tool.put_nowait(err)
        waiters, self._flush_waiters = self._flush_waiters, []
        for _, callback in waiters:
            callback(False)
        self._window.set()

    def _count_lost(self) -> None:
        """The connection broke: count, per context, the observations the extension never handled."""
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None
        lost: dict[bytes, int] = {}
        done = self._done_seq
        for seq, ctx, n in self._sent_log:
            if seq > done:
                lost[ctx] = lost.get(ctx, 0) + n
        for e in self._outbox:
            if e[0] == _OBS:
                lost[e[1]] = lost.get(e[1], 0) + 1
        self._sent_log.clear()
        self.lost = lost

    # -- tools ---------------------------------------------------------------------------------

    async def execute_tool(
        self, request: pb.ExecuteToolRequest, timeout_s: float, on_preliminary: Callable[[Any], Any] | None,
        bounds: ToolReplyBounds | None = None,
    ) -> Any:
        """Run a tool; preliminary results go to on_preliminary. Raises ExtensionToolError on a tool error,
        TimeoutError after timeout_s (on the stream) and ExtensionUnavailableError when the extension went away.

        `bounds` caps the output's size and thins a flood of preliminaries (host/extensions/_reply_bounds.py); both tool
        paths feed one queue of events that `_consume_tool` reads."""
        if bounds is None:
            bounds = ToolReplyBounds(MAX_RECEIVE_BYTES, 1 << 62)
        if self.tools_on_stream:
            return await self._stream_tool(request, timeout_s, on_preliminary, bounds)
        call = self._stub.ExecuteTool(request, metadata=with_trace(self._md, request.context), timeout=timeout_s)
        sink = _ToolSink(bounds)

        async def pump() -> None:
            try:
                async for event in call:
                    sink.put_nowait(event)
                sink.put_nowait(_TOOL_END)
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer (RPC errors, a cancelled call)
                sink.put_nowait(exc)

        pumping = asyncio.ensure_future(pump())
        try:
            return await self._consume_tool(sink, on_preliminary, request.name)
        finally:
            sink.close()
            call.cancel()
            pumping.cancel()

    async def _consume_tool(self, sink: _ToolSink, on_preliminary: Callable[[Any], Any] | None, name: str) -> Any:
        """Read one tool call's events: the preliminaries `sink` let through go to on_preliminary, in order; the
        final output is decoded within the cap. Raises ExtensionToolError on a tool error, or what the sink carries."""
        bounds = sink.bounds
        queue = sink.queue
        while True:
            event = await queue.get()
            if type(event) is str:  # a preliminary let through
                await self._deliver(bounds.preliminary(event), on_preliminary)
                continue
            if event is _TOOL_END:
                raise ExtensionToolError(
                    f"extension {self.name!r}: tool {name!r} ended without an output", extension=self.name
                )
            if isinstance(event, BaseException):
                raise event
            kind = event.WhichOneof("event")
            if kind == "error":
                raise ExtensionToolError(event.error.message or event.error.name, extension=self.name)
            if kind == "output_json":
                return bounds.output(event.output_json)

    @staticmethod
    async def _deliver(value: Any, on_preliminary: Callable[[Any], Any] | None) -> None:
        if on_preliminary is not None:
            result = on_preliminary(value)
            if inspect.isawaitable(result):
                await result

    async def _stream_tool(
        self, request: pb.ExecuteToolRequest, timeout_s: float, on_preliminary: Callable[[Any], Any] | None,
        bounds: ToolReplyBounds,
    ) -> Any:
        """A tool call as an `execute_tool` frame; its `tool_event` frames come back through the reader.

        A caller that gives up (cancelled, timed out, its on_preliminary raised) sends a `cancel` frame.
        """
        if self._broken is not None or self._closed:
            raise ExtensionUnavailableError(f"extension {self.name!r} is not connected", extension=self.name)
        self._next_id += 1
        fid = self._next_id
        self._remember(fid, "execute_tool")
        sink = _ToolSink(bounds)
        self._tools[fid] = sink
        self._outbox.append((_SEND, pb.HostFrame(id=fid, execute_tool=request)))
        self._hurry()
        finished = False
        try:
            async with asyncio.timeout(timeout_s):
                result = await self._consume_tool(sink, on_preliminary, request.name)
                finished = True
                return result
        except (ExtensionToolError, ExtensionReplyError, ExtensionUnavailableError):
            finished = True  # the call is over on the extension's side (an error event, or the stream broke)
            raise
        finally:
            sink.close()
            self._tools.pop(fid, None)
            self._prelude_covers.pop(fid, None)
            if not finished and self._broken is None and not self._closed:
                self._outbox.append((_SEND, pb.HostFrame(cancel=pb.CancelCall(id=fid))))
                self._hurry()

    # -- shutdown ------------------------------------------------------------------------------

    async def shutdown_rpc(self, grace_ms: int, timeout_s: float) -> None:
        with contextlib.suppress(grpc.aio.AioRpcError, TimeoutError, asyncio.TimeoutError):
            await self._stub.Shutdown(pb.ShutdownRequest(grace_ms=grace_ms), metadata=self._md, timeout=timeout_s)

    async def close(self) -> None:
        self._closed = True
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        self._fail(ExtensionUnavailableError(f"extension {self.name!r} was closed", extension=self.name))
        if self._write_task is not None:
            self._write_task.cancel()
        for task in [*self._tasks, *self._bridge_tasks]:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task
        if self._stream is not None:
            self._stream.cancel()
        with contextlib.suppress(Exception):
            await self._channel.close(grace=None)
