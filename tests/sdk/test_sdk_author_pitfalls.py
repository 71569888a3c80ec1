"""SDK behaviour an author trips on (issue 13 §5): blocking sync hooks, non-JSON results, invalid schemas, hook
name typos, oversized replies. Each is pinned here through the real servicer (extension_sdk.testing)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import decimal
import threading
import uuid

import pytest

from extension_sdk import Extension
from extension_sdk.testing import ExtensionHarness, HookFailed, ToolFailed

MIB = 1024 * 1024


async def test_a_blocking_sync_hook_does_not_hold_up_a_tool_of_the_same_extension() -> None:
    release = threading.Event()
    ext = Extension("slowhook")

    @ext.hook("beforeTurn")
    def wait_for_release(snapshot: dict) -> dict:
        release.wait(30)  # blocks its thread until the test has seen the tool answer
        return {"system": "released" if release.is_set() else "timed out"}

    @ext.tool(description="fast")
    async def ping(args: dict) -> str:
        return "pong"

    async with ExtensionHarness(ext) as h:
        hook = asyncio.create_task(h.before_turn(system=""))
        await asyncio.sleep(0.05)  # the hook is running (and blocking) now
        try:
            assert await asyncio.wait_for(h.call_tool("ping"), 10) == "pong"
            assert not hook.done()
        finally:
            release.set()
        assert await hook == {"system": "released"}


async def test_a_blocking_sync_observation_does_not_hold_up_a_tool() -> None:
    release = threading.Event()
    ext = Extension("slowobs")

    @ext.hook("onChunk")
    def wait_for_release(snapshot: dict) -> None:
        release.wait(30)

    @ext.tool(description="fast")
    def ping(args: dict) -> str:
        return "pong"

    async with ExtensionHarness(ext) as h:
        chunk = asyncio.create_task(h.on_chunk(text="x"))
        await asyncio.sleep(0.05)
        try:
            assert await asyncio.wait_for(h.call_tool("ping"), 10) == "pong"
            assert not chunk.done()
        finally:
            release.set()
        await chunk


@dataclasses.dataclass
class Point:
    x: int
    at: datetime.date


async def test_tool_results_convert_by_pydantics_json_mode() -> None:
    ext = Extension("values")

    @ext.tool(description="everything JSON can't say")
    def values(args: dict) -> dict:
        return {
            "datetime": datetime.datetime(2026, 12, 3, 7, 5, 9, tzinfo=datetime.timezone.utc),
            "date": datetime.date(2026, 12, 3),
            "decimal": decimal.Decimal("10.50"),
            "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
            "bytes": b"caf\xc3\xa9",
            "set": {3},
            "frozenset": frozenset({"a"}),
            "tuple": (1, 2),
            "dataclass": Point(1, datetime.date(2026, 1, 2)),
        }

    async with ExtensionHarness(ext) as h:
        assert await h.call_tool("values") == {
            "datetime": "2026-12-03T07:05:09Z",
            "date": "2026-12-03",
            "decimal": "10.50",
            "uuid": "12345678-1234-5678-1234-567812345678",
            "bytes": "café",
            "set": [3],
            "frozenset": ["a"],
            "tuple": [1, 2],
            "dataclass": {"x": 1, "at": "2026-01-02"},
        }


async def test_a_tool_result_with_no_json_form_is_a_tool_error_naming_tool_and_type() -> None:
    ext = Extension("opaque")

    class Handle:
        pass

    @ext.tool(description="returns an object")
    def handle(args: dict) -> object:
        return {"handle": Handle()}

    async with ExtensionHarness(ext) as h:
        with pytest.raises(ToolFailed) as info:
            await h.call_tool("handle")
    assert info.value.name == "UnconvertibleValue"
    assert "tool 'handle' output" in info.value.message and "Handle value has no JSON form" in info.value.message


async def test_non_utf8_bytes_are_a_tool_error_not_replacement_characters() -> None:
    ext = Extension("binary")

    @ext.tool(description="raw bytes")
    def raw(args: dict) -> bytes:
        return b"\xff\xfe"

    async with ExtensionHarness(ext) as h:
        with pytest.raises(ToolFailed, match="bytes that are not UTF-8 text have no JSON form"):
            await h.call_tool("raw")


def test_an_invalid_json_schema_fails_when_the_tool_is_declared() -> None:
    ext = Extension("schemas")
    with pytest.raises(ValueError) as info:

        @ext.tool(description="bad", parameters={"type": "object",
                                                 "properties": {"n": {"type": "integer", "minimum": "zero"}}})
        def count(args: dict) -> None: ...

    assert str(info.value) == (
        "extension 'schemas', tool 'count': parameters is not a valid JSON Schema: at properties/n/minimum: "
        "'zero' is not of type 'number'"
    )
    assert "count" not in ext.tools


def test_an_unknown_type_name_in_a_schema_fails_when_the_tool_is_declared() -> None:
    ext = Extension("schemas")
    with pytest.raises(ValueError, match="tool 'lookup': parameters is not a valid JSON Schema: at type: 'objekt'"):
        ext.tool(name="lookup", parameters={"type": "objekt"})(lambda args: None)


def test_a_hook_name_typo_fails_when_declared_listing_the_valid_names() -> None:
    ext = Extension("typo")
    with pytest.raises(ValueError) as info:
        ext.hook("afterToolcall")
    assert str(info.value) == (
        "extension 'typo': unknown hook 'afterToolcall'; valid hooks are beforeTurn, beforeToolCall, "
        "afterToolCall, onStepFinish, onChunk"
    )


async def test_a_tool_output_over_16_mib_is_that_calls_error_and_the_next_call_works() -> None:
    ext = Extension("big")

    @ext.tool(description="too much")
    def flood(args: dict) -> str:
        return "x" * (17 * MIB)

    @ext.tool(description="small")
    def small(args: dict) -> str:
        return "ok"

    async with ExtensionHarness(ext) as h:
        with pytest.raises(ToolFailed) as info:
            await h.call_tool("flood")
        assert await h.call_tool("small") == "ok"
    assert info.value.name == "ReplyTooLarge"
    assert info.value.message.startswith("tool 'flood' output is 17.0 MiB (17825794 bytes); the most one reply")


async def test_a_before_turn_reply_over_16_mib_is_that_hooks_error() -> None:
    ext = Extension("bigturn")

    @ext.hook("beforeTurn")
    def huge(snapshot: dict) -> dict:
        return {"system": "y" * (17 * MIB)}

    async with ExtensionHarness(ext) as h:
        with pytest.raises(HookFailed) as info:
            await h.before_turn()
        assert info.value.name == "ReplyTooLarge"
        assert "the beforeTurn reply is 17.0 MiB" in info.value.message
        with pytest.raises(HookFailed, match="ReplyTooLarge"):  # and the extension still answers
            await h.before_turn()


# -- through the real host (a process, the Connect stream) ---------------------------------------------------

HOST_FIXTURE = '''
import os, time
from extension_sdk import Extension

ext = Extension("pitfalls", "1.0.0")

@ext.tool(description="more than the host accepts in one message")
def flood(args):
    return "x" * (17 * 1024 * 1024)

@ext.tool(description="small")
def small(args):
    return "ok"

@ext.tool(description="answers after a moment")
async def later(args):
    import asyncio
    await asyncio.sleep(0.3)
    return "later"

@ext.hook("beforeTurn")
def slow(snapshot):
    # blocks until the test's marker file exists (or 30 s)
    deadline = time.monotonic() + 30
    while not os.path.exists(snapshot["system"]) and time.monotonic() < deadline:
        time.sleep(0.01)
    return {"maxSteps": 7}

if __name__ == "__main__":
    ext.serve()
'''


async def _host_with_fixture(tmp_path):  # type: ignore[no-untyped-def]
    from host import ExtensionManager, parse_manifest

    (tmp_path / "pitfalls.py").write_text(HOST_FIXTURE)
    mgr = ExtensionManager(sandbox="off")
    await mgr.__aenter__()
    manifest = parse_manifest({"name": "pitfalls", "command": ["python", "pitfalls.py"],
                               "limits": {"toolOutputKb": 16384}}, str(tmp_path / "m.yaml"))
    await mgr.load(manifest)
    return mgr


async def test_through_the_host_an_oversized_tool_reply_fails_that_call_only(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from host import ExtensionToolError

    mgr = await _host_with_fixture(tmp_path)
    try:
        with pytest.raises(ExtensionToolError, match=r"^tool 'flood' output is 17.0 MiB \(17825794 bytes\); the most"):
            await mgr.execute_tool("pitfalls_flood", {})
        assert await mgr.execute_tool("pitfalls_small", {}) == "ok"
    finally:
        await mgr.close()


async def test_through_the_host_a_blocking_sync_hook_does_not_stall_a_tool_in_flight(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # a tool call already running goes on answering while a sync hook blocks its thread
    from host import TurnSnapshot

    mgr = await _host_with_fixture(tmp_path)
    marker = tmp_path / "release"
    try:
        tool = asyncio.create_task(mgr.execute_tool("pitfalls_later", {}))
        await asyncio.sleep(0.05)
        turn = asyncio.create_task(mgr.before_turn(TurnSnapshot(system=str(marker))))
        try:
            assert await asyncio.wait_for(tool, 10) == "later"
            assert not turn.done()
        finally:
            marker.touch()
        assert (await turn).patch.max_steps == 7
    finally:
        await mgr.close()


async def test_through_the_host_a_tool_sent_after_a_blocking_hook_is_not_held_up(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # Issue 13 §5: a blocking sync beforeTurn (another session's turn) made a fast tool wait for it. On the Connect
    # stream an awaited hook is started in order and answered when done (docs/protocol.md [4.4]).
    from host import TurnSnapshot

    mgr = await _host_with_fixture(tmp_path)
    marker = tmp_path / "release"
    try:
        turn = asyncio.create_task(mgr.before_turn(TurnSnapshot(system=str(marker))))
        await asyncio.sleep(0.2)  # the hook is blocking its worker thread now
        try:
            assert await asyncio.wait_for(mgr.execute_tool("pitfalls_small", {}), 10) == "ok"
            assert not turn.done()
        finally:
            marker.touch()
        assert (await turn).patch.max_steps == 7
    finally:
        await mgr.close()
