"""The HostBridge: started lazily for extensions whose manifest grants bridge permissions."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from ext_helpers import write_manifest

from host import CallContext, ExtensionManager


class Services:
    """A host app's session, as the HostBridge sees it."""

    workspace_root = None

    async def bridge_get_messages(self, limit: int) -> list[dict[str, Any]]:
        return [{"role": "user", "content": "hi from the host"}][:limit]

    async def bridge_get_context(self, label: str) -> str | None:
        return None

    async def bridge_set_context(self, label: str, content: str, *, extension: str) -> None:
        return None

    async def bridge_send_message(self, text: str, role: str) -> str:
        return "m1"

    async def bridge_session_info(self) -> dict[str, Any]:
        return {"sessionId": "s1"}


async def test_extension_without_bridge_permissions_gets_no_host_address(
    manager: ExtensionManager, tools_manifest: Path
) -> None:
    await manager.load(tools_manifest)
    env = await manager.execute_tool("test_tools_environ", {})
    assert "HOOKWIRE_HOST_ADDRESS" not in env


@pytest.mark.skipif(importlib.util.find_spec("host.extensions._bridge_server") is None, reason="host/extensions/_bridge_server.py has not landed yet")
async def test_extension_with_messages_permission_reads_messages_over_the_bridge(
    manager: ExtensionManager, tmp_path: Path
) -> None:
    manager.register_session("s1", Services())  # before the bridge exists: registered when it starts
    await manager.load(write_manifest(tmp_path, "bridged", "bridge_ext.py", permissions={"messages": "read"}))
    out = await manager.execute_tool("bridged_messages", {}, context=CallContext(session_id="s1"))
    assert out == [{"role": "user", "content": "hi from the host"}]
