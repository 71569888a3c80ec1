"""The HostBridge of one manager: started on first need, it serves the sessions the host registers.

An extension granted any bridge permission gets `HOOKWIRE_HOST_ADDRESS` (this server's Unix socket) and its
token is registered with its manifest, so every bridge call is checked against that manifest's grants
(host/extensions/_bridge_server.py). Sessions registered before the server starts are handed to it when it does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

from ._bridge_server import HostBridgeServer
from ._snapshots import SessionServices
from ._state import ExtensionRuntime


class BridgeSessions:
    """The lazily started HostBridgeServer, and the sessions it serves."""

    def __init__(self, socket_path: Callable[[], Path]) -> None:
        self._socket_path = socket_path
        self._server: HostBridgeServer | None = None
        self._lock = asyncio.Lock()
        self._sessions: dict[str, SessionServices] = {}

    async def target_for(self, ext: ExtensionRuntime) -> str | None:
        """The bridge address for `ext` (its token registered), or None when its manifest grants no bridge call."""
        if not ext.manifest.permissions.grants_bridge():
            return None
        async with self._lock:
            if self._server is None:
                server = HostBridgeServer(self._socket_path())
                await server.start()
                self._server = server
                for sid, services in self._sessions.items():
                    server.register_session(sid, services)
            self._server.register_extension(ext.token, ext.manifest)
            return str(self._server.target)

    def forget(self, ext: ExtensionRuntime) -> None:
        """`ext` stopped: its token no longer opens the bridge."""
        if self._server is not None:
            with contextlib.suppress(Exception):
                self._server.unregister_extension(ext.token)

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
