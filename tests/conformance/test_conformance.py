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
FIXTURES = Path(__file__).resolve().parent / "fixtures"
BROKEN = FIXTURES / "broken.yaml"
HOOKWIRE = str(Path(sys.executable).parent / "hookwire")
PYTHON_SAMPLES = ("audit_log", "guard", "router", "token_meter", "tools")
BROKEN_CLAUSES = ["1.3", "1.4", "1.6", "2.1", "2.2", "3.3", "4.2", "4.4", "5.2", "5.4"]
BROKEN_MORE_CLAUSES = ["1.5", "2.3", "3.1", "3.2", "4.1", "4.3", "4.5", "4.6", "5.1", "5.2", "5.3", "5.5"]


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


def test_an_extension_granted_the_host_bridge_gets_a_working_one_during_the_test() -> None:
    report = _run(SAMPLES / "audit_log" / "manifest.yaml")  # its observers append to the workspace via the bridge
    assert next(r.seen for r in report.results if r.id == "4.2") == "handled 2 of 2"  # no handler errors


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


def test_second_broken_fixture_fails_exactly_the_clauses_it_breaks() -> None:
    report = _run(FIXTURES / "broken_more.yaml")
    assert report.failed_ids() == BROKEN_MORE_CLAUSES, _fails(report)
    rows = {r.id: r for r in report.results}
    assert rows["1.5"].seen.startswith("still running") and rows["2.3"].seen == "answered NOT_SERVING while serving"
    assert "frame 1: not a valid ExtensionFrame" in rows["4.3"].seen  # a malformed frame is reported, with its id
    assert "a frame with id 0 (observations)" in rows["4.3"].seen
    assert rows["4.5"].seen == "the next ack says handled 0; the prelude held 1 observation(s)"
    assert rows["4.6"].seen == ("the ack says handled 1; the frame held 3 observation(s) (1 in its batch, "
                                "2 in more_observations)")
    assert rows["5.5"].seen == "a frame with id 0 came back (cancel frames want no answer)"


def test_a_wrong_protocol_version_in_the_handshake_fails_it_and_stops_there() -> None:
    report = _run(FIXTURES / "broken_handshake.yaml")
    assert report.failed_ids() == ["1.1"], _fails(report)
    assert next(r.seen for r in report.results if r.id == "1.1") == "protocol version '2'; this host speaks '1'"
    assert report.status_of("3.1") == "SKIP"


def test_an_extension_already_serving_is_tested_at_its_endpoint(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    sock = tmp_path / "ext.sock"
    env = {k: v for k, v in os.environ.items() if k != "HOOKWIRE_MAGIC_COOKIE"} | {"HOOKWIRE_TOKEN": "kit-secret"}
    proc = subprocess.Popen([sys.executable, "-m", "sample_extensions.router", "--socket", str(sock)], cwd=ROOT,
                            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith(b"hookwire|1|")
        monkeypatch.setenv("HOOKWIRE_TOKEN", "kit-secret")
        report = _run(SAMPLES / "router" / "manifest.yaml", endpoint=f"unix:{sock}")
    finally:
        proc.kill()
        proc.wait()
    assert report.failed_ids() == [], _fails(report)
    assert report.target == f"unix:{sock}"
    assert {r.status for r in report.results if r.id.startswith("1.")} == {"SKIP"}
    assert report.status_of("2.1") == "PASS" and report.status_of("4.1") == "PASS"


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
    assert proc.stdout.rstrip().endswith("0 failed, 8 skipped")


def test_a_line_that_is_not_a_handshake_fails_1_1_and_names_what_was_printed(tmp_path: Path) -> None:
    manifest = tmp_path / "chatty.yaml"
    manifest.write_text('name: chatty\ncommand: [python, -c, "print(\'hello world\')"]\ntimeouts: {startMs: 5000}\n')
    report = _run(manifest)
    rows = {r.id: r for r in report.results}
    assert rows["1.1"].status == "FAIL" and rows["1.1"].seen.startswith("printed 'hello world' instead of the handshake")
    assert (rows["1.2"].status, rows["1.4"].status, rows["3.1"].status) == ("SKIP", "SKIP", "SKIP")
    assert report.failed_ids() == ["1.1", "1.6"]  # and without the cookie it exits 0
