"""Run hookwire's benchmarks side by side with their baselines; print a table and JSON; write results.json.

    .venv/bin/python -m bench                  every benchmark, full size (a few minutes)
    .venv/bin/python -m bench --quick          every benchmark, tiny (< 60 s); every key still written
    .venv/bin/python -m bench --only chunks    one benchmark (repeatable)
    .venv/bin/python -m bench --sandbox off    measure with another sandbox mode (default: ExtensionManager's, auto)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import sys
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from . import (  # noqa: E402
    chunks,
    cli_cold,
    cold_start,
    egress_proxy,
    ext_count,
    first_turn,
    history,
    hook_floor,
    hook_rtt,
    journal,
    litellm_floor,
    otel_off,
    scale_topology,
    scaling,
    streamed_turn,
    tool_vs_mcp,
    turn_overhead,
)
from ._common import BENCH_DIR, GOALS, Config, Section  # noqa: E402

BENCHMARKS: dict[str, ModuleType] = {
    m.NAME: m for m in (hook_rtt, hook_floor, chunks, streamed_turn, tool_vs_mcp, cold_start, turn_overhead, scaling,
                        ext_count, egress_proxy, history, scale_topology, journal, litellm_floor, otel_off, cli_cold,
                        first_turn)
}
#: Benchmarks a --quick run leaves out (they start a database and several processes, or several fresh interpreters
#: that each import litellm): run them with --only.
NOT_QUICK = {scale_topology.NAME, cli_cold.NAME, first_turn.NAME}
#: Which result keys each benchmark writes (for the table's order and the missing-key check).
KEYS: dict[str, tuple[str, ...]] = {
    "hook_rtt": ("hook_rtt_p50_us", "hook_rtt_p99_us", "echo_rtt_p50_us", "hook_vs_echo_ratio"),
    "hook_floor": ("stream_floor_rtt_p50_us", "hook_vs_stream_floor_ratio"),
    "chunks": ("chunks_per_s_1ext", "chunks_per_s_5ext", "host_cpu_us_per_chunk_per_ext"),
    "streamed_turn": ("streamed_turn_ratio_3ext",),
    "tool_vs_mcp": ("tool_rtt_p50_us", "mcp_tool_rtt_p50_us", "tool_vs_mcp_ratio"),
    "cold_start": ("cold_start_p50_ms", "cold_start_5_parallel_ms", "idle_rss_mb"),
    "turn_overhead": ("turn_overhead_ms_5ext", "turn_overhead_ratio_5ext", "turn_overhead_ms_5ext_loaded"),
    "scaling": ("concurrent_turns_per_s", "concurrent_turn_p99_ms", "concurrent_litellm_floor_turns_per_s",
                "concurrent_turns_vs_litellm_floor"),
    "ext_count": ("overhead_ms_by_ext_count", "overhead_ms_by_ext_count_before_turn"),
    "egress_proxy": ("egress_proxy_overhead_ms", "egress_proxy_ratio"),
    "scale_topology": ("topology_turns_per_s", "topology_turn_p99_ms", "single_sqlite_turns_per_s",
                       "single_sqlite_turn_p99_ms"),
    "litellm_floor": ("turn_vs_litellm_ratio", "litellm_call_cpu_ms"),
    "cli_cold": ("cli_run_cold_ms", "import_litellm_ms", "cli_run_cold_ratio"),
    "first_turn": ("first_turn_loop_lag_ms", "first_turn_loop_lag_ms_preloaded"),
    "history": ("host_ms_per_turn_10_msgs", "host_ms_per_turn_500_msgs", "loop_lag_p99_ms", "loop_lag_max_ms"),
    "journal": ("journal_us_per_entry", "journal_turn_ratio_5ext_deciders"),
    "otel_off": ("otel_off_overhead_pct", "otel_on_overhead_pct"),
}


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description="hookwire benchmarks")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: the whole run in well under a minute")
    parser.add_argument("--only", action="append", choices=sorted(BENCHMARKS), help="run only this benchmark")
    parser.add_argument("--out", type=Path, default=None,
                        help="where to write the results (default bench/results.json; with --only, "
                             "bench/results_<names>.json so a partial run never overwrites the full results)")
    parser.add_argument("--sandbox", choices=["off", "auto", "required"], default="auto")
    parser.add_argument("--rounds", type=int, default=0, help="ABAB rounds per comparison (default 6, quick 2)")
    return parser.parse_args(argv)


def _fmt(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_fmt(v)}" for k, v in value.items())
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _table(values: dict[str, Any], order: list[str]) -> str:
    rows = [("key", "value", "goal", "met?")]
    for key in order:
        goal = GOALS.get(key)
        value = values.get(key)
        met = goal.met(value) if goal else None
        rows.append((key, _fmt(value), goal.describe() if goal else "", "" if met is None else ("yes" if met else "NO")))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(w) if i != 1 else cell.rjust(w) for i, (cell, w) in enumerate(zip(r, widths)))
             for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    cfg = Config(quick=args.quick, sandbox=args.sandbox, rounds=args.rounds)
    names = list(dict.fromkeys(args.only)) if args.only else [n for n in BENCHMARKS if not (args.quick and n in NOT_QUICK)]
    out: Path = args.out or (BENCH_DIR / ("results.json" if not args.only else f"results_{'_'.join(names)}.json"))
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    notes: list[str] = []
    failed: dict[str, str] = {}
    durations: dict[str, float] = {}
    started = time.perf_counter()
    for name in names:
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        try:
            section: Section = asyncio.run(BENCHMARKS[name].run(cfg))
        except Exception as exc:  # keep going: one broken benchmark must not hide the others' figures
            traceback.print_exc()
            failed[name] = f"{type(exc).__name__}: {exc}"
            section = Section(values={k: None for k in KEYS[name]})
        durations[name] = round(time.perf_counter() - t0, 1)
        values.update(section.values)
        extra.update(section.extra)
        notes.extend(section.notes)
        print(f"[bench] {name} done in {durations[name]} s", file=sys.stderr, flush=True)
    order = [k for n in names for k in KEYS[n]]
    goals_met = {k: GOALS[k].met(values.get(k)) for k in order if k in GOALS}
    results: dict[str, Any] = {
        **{k: values.get(k) for k in order},
        "meta": {
            "sandbox_mode": cfg.sandbox,
            "quick": cfg.quick,
            "ab_rounds": cfg.ab_rounds,
            "benchmarks": names,
            "seconds": round(time.perf_counter() - started, 1),
            "durations_s": durations,
            "goals": {k: GOALS[k].describe() for k in order if k in GOALS},
            "goals_met": goals_met,
            "failed": failed,
            "extra": extra,
            "notes": notes,
            "python": platform.python_version(),
            "machine": f"{platform.machine()} {os.cpu_count()} cpu, {platform.release()}",
        },
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print()
    print(_table(values, order))
    if extra:
        print("\nextra: " + "; ".join(f"{k}={_fmt(v)}" for k, v in extra.items()))
    for note in notes:
        print(f"note: {note}")
    print(f"\nsandbox mode: {cfg.sandbox}; results written to {out}")
    if failed:
        print("FAILED: " + "; ".join(f"{k}: {v}" for k, v in failed.items()))
    print(json.dumps(results))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
