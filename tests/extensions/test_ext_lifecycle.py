"""Loading, unloading, start failures, the scrubbed environment and process cleanup."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from ext_helpers import pids_with_arg, process_gone, wait_until, write_manifest

from host import (
    ExtensionManager,
    ExtensionStartError,
    ExtensionUnloadedError,
)


async def test_second_load_of_a_loaded_name_is_refused(manager: ExtensionManager, tools_manifest: Path) -> None:
    await manager.load(tools_manifest)
    with pytest.raises(ExtensionStartError, match="'test-tools' is already loaded"):
        await manager.load(tools_manifest)
    assert len(manager.extensions()) == 1


async def test_unload_then_reload_works(manager: ExtensionManager, tools_manifest: Path) -> None:
    first = await manager.load(tools_manifest)
    assert await manager.unload("test-tools") is True
    assert manager.tool_names() == []
    assert await wait_until(lambda: process_gone(first.pid or 0))
    second = await manager.load(tools_manifest)
    assert second.pid != first.pid
    assert await manager.execute_tool("test_tools_add", {"a": 1, "b": 2}) == 3


async def test_unload_unknown_returns_false(manager: ExtensionManager) -> None:
    assert await manager.unload("no-such-extension") is False


async def test_tool_captured_before_unload_raises_unloaded(manager: ExtensionManager, tools_manifest: Path) -> None:
    await manager.load(tools_manifest)
    tool = manager.tools()[0]
    await manager.unload("test-tools")
    with pytest.raises(ExtensionUnloadedError, match="has been unloaded"):
        await manager.execute_tool(tool.name, {"name": "x"})


async def test_subscribers_are_discovered_from_describe(manager: ExtensionManager, tools_manifest: Path,
                                                        tmp_path: Path) -> None:
    from ext_helpers import hooks_manifest

    await manager.load(tools_manifest)
    await manager.load(hooks_manifest(tmp_path, "record"))
    assert manager.subscribers("beforeTurn") == ["test-tools"]
    assert manager.subscribers("onChunk") == ["hooks-record"]
    assert manager.subscribers("beforeToolCall") == ["hooks-record"]
    info = {i.name: i for i in manager.extensions()}
    assert info["test-tools"].hooks == ["beforeTurn"] and info["test-tools"].state == "running"


async def test_never_handshaking_extension_times_out(manager: ExtensionManager, tmp_path: Path) -> None:
    path = write_manifest(tmp_path, "silent", "bad_ext.py", "--mode", "silent", timeouts={"startMs": 700})
    with pytest.raises(ExtensionStartError, match=r"'silent'.*silent\.yaml.*no handshake within 700 ms"):
        await manager.load(path)
    assert manager.extensions() == []


async def test_garbage_on_stdout_before_handshake_is_a_clear_error(manager: ExtensionManager, tmp_path: Path) -> None:
    path = write_manifest(tmp_path, "chatty", "bad_ext.py", "--mode", "garbage")
    with pytest.raises(ExtensionStartError, match=r"'chatty'.*printed 'Starting up the server"):
        await manager.load(path)


async def test_wrong_protocol_version_is_refused(manager: ExtensionManager, tmp_path: Path) -> None:
    path = write_manifest(tmp_path, "future", "bad_ext.py", "--mode", "version")
    with pytest.raises(ExtensionStartError, match=r"protocol version '99'; this host speaks '1'"):
        await manager.load(path)


async def test_early_exit_reports_code_and_last_stderr_lines(manager: ExtensionManager, tmp_path: Path) -> None:
    path = write_manifest(tmp_path, "quitter", "bad_ext.py", "--mode", "exit")
    with pytest.raises(ExtensionStartError) as info:
        await manager.load(path)
    text = str(info.value)
    assert "exited with code 3 before the handshake" in text
    assert "fatal: config file missing" in text
    assert "quitter.yaml" in text


async def test_huge_stderr_line_is_capped_not_buffered(manager: ExtensionManager, tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    path = write_manifest(tmp_path, "flood", "bad_ext.py", "--mode", "flood")
    with caplog.at_level(logging.INFO, logger="hookwire.ext.flood"), pytest.raises(ExtensionStartError) as info:
        await manager.load(path)
    assert "last words" in str(info.value)
    lines = [r.getMessage() for r in caplog.records if r.name == "hookwire.ext.flood"]
    assert max(len(line) for line in lines) < 5000
    assert any(line.endswith("[line truncated]") for line in lines)


async def test_host_secret_is_not_visible_to_extension(manager: ExtensionManager, tools_manifest: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKWIRE_TEST_SECRET_KEY", "s3cret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-key")
    await manager.load(tools_manifest)
    env = await manager.execute_tool("test_tools_environ", {})
    assert "HOOKWIRE_TEST_SECRET_KEY" not in env
    assert "OPENAI_API_KEY" not in env
    assert env["HOOKWIRE_EXTENSION_NAME"] == "test-tools"
    assert env["HOOKWIRE_MAGIC_COOKIE"] == "hookwire-extension-v1"


async def test_allowlisted_env_var_is_passed_through(manager: ExtensionManager, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKWIRE_TEST_SECRET_KEY", "s3cret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-key")
    await manager.load(write_manifest(tmp_path, "allowed", "tools_ext.py", env=["HOOKWIRE_TEST_SECRET_KEY"]))
    env = await manager.execute_tool("allowed_environ", {})
    assert env["HOOKWIRE_TEST_SECRET_KEY"] == "s3cret"
    assert "OPENAI_API_KEY" not in env


async def test_socket_lives_in_a_private_runtime_dir(manager: ExtensionManager, tools_manifest: Path) -> None:
    await manager.load(tools_manifest)
    env = await manager.execute_tool("test_tools_environ", {})
    sock = Path(env["HOOKWIRE_SOCKET"])
    assert len(str(sock)) < 100
    assert sock.parent.stat().st_mode & 0o777 == 0o700
    assert Path(env["HOOKWIRE_SCRATCH_DIR"]).is_dir()


async def test_no_process_is_left_after_close(tools_manifest: Path) -> None:
    mgr = ExtensionManager(sandbox="off")
    info = await mgr.load(tools_manifest)
    grandchild = await mgr.execute_tool("test_tools_spawn_child", {})
    assert info.pid and not process_gone(info.pid) and not process_gone(grandchild)
    await mgr.close()
    assert process_gone(info.pid)
    assert await wait_until(lambda: process_gone(grandchild), 5)


async def test_close_while_a_call_is_in_flight_leaves_no_process(tools_manifest: Path) -> None:
    mgr = ExtensionManager(sandbox="off")
    info = await mgr.load(tools_manifest)
    call = asyncio.ensure_future(mgr.execute_tool("test_tools_nap", {"seconds": 30}))
    await asyncio.sleep(0.3)
    call.cancel()
    closing = asyncio.ensure_future(mgr.close())
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    closing.cancel()  # the caller of close() is cancelled mid-close: close still completes before it returns
    with pytest.raises(asyncio.CancelledError):
        await closing
    with pytest.raises(asyncio.CancelledError):
        await call
    assert info.pid and process_gone(info.pid)


async def test_load_all_keeps_load_order(manager: ExtensionManager, tmp_path: Path) -> None:
    from ext_helpers import hooks_manifest

    paths = [hooks_manifest(tmp_path, "merge_a"), hooks_manifest(tmp_path, "merge_b"), hooks_manifest(tmp_path, "raise")]
    infos = await manager.load_all(paths)
    assert [i.name for i in infos] == ["hooks-merge_a", "hooks-merge_b", "hooks-raise"]
    assert manager.subscribers("beforeTurn") == ["hooks-merge_a", "hooks-merge_b", "hooks-raise"]


async def test_sandboxed_launch_reports_its_layers(tools_manifest: Path) -> None:
    async with ExtensionManager(sandbox="auto") as mgr:
        info = await mgr.load(tools_manifest)
        assert await mgr.execute_tool("test_tools_add", {"a": 1, "b": 1}) == 2
    assert info.sandbox or info.sandbox_missing  # "auto" reports what it enforced and what it could not
    assert info.pid and process_gone(info.pid)


async def test_cancelled_load_leaves_no_process_and_no_entry(manager: ExtensionManager, tmp_path: Path) -> None:
    marker = f"cancel-marker-{id(tmp_path)}"
    path = write_manifest(tmp_path, "slowstart", "bad_ext.py", "--mode", "silent", marker)
    loading = asyncio.ensure_future(manager.load(path))
    assert await wait_until(lambda: bool(pids_with_arg(marker)), 5)
    loading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await loading
    assert manager.extensions() == []
    assert await wait_until(lambda: not pids_with_arg(marker), 5)


async def test_unload_during_a_tool_call_raises_unloaded(manager: ExtensionManager, tools_manifest: Path) -> None:
    await manager.load(tools_manifest)
    call = asyncio.ensure_future(manager.execute_tool("test_tools_nap", {"seconds": 30}))
    await asyncio.sleep(0.3)
    await manager.unload("test-tools")
    with pytest.raises(ExtensionUnloadedError, match="has been unloaded"):
        await asyncio.wait_for(call, 10)


async def test_load_reports_the_manifest_version_and_the_extensions_own_apart(
        manager: ExtensionManager, tmp_path: Path) -> None:
    path = write_manifest(tmp_path, "versioned", "hooks_ext.py", "--mode", "ok", "--name", "versioned",
                          version="4.5.6")
    info = await manager.load(path)
    assert (info.version, info.extension_version) == ("4.5.6", "0.1.0")
    assert [(i.version, i.extension_version) for i in manager.extensions()] == [("4.5.6", "0.1.0")]
