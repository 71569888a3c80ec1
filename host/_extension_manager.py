"""ExtensionManager: load, supervise and dispatch to out-of-process extensions.

One manager owns a private runtime dir (0700) holding the extensions' sockets and scratch dirs. Each
extension is started with a scrubbed environment in its own process group (through host._sandbox's
launch plan), handshakes, is described, then receives hooks in load order. Failures of an extension
(exceptions, RPC errors, timeouts, invalid values) are logged and traced, never raised to the turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import grpc
from extension_sdk.proto import PROTOCOL_VERSION, extension_pb2 as pb

from ._extension_connection import ExtensionConnection
from ._extension_errors import (
    ExtensionError,
    ExtensionReplyError,
    ExtensionStartError,
    ExtensionToolError,
    ExtensionUnavailableError,
    ExtensionUnloadedError,
)
from ._egress_hosting import EgressProxies
from ._extension_process import ExtensionProcess
from ._fs_cleanup import remove_tree_logged
from ._zygote import Zygote, zygote_enabled
from ._extension_state import ExtensionInfo, ExtensionTool, ExtensionRuntime
from ._frame_bytes import context_field, observation_item
from ._endpoint_tls import describe_failure_hint, endpoint_channel
from ._health import HealthProbe
from ._stream_bridge import StreamBridges
from ._manifest import HOOK_NAMES, Manifest, load_manifest
from ._observer_ledger import ObserverLedger
from ._reply_bounds import bounded_substitute, tool_reply_bounds
from ._tool_names import ToolNameCollision, collision_message, extension_collisions, extension_owner
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
    TurnPatch,
    TurnSnapshot,
)
from ._turn_config_policy import MAP_FIELDS, TurnConfigDenial, merge_options, provider_of, screen_reply
from ._wire_convert import (
    MAX_JSON_CHARS,
    camel,
    chunk_to_observation,
    context_to_proto,
    decision_from_proto,
    json_size_error,
    patch_from_proto,
    step_to_proto,
    tool_call_to_proto,
    tool_result_to_proto,
    turn_to_proto,
)

log = logging.getLogger("hookwire.extensions")

SandboxMode = Literal["off", "auto", "required"]
MAGIC_COOKIE = "hookwire-extension-v1"
_PASSTHROUGH_ENV = ("PATH", "LANG", "LC_ALL", "TZ")
_MAX_SOCKET_PATH = 100
_MAX_DETAIL = 1000  # characters of an extension-supplied error text kept in logs and traces


def _bounded(text: str, limit: int = _MAX_DETAIL) -> str:
    """An untrusted text cut to `limit` characters for a log line or a trace."""
    return text if len(text) <= limit else f"{text[:limit]}…[{len(text) - limit} more characters]"


class ExtensionManager:
    """Loads extension manifests, supervises their processes and dispatches hooks and tools to them."""

    def __init__(self, *, sandbox: SandboxMode = "auto", runtime_dir: Path | None = None, zygote: bool = True,
                 egress_resolver: Mapping[str, str | Sequence[str]] | None = None) -> None:
        """`zygote`: fork Python extensions from a pre-imported process (host._zygote; env HOOKWIRE_ZYGOTE=0 disables).
        `egress_resolver`: name -> address(es) for the extensions' egress proxies instead of DNS (tests)."""
        self._sandbox_mode: SandboxMode = sandbox
        self._egress = EgressProxies(self._trace, egress_resolver)  # per-extension proxies (permissions.network)
        self._zygote: Zygote | None = Zygote() if zygote and zygote_enabled() else None
        self._runtime_parent = runtime_dir
        self._runtime: Path | None = None
        self._exts: dict[str, ExtensionRuntime] = {}
        self._unloaded: set[str] = set()  # tool prefixes of unloaded extensions
        self._tool_index: dict[str, tuple[ExtensionRuntime, str]] = {}
        self._sub_cache: dict[str, list[ExtensionRuntime]] = {}
        self._listeners: list[Callable[[TraceEvent], None]] = []
        self._ctx_of_record: CallContext | None = None  # the context whose record _broadcast holds
        self._ctx_record_key: tuple[str, str] | None = None
        self._ctx_record = context_field(context_to_proto(None))
        self._flush_marks: dict[str, tuple[int, int]] = {}  # extension -> (enqueued, dropped) at its last flush
        self._ledger = ObserverLedger()  # stalled observers detached per turn; observations lost per turn
        self._bridge: Any = None
        self._bridge_lock = asyncio.Lock()
        self._stream_bridges = StreamBridges()  # HostBridge calls riding the extensions' Connect streams
        self._sessions: dict[str, SessionServices] = {}
        self._closed = False
        self._private: list[Path] = []  # host-private paths hidden from every extension (protect_paths)

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
        for p in paths:
            resolved = Path(p).resolve()
            if resolved not in self._private:
                self._private.append(resolved)

    def _hidden_from(self, ext: ExtensionRuntime) -> list[Path]:
        """What `ext` must not see: the protected paths and every other extension's files and dirs."""
        hidden = list(self._private)
        for other in self._exts.values():
            if other is ext:
                continue
            if other.manifest.source:
                hidden += [Path(other.manifest.source), Path(other.manifest.source).parent]
            if other.scratch_dir is not None:
                hidden.append(other.scratch_dir)
            if other.socket_path is not None:
                hidden.append(other.socket_path.parent)
        return hidden

    def _socket_dir(self, ext: ExtensionRuntime) -> Path:
        """A fresh private (0700, unpredictable name) runtime subdir for this generation's socket."""
        old = ext.socket_path.parent if ext.socket_path is not None else None
        if old is not None and old != self._runtime_dir():
            remove_tree_logged(old, f"the old socket dir of extension {ext.name!r}")
        sub = Path(tempfile.mkdtemp(prefix="s", dir=self._runtime_dir()))
        os.chmod(sub, 0o700)
        return sub

    # -- runtime dir ---------------------------------------------------------------------------

    def _runtime_dir(self) -> Path:
        if self._runtime is None:
            parent = str(self._runtime_parent) if self._runtime_parent is not None else None
            if parent is None and len(tempfile.gettempdir()) > 40:
                parent = "/tmp"
            self._runtime = Path(tempfile.mkdtemp(prefix="hw-", dir=parent))
            os.chmod(self._runtime, 0o700)
        return self._runtime

    # -- loading -------------------------------------------------------------------------------

    async def load(self, manifest: str | Path | Manifest) -> ExtensionInfo:
        """Validate a manifest, start its extension and wait until it serves. Raises ExtensionStartError."""
        return (await self.load_all([manifest]))[0]

    async def load_all(self, manifests: Sequence[str | Path | Manifest]) -> list[ExtensionInfo]:
        """Load several extensions, started in parallel, kept in the given (load) order. All or nothing."""
        if self._closed:
            raise ExtensionError("the extension manager is closed")
        parsed = [m if isinstance(m, Manifest) else load_manifest(m) for m in manifests]
        exts: list[ExtensionRuntime] = []
        for m in parsed:
            src = m.source or "<inline manifest>"
            if m.name in self._exts or any(e.name == m.name for e in exts):
                raise ExtensionStartError(
                    f"extension {m.name!r} is already loaded (manifest {src})", extension=m.name, manifest=src
                )
            clash = [e.name for e in [*self._exts.values(), *exts] if e.prefix == m.tool_prefix]
            if clash:
                raise ExtensionStartError(
                    f"extension {m.name!r} (manifest {src}): its tool namespace {m.tool_prefix!r} is already "
                    f"used by the loaded extension {clash[0]!r}",
                    extension=m.name,
                    manifest=src,
                )
            exts.append(ExtensionRuntime(m))
        for ext in exts:
            self._exts[ext.name] = ext
            self._unloaded.discard(ext.prefix)
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
        return [ext.info() for ext in exts]

    async def _discard(self, exts: list[ExtensionRuntime]) -> None:
        """Stop and forget extensions whose load failed or was cancelled."""
        await asyncio.gather(*(self._stop(ext) for ext in exts), return_exceptions=True)
        for ext in exts:
            if self._exts.get(ext.name) is ext:
                del self._exts[ext.name]
            await self._remove_dirs(ext)
        self._changed()

    def _env(self, ext: ExtensionRuntime, socket_path: Path, scratch: Path, bridge_target: str | None) -> dict[str, str]:
        env = {k: os.environ[k] for k in _PASSTHROUGH_ENV if k in os.environ}
        for k in ext.manifest.env:
            if k in os.environ:
                env[k] = os.environ[k]
        env.update(
            HOOKWIRE_SOCKET=str(socket_path),
            HOOKWIRE_TOKEN=ext.token,
            HOOKWIRE_MAGIC_COOKIE=MAGIC_COOKIE,
            HOOKWIRE_EXTENSION_NAME=ext.name,
            HOOKWIRE_SCRATCH_DIR=str(scratch),
        )
        if bridge_target:
            env["HOOKWIRE_HOST_ADDRESS"] = bridge_target
        return env

    def _plan(self, ext: ExtensionRuntime, command: list[str], env: dict[str, str], scratch: Path,
              socket_dir: Path | None = None, bridge_socket: Path | None = None,
              egress_socket: Path | None = None) -> tuple[list[str], dict[str, str]]:
        """The launch argv/env through host._sandbox (when present)."""
        if importlib.util.find_spec("host._sandbox") is None:
            return command, env
        from . import _sandbox

        try:
            plan = _sandbox.plan_launch(
                ext.manifest, command=command, env=env, scratch_dir=scratch, runtime_dir=self._runtime_dir(),
                mode=self._sandbox_mode, socket_dir=socket_dir, cwd=ext.manifest.working_dir(),
                private_paths=self._hidden_from(ext), sockets=[bridge_socket] if bridge_socket else [],
                egress=_sandbox.EgressSpec(port=_sandbox.EGRESS_PORT, socket=str(egress_socket)) if egress_socket else None,
            )
        except _sandbox.SandboxUnavailable as exc:
            raise ExtensionStartError(
                f"extension {ext.name!r} (manifest {ext.manifest_file}): {exc}",
                extension=ext.name, manifest=ext.manifest_file,
            ) from None
        ext.enforced, ext.missing = list(plan.enforced), list(plan.missing)
        return list(plan.argv), dict(plan.env)

    async def _bridge_target(self, ext: ExtensionRuntime) -> str | None:
        if not ext.manifest.permissions.grants_bridge():
            return None
        async with self._bridge_lock:
            await self._bridge_server(ext, listen=True)
            self._bridge.register_extension(ext.token, ext.manifest)
            return str(self._bridge.target)

    async def _stream_bridge(self, ext: ExtensionRuntime) -> Any:
        """The answerer of HostBridge calls on the extension's Connect stream (host/_stream_bridge.py), or None when
        its manifest grants no bridge permission. Needs no listening socket (a remote extension gets it too)."""
        if not ext.manifest.permissions.grants_bridge():
            return None
        async with self._bridge_lock:
            await self._bridge_server(ext, listen=False)
            return self._stream_bridges.open(self._bridge, ext.name, ext.manifest).answer

    async def _bridge_server(self, ext: ExtensionRuntime, *, listen: bool) -> None:
        """Create the HostBridge server (sessions registered) if needed; with `listen`, serve its Unix socket."""
        if self._bridge is None:
            if importlib.util.find_spec("host._bridge") is None:
                raise ExtensionStartError(
                    f"extension {ext.name!r} (manifest {ext.manifest_file}) is granted HostBridge permissions, "
                    "but this host has no HostBridge server (host/_bridge.py is missing)",
                    extension=ext.name, manifest=ext.manifest_file,
                )
            from . import _bridge

            bridge = _bridge.HostBridgeServer(self._runtime_dir() / "bridge.sock")
            self._bridge = bridge
            for sid, services in self._sessions.items():
                bridge.register_session(sid, services)
        if listen:
            await self._bridge.start()

    async def _start(self, ext: ExtensionRuntime) -> None:
        """Start (or restart) one extension: spawn, handshake, connect, Describe."""
        m = ext.manifest
        where = f"extension {ext.name!r} (manifest {ext.manifest_file})"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + m.timeouts.start_ms / 1000
        ext.generation += 1
        if m.endpoint is not None:
            credentials, channel_options = endpoint_channel(m, ext.manifest_file)
            conn = ExtensionConnection(
                ext.name, m.endpoint, ext.token, credentials=credentials, channel_options=channel_options,
                on_observation_error=lambda err, e=ext: self._observation_error(e, err),
                on_lost=lambda why, e=ext: self._connection_lost(e, why),
                on_stalled=lambda waited, e=ext: self._observer_stalled(e, waited),
                observe_timeout_s=m.timeouts.hook_ms / 1000,
                coalesce_s=m.observations.max_delay_ms / 1000, bridge=await self._stream_bridge(ext),
            )
        else:
            runtime = self._runtime_dir()
            if ext.scratch_dir is None:
                scratch_root = runtime / "scratch"
                scratch_root.mkdir(mode=0o700, exist_ok=True)
                ext.scratch_dir = Path(tempfile.mkdtemp(prefix=f"{ext.prefix[:24]}-", dir=scratch_root))
            sock = self._socket_dir(ext) / f"{ext.prefix[:24]}-{ext.generation}.sock"
            if len(str(sock)) >= _MAX_SOCKET_PATH:
                raise ExtensionStartError(
                    f"{where}: socket path {sock} is too long for AF_UNIX (use a shorter runtime_dir)",
                    extension=ext.name, manifest=ext.manifest_file,
                )
            for stale in (ext.socket_path, sock):
                if stale is not None:
                    with contextlib.suppress(FileNotFoundError):
                        stale.unlink()
            ext.socket_path = sock
            assert m.command is not None
            command = [sys.executable if c in ("python", "python3") and i == 0 else c for i, c in enumerate(m.command)]
            bridge_target = await self._bridge_target(ext)
            env = self._env(ext, sock, ext.scratch_dir, bridge_target)
            egress = await self._egress.socket_for(m, ext.prefix, self._runtime_dir(), self._sandbox_mode)
            argv, env = self._plan(ext, command, env, ext.scratch_dir, sock.parent,
                                   Path(bridge_target.removeprefix("unix:")) if bridge_target else None, egress)
            proc = await ExtensionProcess.spawn(
                name=ext.name, manifest_file=ext.manifest_file, argv=argv, env=env, cwd=m.working_dir(),
                start_timeout_s=m.timeouts.start_ms / 1000, zygote=self._zygote,
            )
            ext.proc = proc
            self._egress.bound(ext.name, proc.pid)
            if ext.stopping or self._closed:  # unloaded or closed while it was starting
                await proc.terminate(0)
                raise ExtensionStartError(f"{where}: the manager was closed while it started", extension=ext.name,
                                          manifest=ext.manifest_file)
            conn = ExtensionConnection(
                ext.name, proc.target, ext.token,
                on_observation_error=lambda err, e=ext: self._observation_error(e, err),
                on_lost=lambda why, e=ext: self._connection_lost(e, why),
                on_stalled=lambda waited, e=ext: self._observer_stalled(e, waited),
                observe_timeout_s=m.timeouts.hook_ms / 1000,
                coalesce_s=m.observations.max_delay_ms / 1000, bridge=await self._stream_bridge(ext),
            )
        try:
            remaining = max(deadline - loop.time(), 0.5)
            try:
                desc = await conn.open(remaining)
            except grpc.aio.AioRpcError as exc:
                raise ExtensionStartError(
                    f"{where}: Describe failed: {exc.code().name}: {exc.details()}"
                    f"{describe_failure_hint(m, exc.code(), exc.details() or '')}",
                    extension=ext.name, manifest=ext.manifest_file,
                ) from None
            if desc.protocol_version != PROTOCOL_VERSION:
                raise ExtensionStartError(
                    f"{where}: Describe reports protocol version {desc.protocol_version!r}; "
                    f"this host speaks {PROTOCOL_VERSION!r}",
                    extension=ext.name, manifest=ext.manifest_file,
                )
        except BaseException:
            await conn.close()
            if ext.proc is not None:
                await ext.proc.terminate(0.2)
            raise
        if ext.stopping or self._closed:
            await conn.close()
            if ext.proc is not None:
                await ext.proc.terminate(0)
            raise ExtensionStartError(f"{where}: the manager was closed while it started", extension=ext.name,
                                      manifest=ext.manifest_file)
        clashes = self._tool_clashes(ext, desc)
        if clashes and ext.generation == 1:  # at load: refuse (a restart drops the tool instead, in _adopt)
            await conn.close()
            if ext.proc is not None:
                await ext.proc.terminate(0.2)
            raise ToolNameCollision(f"{where}: {collision_message(*clashes[0])}", extension=ext.name,
                                    manifest=ext.manifest_file)
        self._adopt(ext, conn, desc)
        if ext.proc is not None:
            ext.watcher = asyncio.ensure_future(self._watch(ext, ext.proc))

    def _tool_clashes(self, ext: ExtensionRuntime, desc: pb.DescribeResponse) -> list[tuple[str, str, str]]:
        """(name, holder, newcomer) for each tool of `desc` whose exposed name another extension already has."""
        taken = {full: extension_owner(other.name, t.tool) for other in self._exts.values() if other is not ext
                 for full, t in other.tools.items()}
        return extension_collisions({f"{ext.prefix}_{spec.name}": (ext.name, spec.name) for spec in desc.tools}, taken)

    def _adopt(self, ext: ExtensionRuntime, conn: ExtensionConnection, desc: pb.DescribeResponse) -> None:
        ext.describe = desc
        ext.conn = conn
        served = [h for h in desc.hooks if h in HOOK_NAMES]
        unknown = [h for h in desc.hooks if h not in HOOK_NAMES]
        if unknown:
            log.warning("extension %r serves unknown hook(s) %s: ignored", ext.name, unknown)
        for hook in ext.manifest.hooks:
            if hook not in served:
                log.warning(
                    "extension %r: manifest %s has a policy for hook %r, which the extension does not serve",
                    ext.name, ext.manifest_file, hook,
                )
        if desc.name and desc.name != ext.name:
            log.info("extension %r describes itself as %r", ext.name, desc.name)
        ext.hooks = served
        ext.features = list(desc.features)
        tools: dict[str, ExtensionTool] = {}
        clashes = {name: (name, holder, newcomer) for name, holder, newcomer in self._tool_clashes(ext, desc)}
        for spec in desc.tools:
            try:
                schema = json.loads(spec.input_schema_json) if spec.input_schema_json else {"type": "object"}
                if not isinstance(schema, dict):
                    raise ValueError("not an object")
            except ValueError as exc:
                log.warning("extension %r: tool %r has an invalid input schema (%s): skipped", ext.name, spec.name, exc)
                continue
            full = f"{ext.prefix}_{spec.name}"
            if full in clashes:  # only after a restart (a load is refused): the name stays with its holder
                log.error("extension %r (manifest %s): %s: the tool is dropped", ext.name, ext.manifest_file,
                          collision_message(*clashes[full]))
                continue
            tools[full] = ExtensionTool(
                name=full,
                description=f"[{ext.name}] {spec.description}".rstrip(),
                input_schema=schema,
                streaming=spec.streaming,
                extension=ext.name,
                tool=spec.name,
            )
        ext.tools = tools
        ext.state = "running"
        self._changed()
        self._probe_health(ext, conn)

    def _probe_health(self, ext: ExtensionRuntime, conn: ExtensionConnection) -> None:
        """Notice an extension that lives but no longer answers (stopped, starved, deadlocked): restart it."""
        t = ext.manifest.timeouts
        if t.health_interval_ms <= 0 or ext.proc is None:
            return
        ext.health = HealthProbe(
            ext.name, conn.channel, interval_s=t.health_interval_ms / 1000, timeout_s=t.health_timeout_ms / 1000,
            failures=t.health_failures, on_unhealthy=lambda why: self._connection_lost(ext, why),
        )
        ext.health.start()

    @staticmethod
    async def _stop_health(ext: ExtensionRuntime) -> None:
        probe, ext.health = ext.health, None
        if probe is not None:
            await probe.stop()

    def _changed(self) -> None:
        self._sub_cache = {}
        self._tool_index = {
            full: (ext, tool.tool) for ext in self._exts.values() for full, tool in ext.tools.items()
        }

    # -- supervision ---------------------------------------------------------------------------

    async def _watch(self, ext: ExtensionRuntime, proc: ExtensionProcess) -> None:
        code = await proc.wait()
        if ext.stopping or ext.proc is not proc or self._closed or proc.crash_handled:
            return
        proc.crash_handled = True
        await self._crashed(ext, f"exited with code {code}", proc.stderr_tail())

    def _connection_lost(self, ext: ExtensionRuntime, why: str) -> None:
        """The connection of a running extension broke (stream closed or reset, a reply over the size limit)."""
        if ext.stopping or self._closed or ext.state != "running":
            return
        if ext.lost_task is None or ext.lost_task.done():
            ext.lost_task = asyncio.ensure_future(self._lost(ext, ext.conn, why))

    async def _lost(self, ext: ExtensionRuntime, conn: ExtensionConnection | None, why: str) -> None:
        proc = ext.proc
        if proc is not None:  # an exiting process breaks its connection first: let the exit watcher report it
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), 0.5)
            if proc.returncode is not None or proc.crash_handled:
                return
            proc.crash_handled = True
        if ext.conn is not conn or ext.stopping or self._closed:
            return
        # The process lives but can't be talked to: restart it (counted like a crash, so a repeat offender
        # ends in quarantine).
        await self._crashed(ext, f"broke its connection ({why})", proc.stderr_tail() if proc else [])

    async def _crashed(self, ext: ExtensionRuntime, why: str, tail: list[str]) -> None:
        await self._stop_health(ext)
        conn, ext.conn = ext.conn, None
        if conn is not None:
            ext.dropped_base += conn.dropped
            await conn.close()
            self._ledger.add_lost(ext.name, conn.lost)  # reported by each turn's flush
            conn.lost = {}
        if ext.proc is not None:
            await ext.proc.terminate(0)  # reap what is left of the process group
        delay = ext.policy.record_crash()
        tail_text = ("; last stderr lines: " + " | ".join(tail[-5:])) if tail else ""
        if delay is None:
            ext.state = "quarantined"
            self._changed()
            log.error(
                "extension %r %s; quarantined after %d crashes within %gs (restart.maxCrashes)%s",
                ext.name, why, ext.manifest.restart.max_crashes, ext.manifest.restart.window_seconds, tail_text,
            )
            self._trace("lifecycle", ext.name, "error", detail=f"{why}; quarantined")
            return
        ext.state = "restarting"
        self._changed()
        log.warning("extension %r %s; restarting in %.0f ms%s", ext.name, why, delay * 1000, tail_text)
        self._trace("lifecycle", ext.name, "error", detail=f"{why}; restarting")
        ext.restarter = asyncio.ensure_future(self._restart_later(ext, delay))

    async def _restart_later(self, ext: ExtensionRuntime, delay: float) -> None:
        await asyncio.sleep(delay)
        if ext.stopping or self._closed:
            return
        try:
            await self._start(ext)
        except ExtensionStartError as exc:
            ext.proc = None
            await self._crashed(ext, f"failed to restart: {exc}", [])
            return
        ext.restarts += 1
        log.info("extension %r restarted (pid %s)", ext.name, ext.proc.pid if ext.proc else "-")

    # -- unloading and closing -----------------------------------------------------------------

    async def _stop(self, ext: ExtensionRuntime) -> None:
        ext.stopping = True
        await self._stop_health(ext)
        for task in (ext.restarter, ext.watcher, ext.lost_task):
            if task is not None and not task.done() and task is not asyncio.current_task():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        conn, ext.conn = ext.conn, None
        grace = ext.manifest.timeouts.shutdown_ms / 1000
        try:
            if conn is not None:
                if ext.proc is not None and ext.proc.returncode is None:
                    await conn.shutdown_rpc(ext.manifest.timeouts.shutdown_ms, timeout_s=min(max(grace / 2, 0.1), 1.0))
                await conn.close()
        finally:
            if ext.proc is not None:
                await ext.proc.terminate(grace)
            if self._bridge is not None:
                with contextlib.suppress(Exception):
                    self._bridge.unregister_extension(ext.token)
            self._stream_bridges.release(ext.name)
            await self._egress.close(ext.name)
            ext.state = "stopped"

    async def unload(self, name: str) -> bool:
        """Stop and forget an extension. False when no extension of that name is loaded."""
        ext = self._exts.pop(name, None)
        if ext is None:
            return False
        self._unloaded.add(ext.prefix)
        self._changed()
        await asyncio.shield(self._stop(ext))
        await asyncio.shield(self._remove_dirs(ext))
        log.info("unloaded extension %r", name)
        return True

    async def _remove_dirs(self, ext: ExtensionRuntime) -> None:
        """Delete an extension's scratch and socket dirs, off the event loop; logs a failure, never raises."""
        dirs = [d for d in (ext.scratch_dir, ext.socket_path.parent if ext.socket_path else None)
                if d is not None and d != self._runtime]
        for d in dirs:
            await asyncio.to_thread(remove_tree_logged, d, f"a directory of extension {ext.name!r}")

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
        self._closed = True
        exts = list(self._exts.values())
        self._exts.clear()
        self._changed()
        try:
            await asyncio.gather(*(self._stop(ext) for ext in exts), return_exceptions=True)
        finally:
            if self._zygote is not None:
                with contextlib.suppress(Exception):
                    await self._zygote.close()
            if self._bridge is not None:
                with contextlib.suppress(Exception):
                    await self._bridge.stop()
                self._bridge = None
            if self._runtime is not None:
                runtime, self._runtime = self._runtime, None
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(remove_tree_logged, runtime, "the runtime dir")

    # -- introspection -------------------------------------------------------------------------

    def extensions(self) -> list[ExtensionInfo]:
        return [ext.info() for ext in self._exts.values()]

    def tool_names(self) -> list[str]:
        return list(self._tool_index)

    def tools(self) -> list[ExtensionTool]:
        return [tool for ext in self._exts.values() for tool in ext.tools.values()]

    def subscribers(self, hook: str) -> list[str]:
        """Names of the loaded extensions serving `hook`, in load order."""
        return [ext.name for ext in self._exts.values() if hook in ext.hooks]

    def _subs(self, hook: str) -> list[ExtensionRuntime]:
        subs = self._sub_cache.get(hook)
        if subs is None:
            subs = [ext for ext in self._exts.values() if hook in ext.hooks]
            self._sub_cache[hook] = subs
        return subs

    # -- tracing -------------------------------------------------------------------------------

    def add_trace_listener(self, fn: Callable[[TraceEvent], None]) -> None:
        self._listeners.append(fn)

    def remove_trace_listener(self, fn: Callable[[TraceEvent], None]) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(fn)

    def _trace(self, hook: str, ext: str, outcome: str, *, latency_ms: float = 0.0, detail: str = "",
               context: CallContext | None = None) -> None:
        if not self._listeners:
            return
        event = TraceEvent(
            hook=hook, extension=ext, outcome=outcome, latency_ms=latency_ms, detail=detail,  # type: ignore[arg-type]
            request_id=context.request_id if context is not None else "",
        )
        for fn in list(self._listeners):
            try:
                fn(event)
            except Exception:  # noqa: BLE001 - a listener must not break dispatch
                log.exception("trace listener %r failed", fn)

    def _observation_error(self, ext: ExtensionRuntime, err: pb.HookError) -> None:
        hook, text = _bounded(err.hook, 64) or "observation", _bounded(f"{err.name}: {err.message}")
        log.warning("extension %r %s: %s", ext.name, hook, text)
        self._trace(hook, ext.name, "error", detail=text)

    # -- awaited hooks -------------------------------------------------------------------------

    async def _call(self, ext: ExtensionRuntime, hook: str, frame: pb.HostFrame, context: CallContext | None,
                    deadline: float | None = None) -> tuple[pb.ExtensionFrame | None, str, str, float]:
        """(reply or None, outcome, detail, latency ms). Never raises (but CancelledError).

        The wait is the hook's timeoutMs, cut short by `deadline` (event-loop time: the turn's end).
        """
        t0 = time.perf_counter()
        conn = ext.conn
        if conn is None or ext.state != "running":
            return None, "error", f"extension is {ext.state}", 0.0
        timeout = ext.manifest.hook_timeout_s(hook)
        bounded = ""
        if deadline is not None:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                return None, "timeout", "not called: the turn's deadline has passed", 0.0
            if remaining < timeout:
                timeout, bounded = remaining, " (bounded by the turn's remaining time)"
        try:
            with self._egress.during(ext.name, context):
                reply = await conn.call(frame, timeout)
        except TimeoutError:
            ms = (time.perf_counter() - t0) * 1000
            return None, "timeout", f"no reply within {timeout * 1000:.0f} ms{bounded}", ms
        except ExtensionReplyError as exc:
            return None, "error", str(exc), (time.perf_counter() - t0) * 1000
        except ExtensionUnavailableError as exc:
            return None, "error", str(exc), (time.perf_counter() - t0) * 1000
        except grpc.aio.AioRpcError as exc:
            return None, "error", f"RPC failed: {exc.code().name}: {exc.details()}", (time.perf_counter() - t0) * 1000
        expected = frame.WhichOneof("body")
        if reply.WhichOneof("body") != expected:
            return None, "error", f"reply rejected: not a {hook} reply (field body)", (time.perf_counter() - t0) * 1000
        return reply, "ok", "", (time.perf_counter() - t0) * 1000

    async def before_turn(self, snapshot: TurnSnapshot, context: CallContext | None = None, *,
                          deadline: float | None = None) -> MergedTurnPatch:
        """Run beforeTurn on each subscriber in load order and merge the patches (last wins).

        `deadline` (event-loop time, optional): the turn's end; no extension waits past it.
        """
        merged: dict[str, Any] = {}
        provenance: dict[str, str] = {}
        denied: list[TurnConfigDenial] = []
        system = snapshot.system
        tool_names = list(snapshot.tool_names)
        ctx = context_to_proto(context)
        for ext in list(self._subs("beforeTurn")):
            if ext.state != "running":
                self._trace("beforeTurn", ext.name, "skipped", detail=f"extension is {ext.state}", context=context)
                continue
            req = pb.BeforeTurnRequest(context=ctx, snapshot=turn_to_proto(snapshot, system, tool_names))
            reply, outcome, detail, ms = await self._call(ext, "beforeTurn", pb.HostFrame(before_turn=req), context,
                                                          deadline)
            if reply is None:
                self._hook_failed(ext, "beforeTurn", outcome, detail, ms, context)
                continue
            resp = reply.before_turn
            if resp.HasField("error"):
                e = resp.error
                self._hook_failed(ext, "beforeTurn", "error", f"{e.name}: {e.message}", ms, context)
                continue
            problems_text = ""
            values: dict[str, Any] = {}
            refused: list[TurnConfigDenial] = []
            if resp.HasField("config"):
                values, problems = patch_from_proto(resp.config)
                # the trust boundary: only granted fields, only allowlisted request options (issue 10 item 1)
                screened = screen_reply(ext.name, values, problems, ext.manifest.permissions.turn_config,
                                        provider_of(snapshot.model_id))
                values, problems, refused = screened.values, screened.problems, screened.denied
                for p in problems:
                    log.warning("extension %r beforeTurn: invalid field %s: %s (ignored)", ext.name, p.field, p.reason)
                problems_text = "; ".join(f"invalid {p.field}: {p.reason}" for p in problems)
                for key, value in values.items():
                    if key in MAP_FIELDS:
                        res = merge_options(merged.get(key), value, incoming_wins=True,
                                            nested=key == "provider_options", case_insensitive=key == "headers")
                        merged[key] = res.merged
                        for path in res.replaced:
                            provenance.pop(f"{camel(key)}.{path}", None)
                        for path in res.applied:
                            provenance[f"{camel(key)}.{path}"] = ext.name
                    else:
                        merged[key] = value
                        provenance[camel(key)] = ext.name
                if "system" in values:
                    system = values["system"]
                if "active_tools" in values:
                    tool_names = list(values["active_tools"])
            set_text = "set " + ", ".join(camel(k) for k in values) if values else ""
            self._trace("beforeTurn", ext.name, "error" if problems_text else "ok", latency_ms=ms,
                        detail="; ".join(t for t in (set_text, problems_text) if t), context=context)
            for d in refused:
                log.warning("extension %r beforeTurn: field %s: denied: %s", ext.name, d.field, d.reason)
                self._trace("beforeTurn", ext.name, "denied", detail=_bounded(f"{d.field}: {d.reason}"),
                            context=context)
            denied.extend(refused)
        return MergedTurnPatch(patch=TurnPatch.model_construct(**merged), provenance=provenance, denied=denied)

    def _hook_failed(self, ext: ExtensionRuntime, hook: str, outcome: str, detail: str, ms: float,
                     context: CallContext | None) -> None:
        detail = _bounded(detail)
        log.warning("extension %r %s failed (%s): %s", ext.name, hook, outcome, detail)
        self._trace(hook, ext.name, outcome, latency_ms=ms, detail=detail, context=context)

    async def before_tool_call(
        self, snapshot: ToolCallSnapshot, context: CallContext | None = None, *, deadline: float | None = None
    ) -> ExtensionDecision | None:
        """beforeToolCall: an observation for subscribers without `decisions`, awaited on the deciders.

        Deny (block) wins, then the first substitute, then the first allow-with-input (load order).
        `deadline` (event-loop time, optional): the turn's end; no decider waits past it (a fail-closed one
        that could not answer in time blocks).
        """
        subs = self._subs("beforeToolCall")
        if not subs:
            return None
        snap = tool_call_to_proto(snapshot)
        deciders = [ext for ext in subs if ext.deciders]
        observers = [ext for ext in subs if not ext.deciders]
        if observers:
            self._broadcast(observers, pb.Observation(before_tool_call=snap), context, False)
        if not deciders:
            return None
        ctx = context_to_proto(context)
        results = await asyncio.gather(*(self._decide(ext, ctx, snap, context, deadline) for ext in deciders))
        for wanted in ("block", "substitute", "allow"):
            for decision in results:
                if decision is not None and decision.action == wanted:
                    return decision
        return None

    async def _decide(self, ext: ExtensionRuntime, ctx: pb.CallContext, snap: pb.ToolCallSnapshot,
                      context: CallContext | None, deadline: float | None) -> ExtensionDecision | None:
        hook = "beforeToolCall"
        frame = pb.HostFrame(before_tool_call=pb.BeforeToolCallRequest(context=ctx, snapshot=snap, want_decision=True))
        reply, outcome, detail, ms = await self._call(ext, hook, frame, context, deadline)
        if reply is not None and reply.before_tool_call.HasField("error"):
            e = reply.before_tool_call.error
            reply, outcome, detail = None, "error", f"{e.name}: {e.message}"
        if reply is None:
            return self._decider_failed(ext, snap.tool_name, outcome, detail, ms, context)
        resp = reply.before_tool_call
        if not resp.HasField("decision"):
            self._trace(hook, ext.name, "ok", latency_ms=ms, context=context)
            return None
        action, fields, problems = decision_from_proto(resp.decision)
        for p in problems:
            log.warning("extension %r beforeToolCall: invalid decision field %s: %s (ignored)", ext.name, p.field, p.reason)
        serious = [p for p in problems if p.field in ("action", "input", "output")]
        if serious and action in (None, "allow") and "input" not in fields:
            return self._decider_failed(ext, snap.tool_name, "error", "; ".join(str(p) for p in serious), ms, context)
        if action == "block":
            self._trace(hook, ext.name, "denied", latency_ms=ms, detail=fields.get("reason", ""), context=context)
            return ExtensionDecision(action="block", reason=fields.get("reason") or f"blocked by extension {ext.name!r}",
                                     extension=ext.name)
        if action == "substitute":
            output, detail = bounded_substitute(ext.manifest, resp.decision.output_json, fields["output"])
            self._trace(hook, ext.name, "ok", latency_ms=ms, detail=detail, context=context)
            return ExtensionDecision(action="substitute", output=output, reason=fields.get("reason"),
                                     extension=ext.name)
        self._trace(hook, ext.name, "ok", latency_ms=ms, context=context)
        if action == "allow" and "input" in fields:
            return ExtensionDecision(action="allow", input=fields["input"], has_input=True, extension=ext.name)
        return None

    def _decider_failed(self, ext: ExtensionRuntime, tool: str, outcome: str, detail: str, ms: float,
                        context: CallContext | None) -> ExtensionDecision | None:
        hook = "beforeToolCall"
        if ext.manifest.hook_policy(hook).failure == "closed":
            reason = (f"tool call {tool!r} blocked: extension {ext.name!r} failed its beforeToolCall hook "
                      f"({outcome}: {detail}) and its policy is failure: closed")
            log.warning("%s", reason)
            self._trace(hook, ext.name, "failed_closed", latency_ms=ms, detail=detail, context=context)
            return ExtensionDecision(action="block", reason=reason, extension=ext.name, failed_closed=True)
        log.warning("extension %r beforeToolCall failed (%s): %s; failing open", ext.name, outcome, detail)
        self._trace(hook, ext.name, "failed_open", latency_ms=ms, detail=f"{outcome}: {detail}", context=context)
        return None

    # -- observations --------------------------------------------------------------------------

    def after_tool_call(self, snapshot: ToolResultSnapshot, context: CallContext | None = None) -> None:
        if subs := self._subs("afterToolCall"):
            self._broadcast(subs, pb.Observation(after_tool_call=tool_result_to_proto(snapshot)), context, False)

    def on_step_finish(self, snapshot: StepSnapshot, context: CallContext | None = None) -> None:
        if subs := self._subs("onStepFinish"):
            self._broadcast(subs, pb.Observation(step_finish=step_to_proto(snapshot)), context, False)

    def on_chunk(self, snapshot: ChunkSnapshot, context: CallContext | None = None) -> None:
        if subs := self._subs("onChunk"):
            self._broadcast(subs, chunk_to_observation(snapshot), context, True)

    def _broadcast(self, subs: list[ExtensionRuntime], obs: pb.Observation, context: CallContext | None,
                   is_chunk: bool) -> None:
        """Enqueue one observation on every subscriber's connection (never blocks; the per-chunk path).

        It is serialized once for all of them, and so is its context (kept while the context stays the same).
        """
        if context is not self._ctx_of_record:
            key = None if context is None else (context.session_id, context.request_id)
            if key != self._ctx_record_key:
                self._ctx_record_key = key
                self._ctx_record = context_field(context_to_proto(context))
                self._ledger.note_context(self._ctx_record, context)
            self._ctx_of_record = context
        ctx = self._ctx_record
        item = observation_item(obs)
        ledger = self._ledger
        if ledger.any_detached:  # a stalled observer is detached for the rest of the turn (counted)
            subs = [ext for ext in subs if not ledger.skip(ext.name, ctx)]
        for ext in subs:
            conn = ext.conn
            if conn is not None:
                conn.observe(ctx, item, is_chunk)
            else:  # restarting (or quarantined): counted, reported by the turn's flush
                ledger.add_lost(ext.name, {ctx: 1})

    def send_observations(self) -> None:
        """Start delivering every queued observation now, without waiting (a later `flush()` waits for the acks).

        The agent calls this when a turn's last step is done, so the extensions handle the turn's last
        observations while the host persists the assistant message.
        """
        for ext in self._exts.values():
            if ext.conn is not None:
                ext.conn.request_flush()

    async def flush(self, context: CallContext | None = None) -> None:
        """Wait until every extension handled the observations enqueued so far (bounded by hook deadlines).

        The end of the turn `context`: an observer detached from it (stalled) is not waited for, and the
        observations of the turn a broken connection lost are reported (host/_observer_ledger.py)."""
        record = context_field(context_to_proto(context))
        waits = []
        for ext in self._exts.values():
            skipped, lost = self._ledger.end_turn(ext.name, record)
            if lost:
                self._report_lost(ext, lost, context)
            if skipped is not None:
                if skipped:
                    self._trace("observe", ext.name, "skipped", context=context,
                                detail=f"{skipped} later observation(s) of this turn not sent (detached: stalled)")
                continue
            conn = ext.conn
            if conn is not None:
                waits.append(self._flush_one(ext, conn, context, record))
        self._ledger.forget(record)
        if waits:
            await asyncio.gather(*waits)

    def _report_lost(self, ext: ExtensionRuntime, lost: int, context: CallContext | None) -> None:
        detail = (f"{lost} observation(s) of this turn lost: its connection broke before they were handled, "
                  "or it was not running")
        log.warning("extension %r: %s", ext.name, detail)
        self._trace("observe", ext.name, "failed_open", detail=detail, context=context)

    def _observer_stalled(self, ext: ExtensionRuntime, waited_s: float) -> None:
        """The connection saw no acknowledgement for timeouts.hookMs: detach the observer from the turns waiting."""
        conn = ext.conn
        if conn is None:
            return
        ms = ext.manifest.timeouts.hook_ms
        for record in conn.pending_contexts():
            if self._ledger.active(record) and self._ledger.detach(ext.name, record):
                self._trace("observe", ext.name, "failed_open", context=self._ledger.context(record),
                            detail=f"stalled: observations not acknowledged within {ms} ms (timeouts.hookMs); "
                                   "detached for the rest of this turn")

    async def _flush_one(self, ext: ExtensionRuntime, conn: ExtensionConnection, context: CallContext | None,
                         record: bytes) -> None:
        timeout = ext.manifest.timeouts.hook_ms / 1000
        sent, dropped = conn.enqueued, conn.dropped
        last_sent, last_dropped = self._flush_marks.get(ext.name, (0, 0))
        t0 = time.perf_counter()
        outcome = await conn.flush_outcome(timeout)
        if outcome == "lost":
            lost = conn.lost.pop(record, 0) + self._ledger.end_turn(ext.name, record)[1]
            if lost:
                self._report_lost(ext, lost, context)
            return
        if outcome != "ok":
            ms = (time.perf_counter() - t0) * 1000
            why = (f"stalled: observations not acknowledged within {timeout * 1000:.0f} ms (timeouts.hookMs)"
                   if outcome == "stalled" else f"observations not acknowledged within {timeout * 1000:.0f} ms")
            log.warning("extension %r: %s; the turn goes on without it", ext.name, why)
            self._trace("observe", ext.name, "failed_open", latency_ms=ms, detail=why, context=context)
            return
        self._flush_marks[ext.name] = (sent, dropped)
        if sent > last_sent:
            detail = f"{sent - last_sent} observation(s) delivered in order"
            if dropped > last_dropped:
                detail += f", {dropped - last_dropped} oldest onChunk dropped (extension too slow)"
            self._trace("observe", ext.name, "ok", latency_ms=(time.perf_counter() - t0) * 1000, detail=detail,
                        context=context)

    # -- tools ---------------------------------------------------------------------------------

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
        entry = self._tool_index.get(name)
        if entry is None:
            for prefix in self._unloaded:
                if name.startswith(prefix + "_"):
                    raise ExtensionUnloadedError(
                        f"tool {name!r}: its extension ({prefix}) has been unloaded", extension=prefix
                    )
            raise ExtensionToolError(f"no extension tool named {name!r}")
        ext, tool = entry
        conn = ext.conn
        if conn is None or ext.state != "running":
            raise ExtensionUnavailableError(
                f"tool {name!r}: extension {ext.name!r} is {ext.state}", extension=ext.name
            )
        input_json, oversize = json_size_error(input)
        if oversize is not None:
            raise ExtensionToolError(
                f"tool {name!r}: its input is {oversize} bytes of JSON, over the {MAX_JSON_CHARS} byte limit",
                extension=ext.name,
            )
        req = pb.ExecuteToolRequest(
            context=context_to_proto(context), name=tool, input_json=input_json, tool_call_id=tool_call_id
        )
        t0 = time.perf_counter()
        timeout = ext.manifest.timeouts.tool_ms / 1000
        bounds = tool_reply_bounds(ext.manifest)
        try:
            with self._egress.during(ext.name, context):
                result = await conn.execute_tool(req, timeout, on_preliminary, bounds)
        except ExtensionToolError as exc:
            self._trace(f"tool:{tool}", ext.name, "error", latency_ms=(time.perf_counter() - t0) * 1000,
                        detail=str(exc), context=context)
            raise
        except TimeoutError:  # a tool call on the Connect stream (connect-tools) ran out of time
            self._trace(f"tool:{tool}", ext.name, "timeout", latency_ms=(time.perf_counter() - t0) * 1000,
                        detail=f"no output within {timeout * 1000:.0f} ms", context=context)
            raise ExtensionToolError(
                f"tool {name!r} of extension {ext.name!r} timed out after {timeout * 1000:.0f} ms", extension=ext.name
            ) from None
        except ExtensionReplyError as exc:  # connect-tools: a reply frame was rejected
            self._trace(f"tool:{tool}", ext.name, "error", latency_ms=(time.perf_counter() - t0) * 1000,
                        detail=str(exc), context=context)
            raise ExtensionToolError(f"tool {name!r} of extension {ext.name!r} failed: {exc}", extension=ext.name) from None
        except ExtensionUnavailableError:  # connect-tools: the stream broke or was closed during the call
            raise self._went_away(ext, name, tool, t0, context) from None
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the caller was cancelled
            # grpc cancels calls on a channel closed under them: the extension crashed or was unloaded.
            raise self._went_away(ext, name, tool, t0, context) from None
        except grpc.aio.AioRpcError as exc:
            ms = (time.perf_counter() - t0) * 1000
            self._trace(f"tool:{tool}", ext.name, "error", latency_ms=ms, detail=str(exc.details()), context=context)
            if self._exts.get(ext.name) is not ext:
                raise ExtensionUnloadedError(
                    f"tool {name!r}: extension {ext.name!r} has been unloaded", extension=ext.name
                ) from None
            code = exc.code()
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise ExtensionToolError(
                    f"tool {name!r} of extension {ext.name!r} timed out after {timeout * 1000:.0f} ms",
                    extension=ext.name,
                ) from None
            if code == grpc.StatusCode.UNAVAILABLE or ext.state != "running" or (
                ext.state != "running" or ext.conn is not conn or (ext.proc is not None and ext.proc.returncode is not None)
            ):
                raise ExtensionUnavailableError(
                    f"tool {name!r}: extension {ext.name!r} went away during the call", extension=ext.name
                ) from None
            raise ExtensionToolError(
                f"tool {name!r} of extension {ext.name!r} failed: {code.name}: {exc.details()}", extension=ext.name
            ) from None
        bounded = bounds.summary()
        if bounded:
            log.warning("extension %r tool %r: %s", ext.name, tool, bounded)
        self._trace(f"tool:{tool}", ext.name, "ok", latency_ms=(time.perf_counter() - t0) * 1000, detail=bounded,
                    context=context)
        return result

    # -- sessions (HostBridge) -----------------------------------------------------------------

    def _went_away(self, ext: ExtensionRuntime, name: str, tool: str, t0: float,
                   context: CallContext | None) -> ExtensionError:
        """The error for a tool call whose extension's connection closed under it (unloaded, or crashed)."""
        self._trace(f"tool:{tool}", ext.name, "error", latency_ms=(time.perf_counter() - t0) * 1000,
                    detail="connection closed during the call", context=context)
        if self._exts.get(ext.name) is not ext:
            return ExtensionUnloadedError(f"tool {name!r}: extension {ext.name!r} has been unloaded", extension=ext.name)
        return ExtensionUnavailableError(
            f"tool {name!r}: extension {ext.name!r} went away during the call", extension=ext.name
        )

    def register_session(self, session_id: str, services: SessionServices) -> None:
        self._sessions[session_id] = services
        if self._bridge is not None:
            self._bridge.register_session(session_id, services)

    def unregister_session(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
        if self._bridge is not None:
            self._bridge.unregister_session(session_id)
