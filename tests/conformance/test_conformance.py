"""The conformance kit (`hookwire ext test`): every sample passes, the broken fixture fails exactly the clauses
it breaks, and the command's exit code and JSON say so. Real processes, real gRPC, the default sandbox."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from host.conformance import CLAUSE_IDS, ConformanceReport, run_conformance

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_extensions"
BROKEN = Path(__file__).resolve().parent / "fixtures" / "broken.yaml"
HOOKWIRE = str(Path(sys.executable).parent / "hookwire")
PYTHON_SAMPLES = ("audit_log", "guard", "router", "token_meter", "tools")
BROKEN_CLAUSES = ["1.3", "1.4", "1.6", "2.1", "2.2", "3.3", "4.2", "4.4", "5.2", "5.4"]


def _run(manifest: Path, **kwargs: object) -> ConformanceReport:
    return asyncio.run(run_conformance(manifest, **kwargs))  # type: ignore[arg-type]


def _fails(report: ConformanceReport) -> str:
    return "\n".join(f"{r.id} {r.status} {r.seen}" for r in report.results if r.status == "FAIL")


@pytest.mark.parametrize("sample", PYTHON_SAMPLES)
def test_python_sample_passes_every_clause(sample: str) -> None:
    report = _run(SAMPLES / sample / "manifest.yaml")
    assert report.failed_ids() == [], _fails(report)
    assert [r.id for r in report.results] == list(CLAUSE_IDS)
    for always in ("1.1", "1.2", "1.3", "1.4", "1.5", "1.6", "2.1", "2.2", "2.3", "3.1", "3.2", "3.3", "5.2"):
        assert report.status_of(always) == "PASS", always


def test_node_sample_passes_every_clause() -> None:
    if shutil.which("node") is None or not (SAMPLES / "node_echo" / "node_modules" / "@grpc" / "grpc-js").is_dir():
        pytest.skip("node or sample_extensions/node_echo/node_modules missing (make node-deps)")
    report = _run(SAMPLES / "node_echo" / "manifest.yaml")
    assert report.failed_ids() == [], _fails(report)
    assert report.status_of("5.1") == "PASS"
    assert report.status_of("4.3") == "SKIP"  # no "connect": the unary path only


def test_broken_fixture_fails_exactly_the_clauses_it_breaks() -> None:
    report = _run(BROKEN)
    assert report.failed_ids() == BROKEN_CLAUSES, _fails(report)
    rows = {r.id: r for r in report.results}
    assert "beforeTurn called" in rows["1.3"].seen
    assert "Describe answered OK" in rows["2.1"].seen and "Shutdown without a token was accepted" in rows["2.1"].seen
    assert "tool 'bad_schema'" in rows["3.3"].seen and "properties/x/type" in rows["3.3"].seen
    assert rows["4.2"].seen == "handled 0 for a batch of 2 item(s)"
    assert "ended with NOT_FOUND" in rows["5.2"].seen
    assert rows["5.4"].seen.startswith("slow (")


def test_a_running_tool_call_that_does_not_hold_up_the_stream_is_shown() -> None:
    report = _run(SAMPLES / "tools" / "manifest.yaml", tool_inputs={"count_to": {"n": 3, "delayMs": 100}})
    row = next(r for r in report.results if r.id == "5.4")
    assert row.status == "PASS", row.seen
    assert "count_to: the next frame was answered" in row.seen


def test_ext_test_command_exits_1_and_lists_the_failed_clauses_as_json() -> None:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.run([HOOKWIRE, "ext", "test", str(BROKEN), "--json"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert data["passed"] is False
    assert [r["id"] for r in data["results"] if r["status"] == "FAIL"] == BROKEN_CLAUSES


def test_ext_test_command_exits_0_and_prints_a_row_per_clause_for_a_sample() -> None:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.run([HOOKWIRE, "ext", "test", str(SAMPLES / "router" / "manifest.yaml")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "  2.1  PASS  token: a call without x-hookwire-token is UNAUTHENTICATED" in proc.stdout
    assert proc.stdout.rstrip().endswith("0 failed, 7 skipped")
