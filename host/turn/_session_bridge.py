"""What an extension may ask the host about one session, over the HostBridge: the Agent's side of it.

The HostBridge server (host/extensions/_bridge_server.py) checks each call against the extension's manifest,
then calls these `SessionServices` (host/extensions/_snapshots.py). They live here, not on `Agent`, so the
class users subclass carries only the hooks and the API they call.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._session import maybe_await
from ._ui_messages import for_bridge, normalize_incoming

if TYPE_CHECKING:
    from ._agent import Agent

logger = logging.getLogger("hookwire.agent")


class AgentSessionServices:
    """The HostBridge services of one Agent's session (registered with its ExtensionManager)."""

    def __init__(self, agent: Agent) -> None:
        self._agent = agent

    @property
    def workspace_root(self) -> Path | None:
        return self._agent.workspace_root

    async def bridge_get_messages(self, limit: int) -> list[dict[str, Any]]:
        messages = await self._agent.messages()
        if limit:
            messages = messages[-limit:]
        return [for_bridge(m) for m in messages]

    async def bridge_get_context(self, label: str) -> str | None:
        return await self._agent.get_context(label)

    async def bridge_set_context(self, label: str, content: str, *, extension: str) -> None:
        logger.info("extension %s set context block %r (session %s)", extension, label, self._agent.session_id)
        await self._agent.set_context(label, content)

    async def bridge_send_message(self, text: str, role: str) -> str:
        message = normalize_incoming({"role": role or "user", "content": text})
        self._agent._append_for_next_turn(message)  # noqa: SLF001 - appended after the current turn, no new turn
        return str(message["id"])

    async def bridge_session_info(self) -> dict[str, Any]:
        agent = self._agent
        return {
            "sessionId": agent.session_id,
            "messageCount": len(await agent.messages()),
            "modelId": await maybe_await(agent.get_model()),
            "metadata": {"agent": type(agent).__name__, "workspace": str(agent.workspace_root or "")},
        }
