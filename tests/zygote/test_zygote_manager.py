"""The ExtensionManager with the zygote: Python extensions are forked from it; anything wrong -> the launcher."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest
from zy_helpers import FIXTURES

from host import ExtensionManager

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the zygote is Linux-only")

TOOLS = FIXTURES / "tools.yaml"


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _is_zygote(pid: int) -> bool:
    return b"_zygote_main.py" in Path(f"/proc/{pid}/cmdline").read_bytes()


async def _gone(pid: int, timeout: float = 10.0) -> bool:
    for _ in range(int(timeout / 0.05)):
        if not Path(f"/proc/{pid}").exists():
            return True
        await asyncio.sleep(0.05)
    return False


async def test_python_extension_is_forked_from_the_zygote_with_the_sandbox() -> None:
    async with ExtensionManager(sandbox="auto") as mgr:
        info = await mgr.load(TOOLS)
        assert info.pid is not None
        assert _is_zygote(_parent(info.pid))
        assert await mgr.execute_tool("test_tools_add", {"a": 2, "b": 3}) == 5
        if "no_new_privs" in info.sandbox:
            status = Path(f"/proc/{info.pid}/status").read_text()
            assert "NoNewPrivs:\t1" in status


async def test_load_falls_back_to_the_launcher_when_the_zygote_died() -> None:
    async with ExtensionManager(sandbox="auto") as mgr:
        first = await mgr.load(TOOLS)
        assert first.pid is not None
        zygote = _parent(first.pid)
        assert _is_zygote(zygote)
        os.kill(zygote, signal.SIGKILL)
        await mgr.unload("test-tools")
        second = await mgr.load(TOOLS)
        assert second.pid is not None and _parent(second.pid) == os.getpid()
        assert await mgr.execute_tool("test_tools_add", {"a": 1, "b": 1}) == 2


async def test_zygote_false_spawns_extensions_directly() -> None:
    async with ExtensionManager(sandbox="off", zygote=False) as mgr:
        info = await mgr.load(TOOLS)
        assert info.pid is not None and _parent(info.pid) == os.getpid()


async def test_hookwire_zygote_0_spawns_extensions_directly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKWIRE_ZYGOTE", "0")
    async with ExtensionManager(sandbox="off") as mgr:
        info = await mgr.load(TOOLS)
        assert info.pid is not None and _parent(info.pid) == os.getpid()


async def test_close_stops_the_zygote_and_the_extensions() -> None:
    mgr = ExtensionManager(sandbox="off")
    try:
        info = await mgr.load(TOOLS)
        assert info.pid is not None
        zygote = _parent(info.pid)
        assert _is_zygote(zygote)
    finally:
        await mgr.close()
    assert await _gone(info.pid)
    assert await _gone(zygote)
