"""Extension tools through the manager: Think's scenarios (greet, add, multiply, errors, namespacing)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ext_helpers import write_manifest

from host import ExtensionManager, ExtensionToolError, sanitize_name


async def test_greet_world_returns_hello_world(manager: ExtensionManager, tools_manifest: Path) -> None:
    await manager.load(tools_manifest)
    assert await manager.execute_tool("test_tools_greet", {"name": "World"}) == "Hello, World!"


async def test_add_3_4_returns_7(manager: ExtensionManager, tools_manifest: Path) -> None:
    await manager.load(tools_manifest)
    assert await manager.execute_tool("test_tools_add", {"a": 3, "b": 4}) == 7


async def test_multiply_5_6_returns_30(manager: ExtensionManager, tools_manifest: Path) -> None:
    await manager.load(tools_manifest)
    assert await manager.execute_tool("test_tools_multiply", {"a": 5, "b": 6}) == 30


async def test_throwing_tool_raises_extension_tool_error(manager: ExtensionManager, tools_manifest: Path) -> None:
    await manager.load(tools_manifest)
    with pytest.raises(ExtensionToolError, match="the boom tool exploded"):
        await manager.execute_tool("test_tools_boom", {})


async def test_streaming_tool_sends_preliminaries_then_final(manager: ExtensionManager, tools_manifest: Path) -> None:
    await manager.load(tools_manifest)
    seen: list[object] = []
    assert await manager.execute_tool("test_tools_count", {"n": 3}, on_preliminary=seen.append) == 3
    assert seen == [1, 2]


async def test_tools_are_namespaced_described_and_carry_schema(manager: ExtensionManager, tools_manifest: Path) -> None:
    await manager.load(tools_manifest)
    greet = next(t for t in manager.tools() if t.tool == "greet")
    assert greet.name == "test_tools_greet"
    assert greet.description == "[test-tools] Greets someone"
    assert greet.input_schema["required"] == ["name"]
    assert greet.extension == "test-tools"
    assert "test_tools_multiply" in manager.tool_names()


@pytest.mark.parametrize(
    ("name", "expected"),
    [("my-cool-ext", "my_cool_ext"), ("simple", "simple"), ("a--b", "a_b"), ("ext.v2", "ext_v2"),
     ("-lead-", "lead"), ("MixedCase", "MixedCase"), ("with space", "with_space")],
)
def test_sanitize_table(name: str, expected: str) -> None:
    assert sanitize_name(name) == expected


async def test_tool_prefix_is_the_sanitized_manifest_name(manager: ExtensionManager, tmp_path: Path) -> None:
    await manager.load(write_manifest(tmp_path, "my-cool-ext", "tools_ext.py"))
    assert "my_cool_ext_greet" in manager.tool_names()
    assert await manager.execute_tool("my_cool_ext_greet", {"name": "Ann"}) == "Hello, Ann!"


async def test_unknown_tool_name_raises_tool_error(manager: ExtensionManager, tools_manifest: Path) -> None:
    await manager.load(tools_manifest)
    with pytest.raises(ExtensionToolError, match="no extension tool named 'test_tools_nope'"):
        await manager.execute_tool("test_tools_nope", {})
