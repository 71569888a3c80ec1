"""`ExtensionHarness`: call an extension's hooks and tools in a test, without a host process.

The extension's real servicer is served by grpc.aio in the test's own event loop on a Unix socket in a private
temp directory, behind the real token check, and called through a real gRPC client with the host's 16 MiB
receive limit (like go-plugin's TestPluginGRPCConn). Its `host` argument talks to a `FakeHost`: a real HostBridge
server, in the same loop, whose files, messages and context the test presets and inspects. Nothing is patched:
what passes here passes the same code paths the host drives, short of the process and the sandbox.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import secrets
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Any

import grpc
import grpc.aio

from .._bridge_client import HostConnection
from .._extension import Extension
from .._extension_server import ExtensionServicer, TokenInterceptor
from .._reply_limit import MAX_REPLY_BYTES
from ..proto import TOKEN_METADATA_KEY, extension_pb2_grpc, host_bridge_pb2_grpc
from ..proto import extension_pb2 as pb
from . import _wire
from ._daemon_executor import DaemonExecutor
from ._fake_host import FakeHost

_SERVER_MAX_MESSAGE = 64 * 1024 * 1024  # as extension_sdk serves (the host's 16 MiB limit is on our client)


class HarnessWarning(UserWarning):
    """Something the test passed but the host would not (e.g. beforeTurn fields of the wrong type)."""


class HookFailed(Exception):
    """The extension's hook handler raised (or its reply was refused): `hook`, `name` (the exception class),
    `message`, and `stack` (the extension's traceback)."""

    def __init__(self, error: pb.HookError, hook: str) -> None:
        self.hook = error.hook or hook
        self.name = error.name
        self.message = error.message
        self.stack = error.stack
        text = f"{self.hook} handler failed: {self.name}: {self.message}"
        super().__init__(text + (f"\n--- the extension's traceback ---\n{self.stack}" if self.stack else ""))


class ToolFailed(Exception):
    """The tool answered with an error event: `tool`, `name` (e.g. "ValueError", "UnknownTool",
    "ReplyTooLarge"), `message` and `stack`."""

    def __init__(self, error: pb.HookError, tool: str) -> None:
        self.tool = tool
        self.name = error.name
        self.message = error.message
        self.stack = error.stack
        text = f"tool {tool!r} failed: {self.name}: {self.message}"
        super().__init__(text + (f"\n--- the extension's traceback ---\n{self.stack}" if self.stack else ""))


def _socket_dir() -> str:
    """A private directory whose socket paths fit the 107-byte limit of a Unix socket address."""
    base = tempfile.gettempdir()
    if len(base) > 60:
        base = "/tmp"
    path = tempfile.mkdtemp(prefix="hw-harness-", dir=base)
    os.chmod(path, 0o700)
    return path


def _snapshot(hook: str, snapshot: Mapping[str, Any] | None, fields: Mapping[str, Any]) -> dict[str, Any]:
    if snapshot is not None and not isinstance(snapshot, Mapping):
        raise TypeError(f"{hook}: the snapshot is a dict of camelCase fields, not a {type(snapshot).__name__}")
    return {**(snapshot or {}), **fields}


class ExtensionHarness:
    """Serve `ext` in this event loop and call it like the host does.

        async with ExtensionHarness(ext, files={"notes.txt": "hi"}) as h:
            assert await h.call_tool("greet", {"name": "Ada"}) == "Hello, Ada!"
            assert await h.before_turn(system="S") == {"system": "S\\nBe brief."}
            await h.after_tool_call(toolName="greet", output="Hello, Ada!")
            assert h.host.text("audit.jsonl") == "..."

    Snapshots are given as the handler receives them (camelCase; snake_case works too); fields left out get
    neutral defaults. A handler that raises makes the call raise `HookFailed` / `ToolFailed` with the
    extension's traceback. `bridge=False` gives handlers `host=None`, as for a manifest that grants nothing.
    Every call carries the CallContext the host would send (see `current_call()`): `session_id`, and the
    `request_id` of the turn in progress, shared by all calls until `next_turn()` starts another.
    For tests without an event loop use `SyncExtensionHarness` (same methods, blocking) or the
    `extension_harness` pytest fixture.
    """

    def __init__(
        self,
        ext: Extension,
        *,
        files: Mapping[str, str | bytes] | None = None,
        messages: Iterable[Mapping[str, Any]] | None = None,
        context: Mapping[str, str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        deny: Iterable[str] = (),
        bridge: bool = True,
        session_id: str = "test-session",
        model_id: str = "hookwire/scripted",
        timeout_s: float | None = 60.0,
    ) -> None:
        if not isinstance(ext, Extension):
            raise TypeError(f"ExtensionHarness takes an extension_sdk.Extension, not a {type(ext).__name__}")
        self.ext = ext
        self.session_id = session_id
        self.timeout_s = timeout_s
        self._token = secrets.token_hex(16)
        self.host = FakeHost(files=files, messages=messages, context=context, metadata=metadata,
                             model_id=model_id, deny=deny, token=self._token)
        self._bridge_enabled = bridge
        self._turns = itertools.count(1)
        self.request_id = f"test-request-{next(self._turns)}"
        self._dir: str | None = None
        self._servers: list[grpc.aio.Server] = []
        self._conn: HostConnection | None = None
        self._executor: DaemonExecutor | None = None
        self._channel: grpc.aio.Channel | None = None
        self._stub: extension_pb2_grpc.ExtensionStub | None = None

    # -- lifecycle ---------------------------------------------------------------------------------

    async def __aenter__(self) -> ExtensionHarness:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def start(self) -> None:
        """Start the fake host and the extension's server, and connect to it (what `async with` does)."""
        if self._stub is not None:
            raise RuntimeError("this ExtensionHarness is already started")
        self._dir = _socket_dir()
        try:
            if self._bridge_enabled:
                bridge = grpc.aio.server()
                host_bridge_pb2_grpc.add_HostBridgeServicer_to_server(self.host, bridge)
                bridge_target = f"unix:{os.path.join(self._dir, 'bridge.sock')}"
                bridge.add_insecure_port(bridge_target)
                await bridge.start()
                self._servers.append(bridge)
                self._conn = HostConnection(bridge_target, self._token)
            self._executor = DaemonExecutor(max_workers=8, name=f"{self.ext.name}-handler")
            servicer = ExtensionServicer(self.ext, self._conn, on_shutdown=lambda _grace: None,
                                         executor=self._executor)
            server = grpc.aio.server(
                interceptors=[TokenInterceptor(self._token)],
                options=[("grpc.max_receive_message_length", _SERVER_MAX_MESSAGE),
                         ("grpc.max_send_message_length", _SERVER_MAX_MESSAGE)],
            )
            extension_pb2_grpc.add_ExtensionServicer_to_server(servicer, server)
            target = f"unix:{os.path.join(self._dir, 'ext.sock')}"
            server.add_insecure_port(target)
            await server.start()
            self._servers.append(server)
            self._channel = grpc.aio.insecure_channel(
                target, options=[("grpc.max_receive_message_length", MAX_REPLY_BYTES), ("grpc.enable_retries", 0)]
            )
            self._stub = extension_pb2_grpc.ExtensionStub(self._channel)
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        """Stop everything started; safe to call twice."""
        if self._channel is not None:
            await self._channel.close()
            self._channel = self._stub = None
        for server in reversed(self._servers):
            await server.stop(0)
        self._servers.clear()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
        if self._conn is not None:
            await self._conn.close()
            self._conn = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    # -- plumbing ----------------------------------------------------------------------------------

    @property
    def _md(self) -> tuple[tuple[str, str], ...]:
        return ((TOKEN_METADATA_KEY, self._token),)

    def _context(self) -> pb.CallContext:
        return pb.CallContext(session_id=self.session_id, request_id=self.request_id)

    def next_turn(self) -> str:
        """Start another turn: the calls after this carry a new request id (returned), as the host's next turn's do."""
        self.request_id = f"test-request-{next(self._turns)}"
        return self.request_id

    def _stub_or_raise(self) -> extension_pb2_grpc.ExtensionStub:
        if self._stub is None:
            raise RuntimeError("the ExtensionHarness is not started: use `async with ExtensionHarness(ext) as h:`")
        return self._stub

    def _serves(self, hook: str) -> None:
        if hook not in self.ext.hooks:
            served = ", ".join(self.ext.hooks) or "none"
            raise LookupError(f"extension {self.ext.name!r} serves no {hook} hook (it serves: {served}); "
                              f"the host would never call it")

    async def _bounded(self, what: str, call: Any) -> Any:
        try:
            return await asyncio.wait_for(call, self.timeout_s)
        except asyncio.TimeoutError:
            raise TimeoutError(f"{what} of extension {self.ext.name!r} did not answer within {self.timeout_s} s") \
                from None

    # -- hooks -------------------------------------------------------------------------------------

    async def describe(self) -> dict[str, Any]:
        """What the host learns at start: name, version, hooks, tools (with their JSON Schemas), features."""
        resp = await self._bounded("Describe", self._stub_or_raise().Describe(pb.DescribeRequest(protocol_version="1"),
                                                                              metadata=self._md))
        return {
            "name": resp.name, "version": resp.version, "protocolVersion": resp.protocol_version,
            "description": resp.description, "hooks": list(resp.hooks), "features": list(resp.features),
            "tools": {t.name: {"description": t.description, "inputSchema": json.loads(t.input_schema_json or "{}"),
                               "streaming": t.streaming} for t in resp.tools},
        }

    async def before_turn(self, snapshot: Mapping[str, Any] | None = None, /, **fields: Any) -> dict[str, Any] | None:
        """Run beforeTurn; the TurnConfig fields it set (camelCase), or None when it changed nothing.

        Fields of the wrong type or unknown to the host are left out, with a `HarnessWarning` (the host refuses
        them one by one)."""
        self._serves("beforeTurn")
        req = pb.BeforeTurnRequest(context=self._context(),
                                   snapshot=_wire.turn_snapshot(_snapshot("beforeTurn", snapshot, fields)))
        resp = await self._bounded("beforeTurn", self._stub_or_raise().BeforeTurn(req, metadata=self._md))
        if resp.HasField("error"):
            raise HookFailed(resp.error, "beforeTurn")
        if not resp.HasField("config"):
            return None
        patch, extra = _wire.patch_dict(resp.config)
        if extra:
            warnings.warn(HarnessWarning(
                f"beforeTurn of {self.ext.name!r} returned fields the host refuses (unknown, not settable by an "
                f"extension, or of the wrong type): {extra!r}"), stacklevel=2)
        return patch

    async def before_tool_call(self, snapshot: Mapping[str, Any] | None = None, /, *, want_decision: bool = True,
                               **fields: Any) -> dict[str, Any] | None:
        """Run beforeToolCall asking for a decision (as with `hooks.beforeToolCall.decisions: true`): the decision
        as the handler returned it (`{"action": "block", "reason": ...}`), or None."""
        self._serves("beforeToolCall")
        req = pb.BeforeToolCallRequest(
            context=self._context(), want_decision=want_decision,
            snapshot=_wire.tool_call_snapshot(_snapshot("beforeToolCall", snapshot, fields)),
        )
        resp = await self._bounded("beforeToolCall", self._stub_or_raise().BeforeToolCall(req, metadata=self._md))
        if resp.HasField("error"):
            raise HookFailed(resp.error, "beforeToolCall")
        return _wire.decision_dict(resp.decision) if resp.HasField("decision") else None

    async def observe(self, events: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
        """Deliver observations in one batch, in order, as the host does: `[("onChunk", {...}), ...]` with the
        hooks afterToolCall, onStepFinish, onChunk (and beforeToolCall without a decision). Raises `HookFailed`
        for the first handler that failed."""
        items = []
        for hook, snap in events:
            spec = _wire.OBSERVATIONS.get(hook)
            if spec is None:
                raise ValueError(f"{hook!r} is not an observation; observations are {', '.join(_wire.OBSERVATIONS)}")
            self._serves(hook)
            items.append(pb.Observation(**{spec[0]: spec[1](_snapshot(hook, snap, {}))}))
        batch = pb.ObservationBatch(context=self._context(), items=items)
        ack = await self._bounded("Observe", self._stub_or_raise().Observe(batch, metadata=self._md))
        if ack.errors:
            raise HookFailed(ack.errors[0], ack.errors[0].hook)

    async def after_tool_call(self, snapshot: Mapping[str, Any] | None = None, /, **fields: Any) -> None:
        """Deliver an afterToolCall observation (`success` defaults to True unless `error` is given)."""
        await self.observe([("afterToolCall", _snapshot("afterToolCall", snapshot, fields))])

    async def on_step_finish(self, snapshot: Mapping[str, Any] | None = None, /, **fields: Any) -> None:
        """Deliver an onStepFinish observation."""
        await self.observe([("onStepFinish", _snapshot("onStepFinish", snapshot, fields))])

    async def on_chunk(self, snapshot: Mapping[str, Any] | None = None, /, **fields: Any) -> None:
        """Deliver an onChunk observation (`type` defaults to "text-delta")."""
        await self.observe([("onChunk", _snapshot("onChunk", snapshot, fields))])

    # -- tools -------------------------------------------------------------------------------------

    async def call_tool(self, name: str, args: Mapping[str, Any] | None = None, *,
                        on_preliminary: Callable[[Any], Any] | None = None) -> Any:
        """Run a tool with `args`: its output, decoded from JSON (what the model would see). A streaming tool's
        preliminary results go to `on_preliminary` first, in order. A failing tool raises `ToolFailed`."""
        req = pb.ExecuteToolRequest(name=name, input_json=json.dumps(dict(args or {})), context=self._context())

        async def run() -> Any:
            async for event in self._stub_or_raise().ExecuteTool(req, metadata=self._md):
                kind = event.WhichOneof("event")
                if kind == "preliminary_json":
                    if on_preliminary is not None:
                        result = on_preliminary(json.loads(event.preliminary_json))
                        if asyncio.iscoroutine(result):
                            await result
                elif kind == "output_json":
                    return json.loads(event.output_json) if event.output_json else None
                elif kind == "error":
                    raise ToolFailed(event.error, name)
            raise ToolFailed(pb.HookError(name="NoOutput", message="the stream ended without an output"), name)

        return await self._bounded(f"tool {name!r}", run())
