"""Soak set-up: the summary table (like the fault suite's) printed at the end of the run."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from typing import Any  # noqa: E402

from soak_summary import ROWS  # noqa: E402


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not ROWS:
        return
    headers = ("check", "expected", "observed", "result")
    widths = [min(max(len(str(r[i])) for r in [headers, *ROWS]), cap) for i, cap in enumerate((36, 64, 160, 6))]

    def line(cells: tuple[str, ...]) -> str:
        return " | ".join(str(c)[: widths[i]].ljust(widths[i]) for i, c in enumerate(cells))

    terminalreporter.section("soak summary")
    terminalreporter.write_line(line(headers))
    terminalreporter.write_line("-+-".join("-" * w for w in widths))
    for row in ROWS:
        terminalreporter.write_line(line(row))
