"""Fixtures for the zygote tests: a started zygote (always closed) and short scratch/runtime dirs."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from zy_helpers import Dirs

from host.sandbox._zygote import Zygote


@pytest.fixture
def dirs() -> Iterator[Dirs]:
    # Short paths: AF_UNIX socket paths are limited to 108 bytes.
    with tempfile.TemporaryDirectory(prefix="hwzy-", dir="/tmp") as base:
        yield Dirs(Path(base))


@pytest.fixture
async def zygote() -> AsyncIterator[Zygote]:
    z = Zygote()
    try:
        await z.start()
        yield z
    finally:
        await z.close()
