"""Launching one extension: from a manifest to a connection that serves, and back to nothing.

`start` (also a restart): a private runtime dir (0700) holds each generation's socket in a fresh subdir and the
extension's scratch dir; the environment is scrubbed to PATH/LANG/LC_ALL/TZ, the manifest's `env` names and the
HOOKWIRE_* contract variables; the sandbox plan (host/sandbox/_plan.py) wraps the command; the process is
spawned (or forked by the zygote) and handshakes; or, for an `endpoint` manifest, the remote address is dialled.
Then Describe: the protocol version must match, and the served hooks and namespaced tools are adopted. A tool
name another extension holds refuses the load (a restart drops the tool instead).

`stop` is its counterpart: Shutdown within the grace, SIGTERM then SIGKILL of the process group, the bridge
token and the egress proxy released.
"""

from __future__ import annotations

import asyncio
# asyncio.to_thread's default executor: imported with this module, not by load_all's first to_thread
# (host/_cli_cold.py: once host.extensions is imported, load_all imports nothing)
import concurrent.futures.thread  # noqa: F401
import contextlib
import json
import logging
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import grpc

from extension_sdk.proto import HOOK_NAMES, MAGIC_COOKIE, PROTOCOL_VERSION
from extension_sdk.proto import extension_pb2 as pb

from .._errors import ExtensionStartError, SandboxUnavailable, ToolNameCollision
from ..sandbox import _plan as sandbox_plan
from ..sandbox._egress_hosting import EgressProxies
from ..sandbox._fs_cleanup import remove_tree_logged
from ..sandbox._plan import SandboxMode
from ..sandbox._zygote import Zygote
from . import _call_tags as call_tags
from ._endpoint_tls import describe_failure_hint, endpoint_channel
from ._extension_client import ExtensionConnection
from ._grants import grants_to_proto
from ._process import ExtensionProcess
from ._registry import Registry
from ._runtime_dirs import RuntimeDir, reap_abandoned
from ._sessions import BridgeSessions
from ._state import ExtensionRuntime, ExtensionTool
from ._tool_names import collision_message, extension_collisions, extension_owner

log = logging.getLogger("hookwire.extensions")

PASSTHROUGH_ENV = ("PATH", "LANG", "LC_ALL", "TZ")
_MAX_SOCKET_PATH = 100


class Launcher:
    """Starts and stops extension processes (or dials endpoints) for one manager, in its runtime dir."""

    def __init__(self, registry: Registry, *, sandbox: SandboxMode, runtime_parent: Path | None,
                 zygote: Zygote | None, egress: EgressProxies,
                 on_observation_error: Callable[[ExtensionRuntime, pb.HookError, bytes | None], None],
                 on_lost: Callable[[ExtensionRuntime, str], None],
                 on_stalled: Callable[[ExtensionRuntime, float], None]) -> None:
        self._registry = registry
        self._sandbox_mode: SandboxMode = sandbox
        self._runtime_parent = runtime_parent
        self._runtime: Path | None = None
        self._runtime_lock: RuntimeDir | None = None
        self._reaped = False  # the dirs of dead hosts beside ours: looked for once, at the first start
        self.zygote = zygote
        self._egress = egress
        self.bridge = BridgeSessions(lambda: self.runtime_dir() / "bridge.sock")
        self._private: list[Path] = []  # host-private paths hidden from every extension (protect_paths)
        self._on_observation_error = on_observation_error
        self._on_lost = on_lost
        self._on_stalled = on_stalled

    # -- the runtime dir and what each extension may see ------------------------------------------------

    def runtime_dir(self) -> Path:
        if self._runtime is None:
            parent = str(self._runtime_parent) if self._runtime_parent is not None else None
            if parent is None and len(tempfile.gettempdir()) > 40:
                parent = "/tmp"
            self._runtime_lock = RuntimeDir.create(parent)
            self._runtime = self._runtime_lock.path
        return self._runtime

    def protect_paths(self, paths: Sequence[str | Path]) -> None:
        for p in paths:
            resolved = Path(p).resolve()
            if resolved not in self._private:
                self._private.append(resolved)

    def _hidden_from(self, ext: ExtensionRuntime) -> list[Path]:
        """What `ext` must not see: the protected paths and every other extension's files and dirs."""
        hidden = list(self._private)
        for other in self._registry.exts.values():
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
        if old is not None and old != self.runtime_dir():
            remove_tree_logged(old, f"the old socket dir of extension {ext.name!r}")
        sub = Path(tempfile.mkdtemp(prefix="s", dir=self.runtime_dir()))
        os.chmod(sub, 0o700)
        return sub

    def _env(self, ext: ExtensionRuntime, socket_path: Path, scratch: Path, bridge_target: str | None) -> dict[str, str]:
        env = {k: os.environ[k] for k in PASSTHROUGH_ENV if k in os.environ}
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

    def _sandboxed(self, ext: ExtensionRuntime, command: list[str], env: dict[str, str], scratch: Path,
                   socket_dir: Path, bridge_socket: Path | None,
                   egress_socket: Path | None) -> tuple[list[str], dict[str, str]]:
        """The launch argv/env through the sandbox plan; records the layers enforced and missing."""
        try:
            plan = sandbox_plan.plan_launch(
                ext.manifest, command=command, env=env, scratch_dir=scratch, runtime_dir=self.runtime_dir(),
                mode=self._sandbox_mode, socket_dir=socket_dir, cwd=ext.manifest.working_dir(),
                private_paths=self._hidden_from(ext), sockets=[bridge_socket] if bridge_socket else [],
                egress=sandbox_plan.EgressSpec(port=sandbox_plan.EGRESS_PORT, socket=str(egress_socket))
                if egress_socket else None,
            )
        except SandboxUnavailable as exc:
            raise ExtensionStartError(
                f"extension {ext.name!r} (manifest {ext.manifest_file}): {exc}",
                extension=ext.name, manifest=ext.manifest_file,
            ) from None
        ext.enforced, ext.missing = list(plan.enforced), list(plan.missing)
        ext.cgroups = plan.cgroups
        return list(plan.argv), dict(plan.env)

    # -- start and stop ---------------------------------------------------------------------------------------

    async def _connection(self, ext: ExtensionRuntime, target: str, credentials: grpc.ChannelCredentials | None = None,
                          channel_options: list[tuple[str, Any]] | None = None) -> ExtensionConnection:
        m = ext.manifest
        return ExtensionConnection(
            ext.name, target, ext.token, credentials=credentials, channel_options=channel_options,
            bridge=await self.bridge.stream_answerer(ext),
            on_observation_error=lambda err, record, e=ext: self._on_observation_error(e, err, record),
            on_lost=lambda why, e=ext: self._on_lost(e, why),
            on_stalled=lambda waited, e=ext: self._on_stalled(e, waited),
            observe_timeout_s=m.timeouts.hook_ms / 1000,
            coalesce_s=m.observations.max_delay_ms / 1000,
        )

    def _fresh_paths(self, ext: ExtensionRuntime, runtime: Path, where: str) -> tuple[Path, Path]:
        """The scratch dir and this generation's socket path (blocking filesystem work: run off the event loop, where
        removing a restarted extension's old socket dir stalled every session for 150+ ms on a busy disk). The first
        call also removes the runtime dirs that SIGKILLed hosts left beside ours (host/extensions/_runtime_dirs.py)."""
        if not self._reaped:
            self._reaped = True
            reap_abandoned(runtime.parent, runtime)
        scratch = ext.scratch_dir
        if scratch is None:
            scratch_root = runtime / "scratch"
            scratch_root.mkdir(mode=0o700, exist_ok=True)
            scratch = Path(tempfile.mkdtemp(prefix=f"{ext.prefix[:24]}-", dir=scratch_root))
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
        return scratch, sock

    async def _spawn(self, ext: ExtensionRuntime, where: str) -> ExtensionConnection:
        m = ext.manifest
        runtime = self.runtime_dir()
        ext.scratch_dir, sock = await asyncio.to_thread(self._fresh_paths, ext, runtime, where)
        ext.socket_path = sock
        assert m.command is not None
        command = [sys.executable if c in ("python", "python3") and i == 0 else c for i, c in enumerate(m.command)]
        bridge_target = await self.bridge.target_for(ext)
        env = self._env(ext, sock, ext.scratch_dir, bridge_target)
        egress = await self._egress.socket_for(m, ext.prefix, runtime, self._sandbox_mode)
        argv, env = self._sandboxed(ext, command, env, ext.scratch_dir, sock.parent,
                                    Path(bridge_target.removeprefix("unix:")) if bridge_target else None, egress)
        proc = await ExtensionProcess.spawn(
            name=ext.name, manifest_file=ext.manifest_file, argv=argv, env=env, cwd=m.working_dir(),
            start_timeout_s=m.timeouts.start_ms / 1000, zygote=self.zygote, cgroups=ext.cgroups,
        )
        ext.proc = proc
        self._egress.bound(ext.name, proc.pid)
        if ext.stopping or self._registry.closed:  # unloaded or closed while it was starting
            await proc.terminate(0)
            raise ExtensionStartError(f"{where}: the manager was closed while it started", extension=ext.name,
                                      manifest=ext.manifest_file)
        return await self._connection(ext, proc.target)

    async def start(self, ext: ExtensionRuntime) -> None:
        """Start (or restart) one extension: spawn or dial, handshake, connect, Describe, adopt."""
        m = ext.manifest
        where = f"extension {ext.name!r} (manifest {ext.manifest_file})"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + m.timeouts.start_ms / 1000
        ext.generation += 1
        # spawn to Describe: the zygote refills no spares meanwhile (their CPU would slow this start down)
        with self.zygote.busy() if self.zygote is not None and m.endpoint is None else contextlib.nullcontext():
            if m.endpoint is not None:
                credentials, channel_options = endpoint_channel(m, ext.manifest_file)
                conn = await self._connection(ext, m.endpoint, credentials, channel_options)
            else:
                conn = await self._spawn(ext, where)
            try:
                desc = await self._describe(ext, conn, where, max(deadline - loop.time(), 0.5))
            except BaseException:
                await self._abandon(ext, conn, 0.2)
                raise
        if ext.stopping or self._registry.closed:
            await self._abandon(ext, conn, 0)
            raise ExtensionStartError(f"{where}: the manager was closed while it started", extension=ext.name,
                                      manifest=ext.manifest_file)
        clashes = self._tool_clashes(ext, desc)
        if clashes and ext.generation == 1:  # at load: refuse (a restart drops the tool instead, in _adopt)
            await self._abandon(ext, conn, 0.2)
            raise ToolNameCollision(f"{where}: {collision_message(*clashes[0])}", extension=ext.name,
                                    manifest=ext.manifest_file)
        self._adopt(ext, conn, desc)

    @staticmethod
    async def _describe(ext: ExtensionRuntime, conn: ExtensionConnection, where: str,
                        timeout: float) -> pb.DescribeResponse:
        """Open the connection (Describe); the protocol version must be this host's."""
        try:
            desc = await conn.open(timeout, grants_to_proto(ext.manifest))
        except grpc.aio.AioRpcError as exc:
            raise ExtensionStartError(
                f"{where}: Describe failed: {exc.code().name}: {exc.details()}"
                f"{describe_failure_hint(ext.manifest, exc.code(), exc.details() or '')}",
                extension=ext.name, manifest=ext.manifest_file,
            ) from None
        if desc.protocol_version != PROTOCOL_VERSION:
            raise ExtensionStartError(
                f"{where}: Describe reports protocol version {desc.protocol_version!r}; "
                f"this host speaks {PROTOCOL_VERSION!r}",
                extension=ext.name, manifest=ext.manifest_file,
            )
        return desc

    @staticmethod
    async def _abandon(ext: ExtensionRuntime, conn: ExtensionConnection, grace: float) -> None:
        """A start that will not complete: close its connection, end its process."""
        await conn.close()
        if ext.proc is not None:
            await ext.proc.terminate(grace)

    def _tool_clashes(self, ext: ExtensionRuntime, desc: pb.DescribeResponse) -> list[tuple[str, str, str]]:
        """(name, holder, newcomer) for each tool of `desc` whose exposed name another extension already has."""
        taken = {full: extension_owner(other.name, t.tool) for other in self._registry.exts.values()
                 if other is not ext for full, t in other.tools.items()}
        return extension_collisions({f"{ext.prefix}_{spec.name}": (ext.name, spec.name) for spec in desc.tools}, taken)

    def _adopt(self, ext: ExtensionRuntime, conn: ExtensionConnection, desc: pb.DescribeResponse) -> None:
        """Take what Describe says: served hooks, features, namespaced tools with valid schemas. Then: running."""
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
        self._registry.changed()

    async def stop(self, ext: ExtensionRuntime) -> None:
        """Shutdown (within timeouts.shutdownMs), then SIGTERM/SIGKILL its process group; release its grants."""
        conn, ext.conn = ext.conn, None
        grace = ext.manifest.timeouts.shutdown_ms / 1000
        call_tags.stopping(ext.proc)  # its last lines are its own, not the last call's
        try:
            if conn is not None:
                if ext.proc is not None and ext.proc.returncode is None:
                    await conn.shutdown_rpc(ext.manifest.timeouts.shutdown_ms, timeout_s=min(max(grace / 2, 0.1), 1.0))
                await conn.close()
        finally:
            if ext.proc is not None:
                await ext.proc.terminate(grace)
            self.bridge.forget(ext)
            await self._egress.close(ext.name)
            ext.state = "stopped"

    async def remove_dirs(self, ext: ExtensionRuntime) -> None:
        """Delete an extension's scratch and socket dirs, off the event loop; logs a failure, never raises."""
        dirs = [d for d in (ext.scratch_dir, ext.socket_path.parent if ext.socket_path else None)
                if d is not None and d != self._runtime]
        for d in dirs:
            await asyncio.to_thread(remove_tree_logged, d, f"a directory of extension {ext.name!r}")

    async def close(self) -> None:
        """After every extension stopped: the zygote, the HostBridge, the runtime dir."""
        if self.zygote is not None:
            with contextlib.suppress(Exception):
                await self.zygote.close()
        await self.bridge.close()
        if self._runtime is not None:
            runtime, self._runtime = self._runtime, None
            with contextlib.suppress(Exception):
                await asyncio.to_thread(remove_tree_logged, runtime, "the runtime dir")
        if self._runtime_lock is not None:
            lock, self._runtime_lock = self._runtime_lock, None
            lock.release()
