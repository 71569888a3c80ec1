"""`python -m bench --quick --rounds 1` runs every benchmark and writes every result key as a number (no figure
asserted). One ABAB round per comparison instead of --quick's two: every benchmark still runs each of its sides and
writes every key, in about two thirds of the time (`make bench` is the measurement; this proves the bench runs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

NUMBER_KEYS = (
    "hook_rtt_p50_us", "hook_rtt_p99_us", "echo_rtt_p50_us", "hook_vs_echo_ratio",
    "chunks_per_s_1ext", "chunks_per_s_5ext", "host_cpu_us_per_chunk_per_ext",
    "streamed_turn_ratio_3ext",
    "tool_rtt_p50_us", "mcp_tool_rtt_p50_us", "tool_vs_mcp_ratio",
    "cold_start_p50_ms", "cold_start_5_parallel_ms", "idle_rss_mb",
    "turn_overhead_ms_5ext", "turn_overhead_ratio_5ext",
    "stream_floor_rtt_p50_us", "hook_vs_stream_floor_ratio", "turn_overhead_ms_5ext_loaded",
    "concurrent_turns_per_s", "concurrent_turn_p99_ms", "concurrent_litellm_floor_turns_per_s",
    "concurrent_turns_vs_litellm_floor",
    "egress_proxy_overhead_ms", "egress_proxy_ratio",
    "host_ms_per_turn_10_msgs", "host_ms_per_turn_500_msgs", "loop_lag_p99_ms", "loop_lag_max_ms",
    "turn_vs_litellm_ratio", "litellm_call_cpu_ms",
    "otel_off_overhead_pct", "otel_on_overhead_pct",
    "journal_us_per_entry", "journal_turn_ratio_5ext_deciders",
)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value  # not NaN


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_quick_run_of_one_round_writes_every_key_as_a_number(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--rounds", "1", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=230,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads(out.read_text())
    for key in NUMBER_KEYS:
        assert _is_number(results.get(key)), f"{key} = {results.get(key)!r}"
    for series in ("overhead_ms_by_ext_count", "overhead_ms_by_ext_count_before_turn"):
        by_count = results[series]
        assert sorted(by_count, key=int) == ["1", "2", "5", "10", "20"], series
        assert all(_is_number(v) for v in by_count.values()), by_count
    assert (results["meta"]["sandbox_mode"], results["meta"]["ab_rounds"]) == ("auto", 1)
    # The last stdout line is the same results as machine-readable JSON.
    assert json.loads(done.stdout.strip().splitlines()[-1]) == results
