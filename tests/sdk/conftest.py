"""The SDK tests' fixtures: fixture extensions spawned as real processes (tests/sdk/sdk_processes.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sdk_processes import Running, spawn


@pytest.fixture(scope="module")
def greeter() -> Iterator[Running]:
    running = spawn("greeter")
    yield running
    running.stop()


@pytest.fixture(scope="module")
def mathx() -> Iterator[Running]:
    running = spawn("mathx")
    yield running
    running.stop()


@pytest.fixture
def fresh_greeter() -> Iterator[Running]:
    """A greeter of this test's own (for tests that end the process)."""
    running = spawn("greeter")
    yield running
    running.stop()
