"""The HostBridge of one manager: started on first need, it serves the sessions the host registers.

An extension granted any bridge permission gets `HOOKWIRE_HOST_ADDRESS` (this server's Unix socket) and its
token is registered with its manifest, so every bridge call is checked against that manifest's grants
(host/extensions/_bridge_server.py); its Connect stream offers the same calls as frames (`stream_answerer`), which is
how a remote extension reaches the bridge with the host listening nowhere. Sessions registered before the server starts are handed to it when it does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ._bridge_server import HostBridgeServer
from ._snapshots import SessionServices
from ._state import ExtensionRuntime
from ._stream_bridge import StreamBridges


class BridgeSessions:
    """The lazily started HostBridgeServer, and the sessions it serves."""

    def __init__(self, socket_path: Callable[[], Path]) -> None:
        self._socket_path = socket_path
        self._server: HostBridgeServer | None = None
        self._lock = asyncio.Lock()
        self._sessions: dict[str, SessionServices] = {}
        self._streams = StreamBridges()  # HostBridge calls riding the extensions' Connect streams

    def _ensure_server(self) -> HostBridgeServer:
        """The HostBridge server, created (with the sessions registered so far) on first need; not yet listening."""
        if self._server is None:
            server = HostBridgeServer(self._socket_path())
            for sid, services in self._sessions.items():
                server.register_session(sid, services)
            self._server = server
        return self._server

    async def target_for(self, ext: ExtensionRuntime) -> str | None:
        """The bridge's Unix socket for `ext` (its token registered), or None when its manifest grants no bridge call."""
        if not ext.manifest.permissions.grants_bridge():
            return None
        async with self._lock:
            server = self._ensure_server()
            await server.start()  # listens from the first local extension granted a bridge call on
            server.register_extension(ext.token, ext.manifest)
            return str(server.target)

    async def stream_answerer(self, ext: ExtensionRuntime) -> Callable[[Any], Awaitable[Any]] | None:
        """What answers HostBridge calls riding `ext`'s Connect stream (host/extensions/_stream_bridge.py), or None
        when its manifest grants no bridge call. Needs no listening socket: a remote extension gets it too."""
        if not ext.manifest.permissions.grants_bridge():
            return None
        async with self._lock:
            return self._streams.open(self._ensure_server(), ext.name, ext.manifest).answer

    def forget(self, ext: ExtensionRuntime) -> None:
        """`ext` stopped: its token no longer opens the bridge, nor its stream."""
        if self._server is not None:
            with contextlib.suppress(Exception):
                self._server.unregister_extension(ext.token)
        self._streams.release(ext.name)

    def register_session(self, session_id: str, services: SessionServices) -> None:
        self._sessions[session_id] = services
        if self._server is not None:
            self._server.register_session(session_id, services)

    def unregister_session(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
        if self._server is not None:
            self._server.unregister_session(session_id)

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            with contextlib.suppress(Exception):
                await server.stop()
