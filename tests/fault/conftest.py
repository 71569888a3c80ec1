"""Fault-injection suite set-up: every test records (scenario, expected, observed); the table prints at the end."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

ROWS: list[tuple[str, str, str, str]] = []  # (scenario, expected, observed, result)


@pytest.fixture
def record(request: pytest.FixtureRequest) -> Callable[[str, str, str], None]:
    """record(scenario, expected, observed): one row of the summary table (result filled in after the test)."""

    def add(scenario: str, expected: str, observed: str) -> None:
        request.node._fault_row = (scenario, expected, observed)

    return add


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Any:
    outcome = yield
    report = outcome.get_result()
    row = getattr(item, "_fault_row", None)
    if report.when == "call" and row is not None:
        ROWS.append((*row, "pass" if report.passed else "FAIL"))
    elif report.when == "call" and report.failed:
        ROWS.append((item.name, "-", "test failed before recording", "FAIL"))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not ROWS:
        return
    headers = ("scenario", "expected", "observed", "result")
    caps = (44, 60, 80, 6)
    widths = [min(max(len(str(r[i])) for r in [headers, *ROWS]), caps[i]) for i in range(4)]

    def line(cells: tuple[str, ...]) -> str:
        return " | ".join(str(c)[: widths[i]].ljust(widths[i]) for i, c in enumerate(cells))

    terminalreporter.section("fault-injection summary")
    terminalreporter.write_line(line(headers))
    terminalreporter.write_line("-+-".join("-" * w for w in widths))
    for row in ROWS:
        terminalreporter.write_line(line(row))
