"""Test an extension without a host: `extension_sdk.testing`.

    from extension_sdk.testing import ExtensionHarness

    async def test_greet():
        async with ExtensionHarness(ext, files={"notes.txt": "hi"}) as h:
            assert await h.call_tool("greet", {"name": "Ada"}) == "Hello, Ada!"
            assert await h.before_turn(system="S") == {"system": "S\\nBe brief."}
            assert h.host.files["audit.jsonl"] == b"..."

`ExtensionHarness` serves the extension's real gRPC servicer in the test's event loop on a private Unix socket and
calls it through a real client; `FakeHost` is a real HostBridge server whose files, messages and context the test
presets and inspects. `SyncExtensionHarness` has the same methods, blocking, for plain tests; the pytest fixture
`extension_harness` (registered when the SDK is installed) opens one per call and closes it after the test.
Needs only what the SDK needs (no host, no model).
"""

from ._fake_host import BridgeCall, FakeHost
from ._harness import ExtensionHarness, HarnessWarning, HookFailed, ToolFailed
from ._sync_harness import SyncExtensionHarness

__all__ = [
    "BridgeCall",
    "ExtensionHarness",
    "FakeHost",
    "HarnessWarning",
    "HookFailed",
    "SyncExtensionHarness",
    "ToolFailed",
]
