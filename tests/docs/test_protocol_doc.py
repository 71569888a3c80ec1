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
    used = set(re.findall(r"StatusCode\.([A-Z_]+)", (ROOT / "host" / "extensions" / "_bridge_server.py").read_text()))
    bridge_section = GUIDE.split("## 6. The HostBridge", 1)[1]
    assert used and {code for code in used if f"`{code}`" not in bridge_section} == set()


def test_the_per_event_observation_rpcs_are_deprecated_in_the_proto_and_the_guide() -> None:
    from extension_sdk.proto import extension_pb2 as pb

    methods = pb.DESCRIPTOR.services_by_name["Extension"].methods_by_name
    assert {name for name, m in methods.items() if m.GetOptions().deprecated} == {
        "AfterToolCall", "OnStepFinish", "OnChunk"}
    assert "`AfterToolCall`, `OnStepFinish` and `OnChunk` are **deprecated**" in GUIDE


def test_the_proto_features_comment_names_every_feature_the_host_knows() -> None:
    from host.conformance._checks_describe import KNOWN_FEATURES

    proto = (ROOT / "proto" / "hookwire" / "v1" / "extension.proto").read_text()
    features_line = next(line for line in proto.splitlines() if "repeated string features = 6;" in line)
    assert all(f'"{feature}"' in features_line for feature in KNOWN_FEATURES)
