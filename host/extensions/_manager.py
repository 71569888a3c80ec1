"""ExtensionManager: the facade of the extension host — load, unload, close, introspect, and the five hooks.

It owns the parts and wires them; each job lives in its own module:

    _launch.Launcher       start/stop one extension (runtime dir, env, sandbox plan, spawn or endpoint, Describe)
    _supervisor.Supervisor watch, restart with backoff, quarantine
    _dispatch.Dispatcher   the hooks: beforeTurn merge, beforeToolCall decisions, observations and flush
    _tool_call             execute_tool and the gRPC error map
    _trace.Tracer          trace events to listeners
    _registry.Registry     the loaded extensions and their indexes

Failures of an extension (exceptions, RPC errors, timeouts, invalid values) are logged and traced, never raised
into a turn; only `load`, `execute_tool` and calls after `close` raise (host/_errors.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._errors import ExtensionError, ExtensionStartError
from .._logging import configure_from_env
from ..sandbox._egress_hosting import EgressProxies
from ..sandbox._plan import SandboxMode
from ..sandbox._zygote import Zygote, zygote_enabled
from . import _tool_call
from ._dispatch import Dispatcher
from ._journal_tap import JournalTap
from ._launch import Launcher
from ._manifest import Manifest, load_manifest
from ._persistence import ExtensionMemory
from ._registry import Registry
from ._snapshots import (
    CallContext,
    ChunkSnapshot,
    ExtensionDecision,
    MergedTurnPatch,
    SessionServices,
    StepSnapshot,
    ToolCallSnapshot,
    ToolResultSnapshot,
    TraceEvent,
    TurnSnapshot,
    as_context,
    as_snapshot,
)
from ._state import ExtensionInfo, ExtensionRuntime, ExtensionTool
from ._supervisor import Supervisor
from ._trace import Tracer

log = logging.getLogger("hookwire.extensions")


class ExtensionManager:
    """Loads extension manifests, supervises their processes and dispatches hooks and tools to them."""

    def __init__(self, *, sandbox: SandboxMode = "auto", runtime_dir: Path | None = None, zygote: bool = True,
                 egress_resolver: Mapping[str, str | Sequence[str]] | None = None, store: Any = None,
                 store_key: str = "default") -> None:
        """`sandbox`: "auto" (every layer this machine can enforce), "required" (refuse to run with less), "off".
        `runtime_dir`: where the private runtime dir is made (default: the temp dir, or /tmp when that is long).
        `zygote`: fork Python extensions from a pre-imported process (env HOOKWIRE_ZYGOTE=0 disables).
        `egress_resolver`: name -> address(es) for the extensions' egress proxies instead of DNS (tests).
        `store` (a host.MessageStore): remember what `load` loads (and `unload` forgets) under `store_key`, so
        `restore()` brings it back after a restart (host/extensions/_persistence.py)."""
        configure_from_env()  # HOOKWIRE_LOG_FORMAT=json: JSON log lines (host/_logging.py)
        self._memory = ExtensionMemory(store, store_key) if store is not None else None
        self._registry = Registry()
        self._trace = Tracer()
        self._egress = EgressProxies(self._trace, egress_resolver)  # per-extension proxies (permissions.network)
        self._dispatch = Dispatcher(self._registry, self._trace, self._egress)
        self.journal = JournalTap(self._trace)  # awaited hook calls of sessions with a journal (host/turn/_journal_writer.py)
        self.journal.install(self._dispatch)
        self._launcher = Launcher(
            self._registry, sandbox=sandbox, runtime_parent=runtime_dir,
            zygote=Zygote() if zygote and zygote_enabled() else None, egress=self._egress,
            on_observation_error=lambda ext, err, record: self._trace.observation_error(
                ext.name, err, self._dispatch.context_of(record) if record is not None else None),
            on_lost=lambda ext, why: self._supervisor.connection_lost(ext, why),
            on_stalled=lambda ext, waited: self._dispatch.observer_stalled(ext, waited),
        )
        self._supervisor = Supervisor(self._registry, self._trace, self._dispatch.ledger, self._start)

    async def __aenter__(self) -> ExtensionManager:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def protect_paths(self, paths: Sequence[str | Path]) -> None:
        """Add host-private paths (a store file, a workspace root) no extension may read, even inside its cwd.

        Applies to extensions started (or restarted) from now on: host.Agent calls it before it loads its
        extensions, or when it starts with a manager that already runs some. The sandbox's private root covers
        them (layer fs_read_confinement) -- for a store file, its -wal/-shm/-journal too.
        """
        self._launcher.protect_paths(paths)

    # -- loading, unloading, closing --------------------------------------------------------------------

    async def load(self, manifest: str | Path | Manifest, *, remember: bool = True) -> ExtensionInfo:
        """Validate a manifest, start its extension and wait until it serves. Raises ExtensionStartError.
        With a `store`, the extension is remembered for `restore()` unless `remember=False`."""
        return (await self.load_all([manifest], remember=remember))[0]

    async def restore(self) -> list[ExtensionInfo]:
        """Load the remembered extensions that are not loaded (idempotent); one that fails is logged and skipped.
        Returns what it loaded."""
        if self._memory is None:
            return []
        restored: list[ExtensionInfo] = []
        for name, manifest in await self._memory.manifests():
            if manifest is None or name in self._registry.exts:
                continue
            try:
                restored.extend(await self.load_all([manifest], remember=False))
            except ExtensionError as exc:
                log.error("restore: extension %r did not start: %s", name, exc)
        return restored

    async def load_all(self, manifests: Sequence[str | Path | Manifest], *,
                       remember: bool = True) -> list[ExtensionInfo]:
        """Load several extensions, started in parallel, kept in the given (load) order. All or nothing."""
        reg = self._registry
        if reg.closed:
            raise ExtensionError("the extension manager is closed")
        parsed = [m if isinstance(m, Manifest) else load_manifest(m) for m in manifests]
        exts: list[ExtensionRuntime] = []
        for m in parsed:
            src = m.source or "<inline manifest>"
            if m.name in reg.exts or any(e.name == m.name for e in exts):
                raise ExtensionStartError(
                    f"extension {m.name!r} is already loaded (manifest {src})", extension=m.name, manifest=src
                )
            clash = [e.name for e in [*reg.exts.values(), *exts] if e.prefix == m.tool_prefix]
            if clash:
                raise ExtensionStartError(
                    f"extension {m.name!r} (manifest {src}): its tool namespace {m.tool_prefix!r} is already "
                    f"used by the loaded extension {clash[0]!r}",
                    extension=m.name,
                    manifest=src,
                )
            exts.append(ExtensionRuntime(m))
        for ext in exts:
            reg.exts[ext.name] = ext
            reg.unloaded.discard(ext.prefix)
        try:
            results = await asyncio.gather(*(self._start(ext) for ext in exts), return_exceptions=True)
        except BaseException:  # the caller was cancelled: nothing of this load may stay behind
            await asyncio.shield(self._discard(exts))
            raise
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            await asyncio.shield(self._discard(exts))
            raise errors[0]
        for ext in exts:
            log.info(
                "loaded extension %r %s (pid %s): hooks %s, tools %s",
                ext.name, ext.info().version, ext.proc.pid if ext.proc else "-", ext.hooks or "none",
                list(ext.tools) or "none",
            )
        if remember and self._memory is not None:
            await self._memory.remember(parsed)
        return [ext.info() for ext in exts]

    async def _start(self, ext: ExtensionRuntime) -> None:
        """Start (or restart) one extension and supervise it."""
        await self._launcher.start(ext)
        self._supervisor.started(ext)

    async def _stop(self, ext: ExtensionRuntime) -> None:
        ext.stopping = True
        await self._supervisor.release(ext)
        await self._launcher.stop(ext)

    async def _discard(self, exts: list[ExtensionRuntime]) -> None:
        """Stop and forget extensions whose load failed or was cancelled."""
        await asyncio.gather(*(self._stop(ext) for ext in exts), return_exceptions=True)
        for ext in exts:
            if self._registry.exts.get(ext.name) is ext:
                del self._registry.exts[ext.name]
            await self._launcher.remove_dirs(ext)
        self._registry.changed()

    async def unload(self, name: str) -> bool:
        """Stop and forget an extension. False when no extension of that name is loaded."""
        ext = self._registry.exts.pop(name, None)
        if ext is None:
            return False
        self._registry.unloaded.add(ext.prefix)
        self._registry.changed()
        await asyncio.shield(self._stop(ext))
        await asyncio.shield(self._launcher.remove_dirs(ext))
        if self._memory is not None:
            await self._memory.forget(name)
        log.info("unloaded extension %r", name)
        return True

    async def close(self) -> None:
        """Stop every extension (Shutdown, SIGTERM, SIGKILL of its process group) and the HostBridge.

        Runs to completion even when the caller is cancelled (the cancellation is re-raised after).
        """
        task = asyncio.ensure_future(self._close())
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            await asyncio.wait([task])
            raise

    async def _close(self) -> None:
        reg = self._registry
        reg.closed = True
        exts = list(reg.exts.values())
        reg.exts.clear()
        reg.changed()
        try:
            await asyncio.gather(*(self._stop(ext) for ext in exts), return_exceptions=True)
        finally:
            await self._launcher.close()

    # -- introspection -------------------------------------------------------------------------------------

    def extensions(self) -> list[ExtensionInfo]:
        return [ext.info() for ext in self._registry.exts.values()]

    def tool_names(self) -> list[str]:
        return self._registry.tool_names()

    def tools(self) -> list[ExtensionTool]:
        return [tool for ext in self._registry.exts.values() for tool in ext.tools.values()]

    def subscribers(self, hook: str) -> list[str]:
        """Names of the loaded extensions serving `hook`, in load order."""
        return [ext.name for ext in self._registry.exts.values() if hook in ext.hooks]

    def add_trace_listener(self, fn: Callable[[TraceEvent], None], session_id: str | None = None) -> None:
        """Call `fn` with every trace event, or with `session_id`'s only (the events of its calls' context)."""
        self._trace.add_listener(fn, session_id)

    def remove_trace_listener(self, fn: Callable[[TraceEvent], None], session_id: str | None = None) -> None:
        """Remove `fn`, added with the same `session_id`."""
        self._trace.remove_listener(fn, session_id)

    # -- the five hooks (host/extensions/_dispatch.py) ---------------------------------------------------------

    # The hook methods take the snapshot models or their camelCase dicts (and so does `context`).

    async def before_turn(self, snapshot: TurnSnapshot | Mapping[str, Any],
                          context: CallContext | Mapping[str, Any] | None = None, *,
                          deadline: float | None = None) -> MergedTurnPatch:
        """Run beforeTurn on each subscriber in load order and merge the patches (last wins).

        `deadline` (event-loop time, optional): the turn's end; no extension waits past it.
        """
        snapshot = as_snapshot(TurnSnapshot, snapshot, "beforeTurn snapshot")
        return await self._dispatch.before_turn(snapshot, as_context(context), deadline)

    async def before_tool_call(
        self, snapshot: ToolCallSnapshot | Mapping[str, Any], context: CallContext | Mapping[str, Any] | None = None,
        *, deadline: float | None = None
    ) -> ExtensionDecision | None:
        """beforeToolCall: an observation for subscribers without `decisions`, awaited on the deciders.

        Deny (block) wins, then the first substitute, then the first allow-with-input (load order).
        `deadline` (event-loop time, optional): the turn's end; no decider waits past it (a fail-closed one
        that could not answer in time blocks).
        """
        snapshot = as_snapshot(ToolCallSnapshot, snapshot, "beforeToolCall snapshot")
        return await self._dispatch.before_tool_call(snapshot, as_context(context), deadline)

    def after_tool_call(self, snapshot: ToolResultSnapshot | Mapping[str, Any],
                        context: CallContext | Mapping[str, Any] | None = None) -> None:
        self._dispatch.after_tool_call(as_snapshot(ToolResultSnapshot, snapshot, "afterToolCall snapshot"),
                                       as_context(context))

    def on_step_finish(self, snapshot: StepSnapshot | Mapping[str, Any],
                       context: CallContext | Mapping[str, Any] | None = None) -> None:
        self._dispatch.on_step_finish(as_snapshot(StepSnapshot, snapshot, "onStepFinish snapshot"), as_context(context))

    def on_chunk(self, snapshot: ChunkSnapshot | Mapping[str, Any],
                 context: CallContext | Mapping[str, Any] | None = None) -> None:
        if not isinstance(snapshot, ChunkSnapshot):  # the per-chunk path: no call when it is the model
            snapshot = as_snapshot(ChunkSnapshot, snapshot, "onChunk snapshot")
        if context is not None and not isinstance(context, CallContext):
            context = as_context(context)
        self._dispatch.on_chunk(snapshot, context)

    def on_chunk_fields(self, type_: str, text: str | None, tool_name: str | None, tool_call_id: str | None,
                        context: CallContext | None) -> None:
        """`on_chunk` for the host's own turn loop: the chunk's fields as they are (trusted), no snapshot model."""
        self._dispatch.on_chunk_fields(type_, text, tool_name, tool_call_id, context)

    def send_observations(self) -> None:
        """Start delivering every queued observation now, without waiting (a later `flush()` waits for the acks).

        The agent calls this when a turn's last step is done, so the extensions handle the turn's last
        observations while the host persists the assistant message.
        """
        self._dispatch.send_observations()

    async def flush(self, context: CallContext | None = None) -> None:
        """Wait until every extension handled the observations enqueued so far (bounded by hook deadlines)."""
        await self._dispatch.flush(context)

    # -- tools and sessions ----------------------------------------------------------------------------------

    async def execute_tool(
        self,
        name: str,
        input: Any,
        *,
        context: CallContext | None = None,
        tool_call_id: str = "",
        on_preliminary: Callable[[Any], Any] | None = None,
    ) -> Any:
        """Run an extension tool by its namespaced name; the final output (JSON-decoded).

        Raises ExtensionToolError (the tool failed), ExtensionUnloadedError, ExtensionUnavailableError.
        """
        return await _tool_call.execute_tool(self._registry, self._trace, self._egress, name, input,
                                             context=context, tool_call_id=tool_call_id, on_preliminary=on_preliminary)

    def register_session(self, session_id: str, services: SessionServices) -> None:
        """Serve the HostBridge calls of session `session_id` with `services` (host.Agent registers its own)."""
        self._launcher.bridge.register_session(session_id, services)

    def unregister_session(self, session_id: str) -> None:
        self._launcher.bridge.unregister_session(session_id)
