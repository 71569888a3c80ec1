"""Helpers for the extension manager tests: manifests for the fixture extensions and process checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fixtures.manifests import fixture_manifest
from fixtures.processes import pids_with_arg, process_gone, wait_until  # noqa: F401 - re-exported for the tests

FIXTURES = Path(__file__).parent / "fixtures"


def write_manifest(tmp_path: Path, name: str, script: str, *args: str, **fields: Any) -> Path:
    """A manifest file for a fixture script (run from the fixtures dir) with extra manifest fields."""
    return fixture_manifest(tmp_path, FIXTURES, name, script, *args, **fields)


def hooks_manifest(tmp_path: Path, mode: str, name: str | None = None, **fields: Any) -> Path:
    name = name or f"hooks-{mode}"
    return write_manifest(tmp_path, name, "hooks_ext.py", "--mode", mode, "--name", name, **fields)
