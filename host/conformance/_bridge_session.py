"""A real HostBridge for the extension under test, with one stand-in session the kit's calls name.

An extension granted bridge permissions gets `HOOKWIRE_HOST_ADDRESS` as under a host, so its handlers run as they
would in a turn (a handler that needs the bridge does not fail for want of one). The session has a private
temporary workspace, one user message, an in-memory context store and no model behind it.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from ..extensions._bridge_server import HostBridgeServer
from ._wire import SESSION_ID


class KitSession:
    """`SessionServices` for the kit's session: what the HostBridge serves to the extension."""

    def __init__(self, workspace: Path) -> None:
        self._workspace = workspace
        self._messages: list[dict[str, Any]] = [{"id": "kit-m1", "role": "user", "content": "What is the weather?"}]
        self._context: dict[str, str] = {}
        self._ids = itertools.count(2)

    @property
    def workspace_root(self) -> Path:
        return self._workspace

    async def bridge_get_messages(self, limit: int) -> list[dict[str, Any]]:
        return self._messages[-limit:] if limit else list(self._messages)

    async def bridge_get_context(self, label: str) -> str | None:
        return self._context.get(label)

    async def bridge_set_context(self, label: str, content: str, *, extension: str) -> None:
        self._context[label] = content

    async def bridge_send_message(self, text: str, role: str) -> str:
        message_id = f"kit-m{next(self._ids)}"
        self._messages.append({"id": message_id, "role": role or "user", "content": text})
        return message_id

    async def bridge_session_info(self) -> dict[str, Any]:
        return {"sessionId": SESSION_ID, "messageCount": len(self._messages), "modelId": "hookwire/scripted",
                "metadata": {"agent": "hookwire ext test"}}


async def start_bridge(workdir: Path) -> HostBridgeServer:
    """A HostBridge on `workdir`/bridge.sock serving the kit's session (register each process's token on it)."""
    workspace = workdir / "workspace"
    workspace.mkdir(mode=0o700)
    bridge = HostBridgeServer(workdir / "bridge.sock")
    await bridge.start()
    bridge.register_session(SESSION_ID, KitSession(workspace))
    return bridge
