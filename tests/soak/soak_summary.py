"""The soak's summary rows, filled by tests/soak/test_soak.py and printed at the end of the run by its conftest.

A module of its own (not conftest.py): a `from conftest import` would find another directory's conftest when pytest
is given several test directories at once."""

from __future__ import annotations

ROWS: list[tuple[str, str, str, str]] = []  # (check, expected, observed, result)
