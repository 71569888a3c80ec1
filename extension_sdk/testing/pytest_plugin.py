"""The `extension_harness` pytest fixture (registered as a pytest plugin when the SDK is installed; or add
`pytest_plugins = ["extension_sdk.testing.pytest_plugin"]` to a conftest.py). Imports nothing of gRPC until a
test uses the fixture."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Callable

import pytest

if TYPE_CHECKING:
    from extension_sdk import Extension
    from extension_sdk.testing import SyncExtensionHarness


@pytest.fixture
def extension_harness() -> Iterator[Callable[..., SyncExtensionHarness]]:
    """A factory: `h = extension_harness(ext, files={...})` serves `ext` in-process and returns a started
    `SyncExtensionHarness` (blocking calls; no pytest-asyncio needed). Everything it started stops after the test.

        def test_greet(extension_harness):
            h = extension_harness(ext)
            assert h.call_tool("greet", {"name": "Ada"}) == "Hello, Ada!"
    """
    from extension_sdk.testing import SyncExtensionHarness

    opened: list[SyncExtensionHarness] = []

    def open_harness(ext: Extension, **options: Any) -> SyncExtensionHarness:
        harness = SyncExtensionHarness(ext, **options)
        harness.start()
        opened.append(harness)
        return harness

    yield open_harness
    for harness in reversed(opened):
        harness.close()
