"""docs/protocol.md and the conformance kit name the same numbered rules, and the guide lists every status code
the HostBridge can answer."""

from __future__ import annotations

import re
from pathlib import Path

from host.conformance import CLAUSES

ROOT = Path(__file__).resolve().parents[2]
GUIDE = (ROOT / "docs" / "protocol.md").read_text()


def test_every_rule_the_guide_numbers_is_a_clause_of_the_kit_and_back() -> None:
    numbered = set(re.findall(r"\[(\d+\.\d+)\]", GUIDE))
    assert numbered == {c.id for c in CLAUSES}


def test_the_guide_lists_every_status_code_the_host_bridge_answers() -> None:
    used = set(re.findall(r"StatusCode\.([A-Z_]+)", (ROOT / "host" / "_bridge.py").read_text()))
    bridge_section = GUIDE.split("## 6. The HostBridge", 1)[1]
    assert used and {code for code in used if f"`{code}`" not in bridge_section} == set()
