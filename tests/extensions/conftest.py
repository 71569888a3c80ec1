"""Fixtures for the extension manager tests (a manager that is always closed, a trace recorder)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from ext_helpers import FIXTURES

from host import ExtensionManager, TraceEvent


@pytest.fixture
async def manager() -> AsyncIterator[ExtensionManager]:
    mgr = ExtensionManager(sandbox="off")
    try:
        yield mgr
    finally:
        await mgr.close()


@pytest.fixture
def traces(manager: ExtensionManager) -> list[TraceEvent]:
    events: list[TraceEvent] = []
    manager.add_trace_listener(events.append)
    return events


@pytest.fixture
def tools_manifest() -> Path:
    return FIXTURES / "tools.yaml"

