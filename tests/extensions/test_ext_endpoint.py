"""A manifest with `endpoint` instead of `command`: the host connects to a running extension it did not start."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from ext_helpers import FIXTURES

from host import ExtensionManager, ExtensionStartError, TurnSnapshot, parse_manifest


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """tools_ext.py serving on a socket of our own, with a token, as an operator would run it."""
    sock = tmp_path / "remote.sock"
    env = {**os.environ, "HOOKWIRE_TOKEN": "remote-secret"}
    proc = subprocess.Popen(
        [sys.executable, str(FIXTURES / "tools_ext.py"), "--socket", str(sock)],
        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        assert line.startswith("hookwire|1|unix:"), line
        yield f"unix:{sock}"
    finally:
        proc.kill()
        proc.wait(10)


async def test_endpoint_extension_serves_tools_and_hooks(served: str) -> None:
    manifest = parse_manifest({"name": "remote", "endpoint": served, "token": "remote-secret"}, "remote.yaml")
    async with ExtensionManager() as mgr:
        info = await mgr.load(manifest)
        assert info.state == "running" and info.pid is None and info.endpoint == served
        assert await mgr.execute_tool("remote_add", {"a": 3, "b": 4}) == 7
        merged = await mgr.before_turn(TurnSnapshot(system="s"))
        assert merged.patch.max_steps == 42


async def test_endpoint_with_the_wrong_token_is_a_clear_start_error(served: str) -> None:
    manifest = parse_manifest({"name": "remote", "endpoint": served, "token": "wrong"}, "remote.yaml")
    async with ExtensionManager() as mgr:
        with pytest.raises(ExtensionStartError, match="remote"):
            await mgr.load(manifest)
