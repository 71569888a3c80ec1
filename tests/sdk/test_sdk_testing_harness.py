"""extension_sdk.testing: an extension's hooks and tools called in-process, its host faked by a real HostBridge."""

from __future__ import annotations

import pytest

from extension_sdk import Extension, current_call
from extension_sdk.testing import (
    BridgeCall,
    ExtensionHarness,
    HarnessWarning,
    HookFailed,
    SyncExtensionHarness,
    ToolFailed,
)


def _notes_extension() -> Extension:
    ext = Extension("notes", "1.2.3", description="Keeps notes")

    @ext.tool(description="Greets", parameters={"type": "object", "properties": {"name": {"type": "string"}},
                                                "required": ["name"]})
    def greet(args: dict) -> str:
        return f"Hello, {args['name']}!"

    @ext.tool(description="Counts to n")
    async def count_to(args: dict, host: object):
        for i in range(1, args["n"] + 1):
            yield i

    @ext.tool(description="Reads a note (sync, through host.sync)")
    def read_note(args: dict, host):
        data = host.sync.read_file(args["path"])  # None: no such file (Think's readFile -> null)
        return None if data is None else data.decode()

    @ext.tool(description="Who is calling")
    async def whoami(args: dict) -> list[str]:
        return list(current_call())

    @ext.tool(description="Fails")
    def explode(args: dict) -> None:
        raise RuntimeError("the fuse was lit")

    @ext.hook("beforeTurn")
    def tune(snapshot: dict, host: object) -> dict:
        return {"maxSteps": 3, "system": snapshot["system"] + " Be brief.", "temperature": 0.5}

    @ext.hook("beforeToolCall")
    def guard(snapshot: dict) -> dict | None:
        if snapshot["toolName"] == "delete":
            return {"action": "block", "reason": f"no deleting {snapshot['input']['path']}"}
        return None

    @ext.hook("afterToolCall")
    async def audit(snapshot: dict, host) -> None:
        await host.write_file("audit.log", f"{snapshot['toolName']} ok={snapshot['success']}\n", append=True)

    @ext.hook("onChunk")
    async def remember(snapshot: dict, host) -> None:
        previous = await host.get_context("notes.last") or ""
        await host.set_context("notes.last", previous + snapshot["text"])

    @ext.hook("onStepFinish")
    async def summarize(snapshot: dict, host) -> None:
        messages = await host.get_messages()
        await host.send_message(f"{len(messages)} messages, step {snapshot['stepNumber']}", role="assistant")

    return ext


async def test_call_tool_returns_the_tools_output() -> None:
    async with ExtensionHarness(_notes_extension()) as h:
        assert await h.call_tool("greet", {"name": "Ada"}) == "Hello, Ada!"


async def test_call_tool_hands_preliminaries_over_in_order_before_the_output() -> None:
    seen: list[int] = []
    async with ExtensionHarness(_notes_extension()) as h:
        assert await h.call_tool("count_to", {"n": 4}, on_preliminary=seen.append) == 4
    assert seen == [1, 2, 3]


async def test_a_failing_tool_raises_tool_failed_with_the_extensions_traceback() -> None:
    async with ExtensionHarness(_notes_extension()) as h:
        with pytest.raises(ToolFailed) as info:
            await h.call_tool("explode")
    assert (info.value.tool, info.value.name, info.value.message) == ("explode", "RuntimeError", "the fuse was lit")
    assert 'raise RuntimeError("the fuse was lit")' in info.value.stack


async def test_an_unknown_tool_raises_tool_failed_naming_the_known_tools() -> None:
    async with ExtensionHarness(_notes_extension()) as h:
        with pytest.raises(ToolFailed, match="has no tool 'greeet'") as info:
            await h.call_tool("greeet", {"name": "Ada"})
    assert info.value.name == "UnknownTool"


async def test_before_turn_returns_the_turn_config_fields_the_hook_set() -> None:
    async with ExtensionHarness(_notes_extension()) as h:
        patch = await h.before_turn(system="You help.", toolNames=["greet"])
    assert patch == {"system": "You help. Be brief.", "maxSteps": 3, "temperature": 0.5}


async def test_before_turn_warns_of_fields_the_host_would_refuse() -> None:
    ext = Extension("sloppy")

    @ext.hook("beforeTurn")
    def tune(snapshot: dict) -> dict:
        return {"maxSteps": "4", "system": "S"}

    async with ExtensionHarness(ext) as h:
        with pytest.warns(HarnessWarning, match="'maxSteps': '4'"):
            assert await h.before_turn() == {"system": "S"}


async def test_before_tool_call_returns_the_hooks_decision() -> None:
    async with ExtensionHarness(_notes_extension()) as h:
        decision = await h.before_tool_call(toolName="delete", input={"path": "a.txt"})
        none = await h.before_tool_call(toolName="greet", input={"name": "Ada"})
    assert (decision, none) == ({"action": "block", "reason": "no deleting a.txt"}, None)


async def test_a_raising_hook_raises_hook_failed_naming_the_hook() -> None:
    ext = Extension("broken")

    @ext.hook("onStepFinish")
    def fail(snapshot: dict) -> None:
        raise KeyError("usage")

    async with ExtensionHarness(ext) as h:
        with pytest.raises(HookFailed) as info:
            await h.on_step_finish(stepNumber=2)
    assert (info.value.hook, info.value.name) == ("onStepFinish", "KeyError")


async def test_calling_a_hook_the_extension_does_not_serve_raises_lookup_error() -> None:
    ext = Extension("tools-only")
    async with ExtensionHarness(ext) as h:
        with pytest.raises(LookupError, match="serves no beforeTurn hook"):
            await h.before_turn()


async def test_an_unknown_snapshot_field_raises_naming_the_hooks_fields() -> None:
    async with ExtensionHarness(_notes_extension()) as h:
        with pytest.raises(TypeError, match="unknown field 'toolname'.*toolName"):
            await h.after_tool_call(toolname="greet")


async def test_observations_write_to_the_fake_hosts_workspace_and_context() -> None:
    async with ExtensionHarness(_notes_extension()) as h:
        await h.after_tool_call(toolName="greet", output="Hello, Ada!")
        await h.after_tool_call(toolName="explode", error="the fuse was lit")
        await h.observe([("onChunk", {"text": "Hel"}), ("onChunk", {"text": "lo"})])
    assert h.host.text("audit.log") == "greet ok=True\nexplode ok=False\n"
    assert h.host.context == {"notes.last": "Hello"}


async def test_preset_messages_are_read_and_sent_messages_are_recorded() -> None:
    messages = [{"id": "m1", "role": "user", "content": "hi"}, {"id": "m2", "role": "assistant", "content": "yo"}]
    async with ExtensionHarness(_notes_extension(), messages=messages) as h:
        await h.on_step_finish(stepNumber=1)
    assert h.host.sent == [{"id": "sent-1", "role": "assistant", "text": "2 messages, step 1"}]


async def test_a_sync_tool_reads_a_preset_file_through_host_sync() -> None:
    async with ExtensionHarness(_notes_extension(), files={"notes/today.md": "buy milk"}) as h:
        assert await h.call_tool("read_note", {"path": "notes/today.md"}) == "buy milk"
    assert h.host.calls == [BridgeCall("ReadFile", "test-session", "notes/today.md")]


async def test_a_missing_file_reads_as_none_as_on_the_host() -> None:
    async with ExtensionHarness(_notes_extension()) as h:
        assert await h.call_tool("read_note", {"path": "nope.md"}) is None


async def test_a_path_out_of_the_workspace_is_permission_denied() -> None:
    async with ExtensionHarness(_notes_extension(), files={"a.md": "x"}) as h:
        with pytest.raises(ToolFailed, match="PERMISSION_DENIED: ReadFile: path '../a.md' escapes"):
            await h.call_tool("read_note", {"path": "../a.md"})


async def test_a_denied_method_is_permission_denied_and_writes_nothing() -> None:
    async with ExtensionHarness(_notes_extension(), deny=["write_file"]) as h:
        with pytest.raises(HookFailed, match="PERMISSION_DENIED"):
            await h.after_tool_call(toolName="greet")
    assert h.host.files == {}


async def test_without_a_bridge_handlers_get_host_none() -> None:
    ext = Extension("lonely")

    @ext.tool(description="What host is")
    def which(args: dict, host: object) -> str:
        return repr(host)

    async with ExtensionHarness(ext, bridge=False) as h:
        assert await h.call_tool("which") == "None"


async def test_calls_of_a_turn_share_its_request_id_until_the_next_turn() -> None:
    async with ExtensionHarness(_notes_extension(), session_id="s-42") as h:
        first = await h.call_tool("whoami")
        same_turn = await h.call_tool("whoami")
        assert h.next_turn() == "test-request-2"
        next_turn = await h.call_tool("whoami")
    assert first == same_turn == ["s-42", "test-request-1"]
    assert next_turn == ["s-42", "test-request-2"]


async def test_describe_reports_hooks_tools_and_schemas() -> None:
    async with ExtensionHarness(_notes_extension()) as h:
        info = await h.describe()
    assert (info["name"], info["version"], info["protocolVersion"]) == ("notes", "1.2.3", "1")
    assert info["hooks"] == ["beforeTurn", "beforeToolCall", "afterToolCall", "onChunk", "onStepFinish"]
    assert info["tools"]["greet"]["inputSchema"]["required"] == ["name"]
    assert info["tools"]["count_to"]["streaming"] is True


def test_sync_harness_works_without_an_event_loop() -> None:
    with SyncExtensionHarness(_notes_extension(), files={"a.md": "A"}) as h:
        assert h.call_tool("read_note", {"path": "a.md"}) == "A"
        h.after_tool_call(toolName="read_note")
    assert h.host.text("audit.log") == "read_note ok=True\n"


def test_extension_harness_fixture_serves_an_extension_in_a_plain_test(extension_harness) -> None:
    h = extension_harness(_notes_extension(), files={"a.md": "A"})
    assert h.call_tool("greet", {"name": "Bo"}) == "Hello, Bo!"
    assert h.before_turn(system="S") == {"system": "S Be brief.", "maxSteps": 3, "temperature": 0.5}


STUCK = """
import asyncio, threading
from extension_sdk import Extension
from extension_sdk.testing import ExtensionHarness

ext = Extension("stuck")

@ext.tool(description="never returns")
def hang(args):
    threading.Event().wait()

async def main():
    async with ExtensionHarness(ext, timeout_s=0.5) as h:
        try:
            await h.call_tool("hang")
        except TimeoutError as exc:
            print(exc, flush=True)

asyncio.run(main())
"""


def test_a_stuck_sync_handler_times_out_and_does_not_keep_the_process_alive(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import subprocess
    import sys

    (tmp_path / "stuck.py").write_text(STUCK)
    proc = subprocess.run([sys.executable, "stuck.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "tool 'hang' of extension 'stuck' did not answer within 0.5 s\n"
