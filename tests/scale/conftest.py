"""Fixtures for the beyond-one-machine tests: certificates, remote extension services, a real PostgreSQL."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from scale_helpers import Pki, Service, make_pki, start_service  # noqa: E402


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Callable[..., Service]]:
    started: list[Service] = []

    def start(**kwargs: object) -> Service:
        svc = start_service(tmp_path, **kwargs)  # type: ignore[arg-type]
        started.append(svc)
        return svc

    yield start
    for svc in started:
        svc.proc.kill()
        svc.proc.wait(10)
