"""Registering tools and hooks (in-process; no serving)."""

from __future__ import annotations

import pytest

from extension_sdk import Extension


def test_unknown_hook_name_raises_listing_valid_names() -> None:
    ext = Extension("x")
    with pytest.raises(ValueError) as info:
        ext.hook("beforeTurns")
    message = str(info.value)
    assert "'beforeTurns'" in message
    for name in ("beforeTurn", "beforeToolCall", "afterToolCall", "onStepFinish", "onChunk"):
        assert name in message


def test_handler_arity_decides_whether_host_is_passed() -> None:
    ext = Extension("x")

    @ext.tool()
    def one(args: dict) -> None: ...

    @ext.tool()
    def two(args: dict, host: object) -> None: ...

    assert (ext.tools["one"].wants_host, ext.tools["two"].wants_host) == (False, True)


def test_tool_name_defaults_to_function_name_and_docstring() -> None:
    ext = Extension("x")

    @ext.tool()
    def lookup(args: dict) -> None:
        """Looks things up."""

    assert ext.tools["lookup"].description == "Looks things up."
    assert ext.tools["lookup"].schema == {"type": "object", "properties": {}}


def test_duplicate_tool_name_raises() -> None:
    ext = Extension("x")
    ext.tool(name="t")(lambda args: None)
    with pytest.raises(ValueError, match="already has a tool named 't'"):
        ext.tool(name="t")(lambda args: None)
