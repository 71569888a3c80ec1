"""The HostBridge on the Connect stream: a remote extension (endpoint over mutual TLS) calls its host back as frames
on the stream it already has; the host listens nowhere; the same permission gates and audit lines apply."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from scale_helpers import Pki, Service

from host import CallContext, ExtensionManager, TurnSnapshot, parse_manifest

TOKEN = "bridge-token"


class Workspace:
    """A host app's session as the bridge sees it: a workspace root, nothing else."""

    def __init__(self, root: Path) -> None:
        self.workspace_root = root

    async def bridge_get_messages(self, limit: int) -> list[dict[str, Any]]:
        return []

    async def bridge_get_context(self, label: str) -> str | None:
        return None

    async def bridge_set_context(self, label: str, content: str, *, extension: str) -> None:
        return None

    async def bridge_send_message(self, text: str, role: str) -> str:
        return "m1"

    async def bridge_session_info(self) -> dict[str, Any]:
        return {"sessionId": "s1"}


def remote(svc: Service, pki: Pki, permissions: dict[str, Any]) -> Any:
    return parse_manifest({
        "name": "remote-svc", "endpoint": svc.address, "token": TOKEN, "permissions": permissions,
        "tls": {"caFile": str(pki.ca.cert_file), "certFile": str(pki.client.cert), "keyFile": str(pki.client.key)},
    }, "remote.yaml")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("remember the milk")
    return root


async def test_remote_extension_reads_the_workspace_over_its_stream(
        services: Callable[..., Service], pki: Pki, workspace: Path) -> None:
    svc = services(token=TOKEN, pki=pki)
    async with ExtensionManager(sandbox="off") as mgr:
        mgr.register_session("s1", Workspace(workspace))
        await mgr.load(remote(svc, pki, {"workspace": "read"}))
        out = await mgr.execute_tool("remote_svc_read", {"path": "notes.txt"}, context=CallContext(session_id="s1"))
        assert out == "remember the milk"
        assert not mgr._launcher.bridge._server.socket_path.exists()  # the host listens nowhere for it


async def test_sync_handler_reaches_the_host_over_the_stream(
        services: Callable[..., Service], pki: Pki, workspace: Path) -> None:
    svc = services(token=TOKEN, pki=pki)
    async with ExtensionManager(sandbox="off") as mgr:
        mgr.register_session("s1", Workspace(workspace))
        await mgr.load(remote(svc, pki, {"workspace": "read"}))
        out = await mgr.execute_tool("remote_svc_read_sync", {"path": "notes.txt"},
                                     context=CallContext(session_id="s1"))
        assert out == "remember the milk"


async def test_hook_awaiting_the_host_gets_its_answer_on_the_same_stream(
        services: Callable[..., Service], pki: Pki, workspace: Path) -> None:
    svc = services(token=TOKEN, pki=pki)
    async with ExtensionManager(sandbox="off") as mgr:
        mgr.register_session("s1", Workspace(workspace))
        await mgr.load(remote(svc, pki, {"workspace": "read"}))
        merged = await mgr.before_turn(TurnSnapshot(system="base"), CallContext(session_id="s1"))
        assert merged.patch.system == "base [r0] remember the milk"


async def test_stream_bridge_write_lands_in_the_workspace(
        services: Callable[..., Service], pki: Pki, workspace: Path) -> None:
    svc = services(token=TOKEN, pki=pki)
    async with ExtensionManager(sandbox="off") as mgr:
        mgr.register_session("s1", Workspace(workspace))
        await mgr.load(remote(svc, pki, {"workspace": "read-write"}))
        out = await mgr.execute_tool("remote_svc_write", {"path": "out/result.txt", "content": "42"},
                                     context=CallContext(session_id="s1"))
        assert out == "2" and (workspace / "out" / "result.txt").read_text() == "42"


async def test_stream_bridge_denies_what_the_manifest_does_not_grant_and_audits_it(
        services: Callable[..., Service], pki: Pki, workspace: Path, caplog: pytest.LogCaptureFixture) -> None:
    svc = services(token=TOKEN, pki=pki)
    caplog.set_level(logging.INFO, logger="hookwire.audit")
    async with ExtensionManager(sandbox="off") as mgr:
        mgr.register_session("s1", Workspace(workspace))
        await mgr.load(remote(svc, pki, {"messages": "read"}))  # a bridge grant, but not the workspace
        out = await mgr.execute_tool("remote_svc_read", {"path": "notes.txt"}, context=CallContext(session_id="s1"))
    assert out.startswith("error: PERMISSION_DENIED: extension 'remote-svc' may not call ReadFile")
    assert "needs permissions.workspace: read" in out
    audits = [r.getMessage() for r in caplog.records if r.name == "hookwire.audit"]
    assert any("extension=remote-svc method=ReadFile session=s1 target=notes.txt outcome=denied" in a
               for a in audits), audits


async def test_stream_bridge_refuses_paths_out_of_the_workspace(
        services: Callable[..., Service], pki: Pki, workspace: Path) -> None:
    svc = services(token=TOKEN, pki=pki)
    async with ExtensionManager(sandbox="off") as mgr:
        mgr.register_session("s1", Workspace(workspace))
        await mgr.load(remote(svc, pki, {"workspace": "read"}))
        out = await mgr.execute_tool("remote_svc_read", {"path": "../pki/test-ca.key"},
                                     context=CallContext(session_id="s1"))
    assert out.startswith("error: PERMISSION_DENIED") and "escapes the workspace root" in out


async def test_remote_extension_without_bridge_grants_gets_no_host(
        services: Callable[..., Service], pki: Pki, workspace: Path) -> None:
    svc = services(token=TOKEN, pki=pki)
    async with ExtensionManager(sandbox="off") as mgr:
        mgr.register_session("s1", Workspace(workspace))
        await mgr.load(remote(svc, pki, {}))
        out = await mgr.execute_tool("remote_svc_read", {"path": "notes.txt"}, context=CallContext(session_id="s1"))
        assert out == "no bridge"
        assert mgr._launcher.bridge._server is None


async def test_local_extension_calls_over_unary_rpcs_still_use_the_unix_socket_bridge(
        pki: Pki, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import host.extensions._extension_client as conn_mod

    from scale_helpers import REMOTE_EXT

    monkeypatch.setattr(conn_mod, "USE_CONNECT_TOOLS", False)  # tool calls as ExecuteTool RPCs, off the stream
    m = parse_manifest({"name": "local-svc", "command": ["python", str(REMOTE_EXT)],
                        "permissions": {"workspace": "read"}}, str(workspace.parent / "local.yaml"))
    async with ExtensionManager(sandbox="off") as mgr:
        mgr.register_session("s1", Workspace(workspace))
        await mgr.load(m)
        out = await mgr.execute_tool("local_svc_read", {"path": "notes.txt"}, context=CallContext(session_id="s1"))
        assert out == "remember the milk"
        assert mgr._launcher.bridge._server.socket_path.exists()  # a started process still gets the Unix-socket bridge


async def test_a_flood_of_stream_bridge_calls_is_refused_beyond_the_inflight_cap(tmp_path: Path) -> None:
    import asyncio

    from extension_sdk.proto import host_bridge_pb2 as hb
    from host.extensions._bridge_server import HostBridgeServer
    from host.extensions._stream_bridge import MAX_INFLIGHT, StreamBridge

    release = asyncio.Event()

    class Slow(Workspace):
        async def bridge_get_messages(self, limit: int) -> list[dict[str, Any]]:
            await release.wait()
            return []

    bridge = HostBridgeServer(tmp_path / "never-bound.sock")
    bridge.register_session("s1", Slow(tmp_path))
    answer = StreamBridge(bridge, parse_manifest({"name": "flooder", "endpoint": "127.0.0.1:1",
                                                  "permissions": {"messages": "read"}}, "f.yaml")).answer
    calls = [asyncio.ensure_future(answer(hb.BridgeRequest(id=i, get_messages=hb.GetMessagesRequest(session_id="s1"))))
             for i in range(MAX_INFLIGHT + 5)]
    await asyncio.sleep(0.1)
    refused = [c.result() for c in calls if c.done()]
    assert len(refused) == 5 and {r.code for r in refused} == {8}  # RESOURCE_EXHAUSTED, answered at once
    release.set()
    answered = await asyncio.gather(*calls)
    assert sum(1 for r in answered if r.code == 0 and r.HasField("get_messages")) == MAX_INFLIGHT
    assert not (tmp_path / "never-bound.sock").exists()


async def test_a_write_too_big_for_a_frame_fails_alone_and_the_stream_lives_on(
        services: Callable[..., Service], pki: Pki, workspace: Path) -> None:
    svc = services(token=TOKEN, pki=pki)
    async with ExtensionManager(sandbox="off") as mgr:
        mgr.register_session("s1", Workspace(workspace))
        await mgr.load(remote(svc, pki, {"workspace": "read-write"}))
        out = await mgr.execute_tool("remote_svc_write_big", {"path": "big.bin", "size": 16 * 1024 * 1024},
                                     context=CallContext(session_id="s1"))
        assert out.startswith("error: RESOURCE_EXHAUSTED: WriteFile:") and not (workspace / "big.bin").exists()
        assert await mgr.execute_tool("remote_svc_read", {"path": "notes.txt"},
                                      context=CallContext(session_id="s1")) == "remember the milk"
        assert mgr.extensions()[0].restarts == 0
