"""The `hookwire.v1.Extension` gRPC servicer (grpc.aio) and the token-checking interceptor."""

from __future__ import annotations

import asyncio
import contextvars
import datetime
import functools
import hmac
import inspect
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Executor
from typing import Any

import grpc
import grpc.aio

from . import __version__
from ._bridge_client import Host, HostConnection
from ._call_context import restore_call, set_current_call
from ._convert import (
    OBSERVATION_KINDS,
    _decode,
    chunk_snapshot,
    encode_json,
    hook_error,
    step_snapshot,
    tool_call_snapshot,
    tool_decision,
    tool_result_snapshot,
    turn_patch,
    turn_snapshot,
)
from ._eager import start_eager
from ._extension import Extension, HookDef, ToolDef
from ._grants import Grants
from ._reply_limit import bounded, tool_value_json
from ._reply_out import ReplyOut
from ._stream_bridge import StreamBridgeClient, bridge_offered, current_stream_bridge
from .proto import PROTOCOL_VERSION, TOKEN_METADATA_KEY
from .proto import extension_pb2 as pb
from .proto import extension_pb2_grpc as pb_grpc

log = logging.getLogger("extension_sdk")

_SERVICE_PREFIX = "/hookwire.v1.Extension/"
_MAX_UNREPORTED_ERRORS = 100
_MISSING: Any = object()
_SDK = f"extension_sdk/{__version__} python/{sys.version_info.major}.{sys.version_info.minor}"
_HOST_GAVE_UP = "hookwire: the host gave up on this call"  # the message of a task cancelled by a `cancel` frame


def _deadline_text(ms: int) -> str:
    if not ms:
        return "none"
    stamp = datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TokenInterceptor(grpc.aio.ServerInterceptor):
    """Rejects Extension-service calls without the right `x-hookwire-token` (health checks pass)."""

    def __init__(self, token: str | None) -> None:
        self._token = token.encode() if token else None
        self._denied: dict[str, grpc.RpcMethodHandler] = {}

    def _ok(self, metadata: Any) -> bool:
        for key, value in metadata or ():
            if key == TOKEN_METADATA_KEY:
                got = value if isinstance(value, bytes) else value.encode()
                return hmac.compare_digest(got, self._token or b"")
        return False

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if self._token is None or handler is None or not method.startswith(_SERVICE_PREFIX):
            return handler
        if self._ok(handler_call_details.invocation_metadata):
            return handler
        log.warning("rejected %s: missing or wrong %s", method, TOKEN_METADATA_KEY)
        denied = self._denied.get(method)
        if denied is None:
            denied = self._denied[method] = _deny(handler)
        return denied


def _deny(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    message = f"missing or wrong {TOKEN_METADATA_KEY} metadata"

    async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    async def streaming(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)
        yield  # pragma: no cover - makes this an async generator

    ser = {"request_deserializer": handler.request_deserializer, "response_serializer": handler.response_serializer}
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(streaming, **ser)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(unary, **ser)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(streaming, **ser)
    return grpc.unary_unary_rpc_method_handler(unary, **ser)


class ExtensionServicer(pb_grpc.ExtensionServicer):
    """Dispatches the host's calls to an `Extension`'s handlers."""

    def __init__(
        self,
        ext: Extension,
        conn: HostConnection | None,
        on_shutdown: Callable[[float], None],
        executor: Executor,
    ) -> None:
        self._ext = ext
        self._conn = conn
        self._on_shutdown = on_shutdown
        self._executor = executor
        self._hooks = ext.hooks

    # -- helpers -------------------------------------------------------------------------------

    def _host(self, session_id: str) -> Host | None:
        # The bridge of the Connect stream this call came on, if the host offers one; else the Unix-socket bridge.
        conn: Any = current_stream_bridge.get() or self._conn
        return Host(conn, session_id) if conn is not None else None

    async def _call_hook(self, hook: HookDef, snapshot: dict[str, Any], context: pb.CallContext) -> Any:
        set_current_call(context)
        if hook.is_async:
            return await self._start_hook(hook, snapshot, context.session_id)
        # A sync handler runs in a worker thread: a blocking one must not stall the tools and calls of others.
        result = await asyncio.get_running_loop().run_in_executor(
            self._executor,
            contextvars.copy_context().run,
            functools.partial(self._start_hook, hook, snapshot, context.session_id),
        )
        if inspect.isawaitable(result):
            result = await result
        return result

    def _run_sync_hooks(
        self, work: list[tuple[str, HookDef, dict[str, Any]]], session_id: str, errors: list[pb.HookError]
    ) -> tuple[int, Any]:
        """Run consecutive sync observation handlers in order (in a worker thread), adding their errors to
        `errors`. Stops at a handler that returned an awaitable (a lambda around an async call): (how many ran,
        that awaitable) for the loop to await before the rest; (len(work), None) when all ran."""
        for i, (name, hook, snapshot) in enumerate(work):
            try:
                result = self._start_hook(hook, snapshot, session_id)
            except Exception as exc:
                errors.append(self._failed(name, exc))
                continue
            if inspect.isawaitable(result):
                return i + 1, result
        return len(work), None

    def _start_hook(self, hook: HookDef, snapshot: dict[str, Any], session_id: str) -> Any:
        """Call a handler (the call context is already set): its result, or an awaitable for an async one."""
        if hook.wants_host:
            return hook.fn(snapshot, self._host(session_id))
        return hook.fn(snapshot)

    def _failed(self, hook: str, exc: BaseException) -> pb.HookError:
        log.error("%s handler raised %s: %s", hook, type(exc).__name__, exc, exc_info=exc)
        return hook_error(hook, exc)

    async def _before_turn(self, request: pb.BeforeTurnRequest) -> pb.BeforeTurnResponse:
        hook = self._hooks.get("beforeTurn")
        if hook is None:
            return pb.BeforeTurnResponse()
        try:
            result = await self._call_hook(hook, turn_snapshot(request.snapshot), request.context)
            patch = turn_patch(result)
        except Exception as exc:
            return pb.BeforeTurnResponse(error=self._failed("beforeTurn", exc))
        if patch is None:
            return pb.BeforeTurnResponse()
        return bounded(pb.BeforeTurnResponse(config=patch), "beforeTurn")

    async def _before_tool_call(self, request: pb.BeforeToolCallRequest) -> pb.BeforeToolCallResponse:
        hook = self._hooks.get("beforeToolCall")
        if hook is None:
            return pb.BeforeToolCallResponse()
        try:
            result = await self._call_hook(hook, tool_call_snapshot(request.snapshot), request.context)
            decision = tool_decision(result)
        except Exception as exc:
            return pb.BeforeToolCallResponse(error=self._failed("beforeToolCall", exc))
        if decision is None:
            return pb.BeforeToolCallResponse()
        return bounded(pb.BeforeToolCallResponse(decision=decision), "beforeToolCall")

    async def _observe_one(
        self, name: str, build: Callable[[Any], dict[str, Any]], snapshot: Any, context: pb.CallContext
    ) -> pb.HookAck:
        hook = self._hooks.get(name)
        if hook is None:
            return pb.HookAck()
        try:
            await self._call_hook(hook, build(snapshot), context)
        except Exception as exc:
            return pb.HookAck(error=self._failed(name, exc))
        return pb.HookAck()

    async def _observe(self, batch: pb.ObservationBatch) -> pb.ObservationAck:
        """Handle a batch in order. All its items share one call context, set once. Consecutive sync handlers
        run together in one worker thread (off the event loop); async ones are awaited on the loop."""
        hooks = self._hooks
        context = batch.context
        marks = set_current_call(context)
        session_id = context.session_id
        errors: list[pb.HookError] = []
        handled = 0
        sync_run: list[tuple[str, HookDef, dict[str, Any]]] = []
        loop = asyncio.get_running_loop()
        for item in batch.items:
            handled += 1
            kind = item.WhichOneof("event")
            spec = OBSERVATION_KINDS.get(kind) if kind else None
            if spec is None:
                continue
            hook = hooks.get(spec[0])
            if hook is None:
                continue
            try:
                snapshot = spec[1](getattr(item, kind))
            except Exception as exc:
                errors.append(self._failed(spec[0], exc))
                continue
            if not hook.is_async:
                sync_run.append((spec[0], hook, snapshot))
                continue
            if sync_run:
                errors.extend(await self._sync_in_worker(loop, sync_run, session_id))
                sync_run = []
            try:
                await self._start_hook(hook, snapshot, session_id)
            except Exception as exc:
                errors.append(self._failed(spec[0], exc))
            restore_call(context, marks)  # an async handler may have changed it in this task
        if sync_run:
            errors.extend(await self._sync_in_worker(loop, sync_run, session_id))
        ack = pb.ObservationAck(handled=handled, errors=errors)
        return bounded(ack, "observations") if errors else ack

    async def _sync_in_worker(
        self, loop: asyncio.AbstractEventLoop, work: list[tuple[str, HookDef, dict[str, Any]]], session_id: str
    ) -> list[pb.HookError]:
        errors: list[pb.HookError] = []
        while work:
            done, pending = await loop.run_in_executor(
                self._executor,
                contextvars.copy_context().run,
                functools.partial(self._run_sync_hooks, work, session_id, errors),
            )
            if pending is not None:
                try:
                    await pending
                except Exception as exc:
                    errors.append(self._failed(work[done - 1][0], exc))
            work = work[done:]
        return errors

    # -- RPCs ----------------------------------------------------------------------------------

    async def Describe(self, request: pb.DescribeRequest, context: grpc.aio.ServicerContext) -> pb.DescribeResponse:
        ext = self._ext
        if request.HasField("granted"):
            ext.granted = Grants.from_proto(request.granted)
        return pb.DescribeResponse(
            name=ext.name,
            version=ext.version,
            protocol_version=PROTOCOL_VERSION,
            hooks=list(ext.hooks),
            tools=[
                pb.ToolSpec(
                    name=t.name,
                    description=t.description,
                    input_schema_json=encode_json(t.schema),
                    streaming=t.streaming,
                )
                for t in ext.tools.values()
            ],
            features=["connect", "connect-tools", "prelude", "multi-batch"],
            description=ext.description,
            sdk=_SDK,
        )

    async def BeforeTurn(self, request: pb.BeforeTurnRequest, context: Any) -> pb.BeforeTurnResponse:
        return await self._before_turn(request)

    async def BeforeToolCall(self, request: pb.BeforeToolCallRequest, context: Any) -> pb.BeforeToolCallResponse:
        return await self._before_tool_call(request)

    async def AfterToolCall(self, request: pb.AfterToolCallRequest, context: Any) -> pb.HookAck:
        return await self._observe_one(
            "afterToolCall", tool_result_snapshot, request.snapshot, request.context
        )

    async def OnStepFinish(self, request: pb.OnStepFinishRequest, context: Any) -> pb.HookAck:
        return await self._observe_one("onStepFinish", step_snapshot, request.snapshot, request.context)

    async def OnChunk(self, request: pb.OnChunkRequest, context: Any) -> pb.HookAck:
        return await self._observe_one("onChunk", chunk_snapshot, request.snapshot, request.context)

    async def Observe(self, request: pb.ObservationBatch, context: Any) -> pb.ObservationAck:
        return await self._observe(request)

    async def Connect(self, request_iterator: AsyncIterator[pb.HostFrame], context: Any) -> AsyncIterator[pb.ExtensionFrame]:
        """Frames are handled strictly in order, except tool calls, which run concurrently (feature connect-tools)."""
        out = ReplyOut(context)  # a frame put while the stream is idle is written at once (extension_sdk/_reply_out.py)
        bridge = StreamBridgeClient(out, self._conn) if bridge_offered(context) else None
        frames = bridge.demux(request_iterator) if bridge is not None else request_iterator
        token = current_stream_bridge.set(bridge)  # the reader task (and the tool tasks it starts) inherit it
        try:
            reader = asyncio.create_task(self._read_frames(frames, out))
        finally:
            current_stream_bridge.reset(token)
        try:
            while (frame := await out.get()) is not None:
                yield frame
        finally:
            reader.cancel()
            out.close()
            if bridge is not None:
                bridge.close()

    async def _read_frames(self, frames: AsyncIterator[pb.HostFrame], out: ReplyOut) -> None:
        tools: dict[int, asyncio.Task[None]] = {}
        hooks: set[asyncio.Task[None]] = set()  # awaited hooks in flight: they never hold up the frames after them
        hook_ids: dict[int, tuple[asyncio.Task[None], pb.HostFrame]] = {}  # the same, by frame id (for `cancel`)
        unreported: list[pb.HookError] = []  # handler errors of observation frames nobody asked an answer for
        unacked = 0  # observations handled since the last ack sent: the next ack's `handled` counts them too
        try:
            async for frame in frames:
                if frame.HasField("prelude"):  # observations that rode along: handled first, answered by no one
                    ack = await self._observe(frame.prelude)
                    unacked += ack.handled
                    if ack.errors and len(unreported) < _MAX_UNREPORTED_ERRORS:
                        unreported.extend(ack.errors[: _MAX_UNREPORTED_ERRORS - len(unreported)])
                body = frame.WhichOneof("body")
                fid = frame.id
                if body == "observations":
                    ack = await self._observe(frame.observations)
                    for more in frame.more_observations:  # feature "multi-batch": other turns' batches, in order
                        extra = await self._observe(more)
                        ack.handled += extra.handled
                        if extra.errors and len(ack.errors) < _MAX_UNREPORTED_ERRORS:
                            ack.errors.extend(extra.errors[: _MAX_UNREPORTED_ERRORS - len(ack.errors)])
                    unacked += ack.handled
                    if fid:
                        ack.handled, unacked = unacked, 0
                        if unreported:
                            ack.errors.extend(unreported)
                            unreported.clear()
                        out.put_nowait(pb.ExtensionFrame(id=fid, observations=ack))
                    elif ack.errors and len(unreported) < _MAX_UNREPORTED_ERRORS:
                        unreported.extend(ack.errors[: _MAX_UNREPORTED_ERRORS - len(unreported)])
                elif body in ("before_turn", "before_tool_call"):
                    # started in order (after everything before it was handled), answered when done: a slow or
                    # blocking hook of one session never holds up the frames of another (docs/protocol.md [4.4])
                    # eagerly: a handler that answers at once costs no task (extension_sdk/_eager.py)
                    task = start_eager(self._answer_hook(fid, body, frame, out))
                    if task is not None:
                        hooks.add(task)
                        task.add_done_callback(hooks.discard)
                        if fid:
                            hook_ids[fid] = (task, frame)
                            task.add_done_callback(lambda _t, i=fid: hook_ids.pop(i, None))
                elif body == "execute_tool":
                    task = asyncio.create_task(self._stream_tool(fid, frame.execute_tool, out))
                    tools[fid] = task
                    task.add_done_callback(lambda _t, i=fid: tools.pop(i, None))
                elif body == "cancel":
                    running = tools.get(frame.cancel.id)
                    if running is not None:
                        running.cancel()
                    elif (hook := hook_ids.pop(frame.cancel.id, None)) is not None:
                        self._host_gave_up(*hook)
                elif fid:
                    # A frame kind this SDK does not know (a newer host): answer so nobody waits for it.
                    out.put_nowait(pb.ExtensionFrame(id=fid))
            if tools or hooks:  # the host half-closed: let the calls in flight answer, then end the stream
                await asyncio.gather(*list(tools.values()), *list(hooks), return_exceptions=True)
        finally:
            for task in [*tools.values(), *hooks]:
                task.cancel()
            out.put_nowait(None)

    def _host_gave_up(self, task: asyncio.Task[None], frame: pb.HostFrame) -> None:
        """The host stopped waiting for an awaited hook (its deadline passed, or the turn was cancelled): cancel
        the handler's task, and say so in the extension's log (an answer would be discarded anyway)."""
        body = frame.WhichOneof("body") or ""
        name = "beforeTurn" if body == "before_turn" else "beforeToolCall"
        request = getattr(frame, body)
        hook = self._hooks.get(name)
        context = request.context
        sync = hook is not None and not hook.is_async
        log.warning("%s handler cancelled: the host gave up on it (deadline %s, request %r)%s", name,
                    _deadline_text(context.deadline_unix_ms), context.request_id,
                    "; a sync handler's thread cannot be stopped: it runs on, its answer is discarded" if sync else "")
        task.cancel(_HOST_GAVE_UP)

    async def _answer_hook(self, fid: int, body: str, frame: pb.HostFrame,
                           out: ReplyOut) -> None:
        try:
            # the reply frame filled in place (CopyFrom): the same bytes as ExtensionFrame(id=, before_...=), half
            # the cost of the keyword construction for a small answer
            if body == "before_turn":
                turn = await self._before_turn(frame.before_turn)
                if fid:
                    reply = pb.ExtensionFrame(id=fid)
                    reply.before_turn.CopyFrom(turn)
                    out.put_nowait(reply)
            else:
                call = await self._before_tool_call(frame.before_tool_call)
                if fid:
                    reply = pb.ExtensionFrame(id=fid)
                    reply.before_tool_call.CopyFrom(call)
                    out.put_nowait(reply)
        except asyncio.CancelledError as exc:
            if exc.args != (_HOST_GAVE_UP,):
                raise
            # cancelled by the host's `cancel` frame: no answer is owed (docs/protocol.md [5.5])

    async def _stream_tool(self, fid: int, request: pb.ExecuteToolRequest,
                           out: ReplyOut) -> None:
        async for event in self._tool_events(request):
            out.put_nowait(pb.ExtensionFrame(id=fid, tool_event=event))

    async def ExecuteTool(self, request: pb.ExecuteToolRequest, context: Any) -> AsyncIterator[pb.ToolEvent]:
        async for event in self._tool_events(request):
            yield event

    async def _tool_events(self, request: pb.ExecuteToolRequest) -> AsyncIterator[pb.ToolEvent]:
        """Zero or more preliminary events, then exactly one output or error event."""
        tool = self._ext.tools.get(request.name)
        if tool is None:
            known = ", ".join(self._ext.tools) or "none"
            message = f"extension {self._ext.name!r} has no tool {request.name!r} (tools: {known})"
            log.error("%s", message)
            yield pb.ToolEvent(error=pb.HookError(hook="tool", name="UnknownTool", message=message))
            return
        try:
            async for event in self._run_tool(tool, request):
                yield event
        except Exception as exc:
            log.error("tool %s raised %s: %s", tool.name, type(exc).__name__, exc, exc_info=exc)
            err = hook_error("tool", exc)
            yield pb.ToolEvent(error=err)

    async def _run_tool(self, tool: ToolDef, request: pb.ExecuteToolRequest) -> AsyncIterator[pb.ToolEvent]:
        args: Any = _decode(request.input_json)
        if args is None:
            args = {}
        if tool.model is not None:
            args = tool.model.model_validate(args)
        set_current_call(request.context)
        call_args = (args, self._host(request.context.session_id)) if tool.wants_host else (args,)
        loop = asyncio.get_running_loop()
        if tool.is_async_gen:
            pending = _MISSING
            async for value in tool.fn(*call_args):
                if pending is not _MISSING:
                    yield pb.ToolEvent(preliminary_json=tool_value_json(tool.name, pending, True))
                pending = value
            yield pb.ToolEvent(output_json=tool_value_json(tool.name, None if pending is _MISSING else pending, False))
            return
        if tool.streaming:  # a sync generator: advance it in a worker thread
            gen = await loop.run_in_executor(self._executor, contextvars.copy_context().run, functools.partial(tool.fn, *call_args))
            pending = _MISSING
            while True:
                value = await loop.run_in_executor(self._executor, contextvars.copy_context().run, next, gen, _MISSING)
                if value is _MISSING:
                    break
                if pending is not _MISSING:
                    yield pb.ToolEvent(preliminary_json=tool_value_json(tool.name, pending, True))
                pending = value
            yield pb.ToolEvent(output_json=tool_value_json(tool.name, None if pending is _MISSING else pending, False))
            return
        if tool.is_async:
            result = await tool.fn(*call_args)
        else:
            result = await loop.run_in_executor(self._executor, contextvars.copy_context().run, functools.partial(tool.fn, *call_args))
            if inspect.isawaitable(result):
                result = await result
        yield pb.ToolEvent(output_json=tool_value_json(tool.name, result, False))

    async def Shutdown(self, request: pb.ShutdownRequest, context: Any) -> pb.ShutdownResponse:
        grace = request.grace_ms / 1000.0
        log.info("shutdown requested by the host (grace %.0f ms)", request.grace_ms)
        asyncio.get_running_loop().call_soon(self._on_shutdown, grace)
        return pb.ShutdownResponse()
